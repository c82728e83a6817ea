#if canImport(Glibc)
import Glibc
#endif
import Foundation
import OTBase
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// A blocking TCP socket connected to 127.0.0.1:`port` (reads time out after 10 s), or -1.
func loopbackSocket(port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
    var tv = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard rc == 0 else { close(fd); return -1 }
    return fd
}

/// A blocking loopback HTTP exchange: sends raw bytes, reads until the server closes.
func rawExchange(port: UInt16, _ bytes: [UInt8]) -> String {
    let fd = loopbackSocket(port: port)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buf, buf.count, 0)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

final class SessionServerTests: XCTestCase {
    var project = Project.generate()
    var server: SessionServer!

    override func setUpWithError() throws {
        server = SessionServer(.init(projects: [project]))
        try server.start()
    }
    override func tearDown() { server.stop() }

    func http(_ method: String, _ path: String, body: String = "", auth: String? = nil, contentType: String = "application/json") throws -> (Int, [String: String], String) {
        let token = try auth ?? ProjectAuth.mint(apiKey: project.apiKey, secret: project.secret, now: wallClockMillis() / 1000)
        let req = HTTPRequest(method: method, target: path, headers: HTTPHeaders([
            ("Host", "127.0.0.1"), ("X-OPENTOK-AUTH", token), ("Content-Type", contentType), ("Connection", "close"),
            ("Content-Length", String(body.utf8.count)), ("X-Stray", "ignored"),
        ]), body: Array(body.utf8))
        var p = HTTPParser(kind: .response)
        p.append(Array(rawExchange(port: server.port, req.serialized()).utf8))
        guard let resp = try p.nextResponse() else { XCTFail("no response"); return (0, [:], "") }
        var headers: [String: String] = [:]
        for f in resp.headers { headers[f.name.lowercased()] = f.value }
        return (resp.status, headers, String(decoding: resp.body, as: UTF8.self))
    }

    func testRESTCreateSessionAnswersExactJSON() throws {
        let (status, headers, body) = try http("POST", "/session/create", body: "p2p.preference=enabled&e2ee=false&archiveMode=manual",
                                               contentType: "application/x-www-form-urlencoded")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(headers["content-type"], "application/json")
        let arr = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]]
        let sid = try XCTUnwrap(arr?.first?["session_id"] as? String)
        XCTAssertEqual(arr?.first?["project_id"] as? String, project.apiKey)
        let parsed = try SessionID.parse(sid)
        XCTAssertTrue(parsed.relayed)
        XCTAssertEqual(parsed.apiKey, project.apiKey)
        let (s2, _, b2) = try http("POST", "/session/create", body: "p2p.preference=disabled&e2ee=true", contentType: "application/x-www-form-urlencoded")
        XCTAssertEqual(s2, 200)
        let sid2 = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(b2.utf8)) as? [[String: Any]])?.first?["session_id"] as? String)
        XCTAssertTrue(try SessionID.parse(sid2).e2ee)
        let (s3, _, b3) = try http("POST", "/session/create", body: "p2p.preference=enabled&e2ee=true", contentType: "application/x-www-form-urlencoded")
        XCTAssertEqual(s3, 400, "end-to-end encryption needs a routed session")
        XCTAssertTrue(b3.contains("routed"), b3)
    }

    func testRESTAuthentication() throws {
        let now = wallClockMillis() / 1000
        let wrongSecret = try ProjectAuth.mint(apiKey: project.apiKey, secret: "00", now: now)
        let expired = try ProjectAuth.mint(apiKey: project.apiKey, secret: project.secret, now: now - 1000, lifetime: 180)
        let noIst = try JWT.sign(claims: ["iss": .string(project.apiKey), "iat": .int(now), "exp": .int(now + 100)], secret: project.secret)
        for bad in [wrongSecret, expired, noIst, "garbage"] {
            XCTAssertEqual(try http("POST", "/session/create", auth: bad).0, 403)
        }
        let sid = try server.createSession(apiKey: project.apiKey)
        let other = Project.generate()
        let foreign = try ProjectAuth.mint(apiKey: other.apiKey, secret: other.secret, now: now)
        XCTAssertEqual(try http("GET", "/v2/project/\(project.apiKey)/session/\(sid)/stream", auth: foreign).0, 403)
        // iss as a number is accepted (Node).
        let numeric = try JWT.sign(claims: ["iss": .int(Int64(project.apiKey) ?? 0), "ist": "project", "iat": .int(now), "exp": .int(now + 300)],
                                   secret: project.secret)
        XCTAssertEqual(try http("GET", "/v2/project/\(project.apiKey)/session/\(sid)/stream", auth: numeric).0, 200)
    }

    func testRESTDrivesConnectedClients() throws {
        let sid = try server.createSession(apiKey: project.apiKey)
        let P = "/v2/project/\(project.apiKey)/session/\(sid)"
        let ra = Recorder(), rb = Recorder()
        let a = Session(apiKey: project.apiKey, sessionId: sid, delegate: ra, settings: SessionSettings(serverURL: server.apiURL))
        let b = Session(apiKey: project.apiKey, sessionId: sid, delegate: rb, settings: SessionSettings(serverURL: server.signalingURL))
        try a.connect(token: server.token(sessionId: sid))
        try b.connect(token: server.token(sessionId: sid, format: .t1))
        ra.waitFor(.connected); rb.waitFor(.connected)
        let box = Box<Result<StreamInfo, OTError>>()
        try a.publishStream(PublishRequest(name: "cam", videoType: "screen")) { box.put($0) }
        guard case .success(let st)? = box.get(), let aid = a.connection?.id, let bid = b.connection?.id else { return XCTFail() }

        XCTAssertEqual(try http("POST", "\(P)/signal", body: #"{"type":"t","data":"all"}"#).0, 204)
        ra.waitFor(.signal("t", "all", nil)); rb.waitFor(.signal("t", "all", nil))
        XCTAssertEqual(try http("POST", "\(P)/connection/\(bid)/signal", body: #"{"type":"t","data":"b"}"#).0, 204)
        rb.waitFor(.signal("t", "b", nil))
        XCTAssertEqual(try http("POST", "\(P)/signal", body: "{\"type\":\"t\",\"data\":\"\(String(repeating: "x", count: 8193))\"}").0, 413)

        let (ls, lh, lb) = try http("GET", "\(P)/stream")
        XCTAssertEqual(ls, 200)
        XCTAssertEqual(lh["content-type"], "application/json")
        let list = try JSONSerialization.jsonObject(with: Data(lb.utf8)) as? [String: Any]
        XCTAssertEqual(list?["count"] as? Int, 1)
        let item = (list?["items"] as? [[String: Any]])?.first
        XCTAssertEqual(item?["id"] as? String, st.id)
        XCTAssertEqual(item?["videoType"] as? String, "screen")
        XCTAssertEqual(item?["name"] as? String, "cam")
        XCTAssertEqual(try http("PUT", "\(P)/stream", body: "{\"items\":[{\"id\":\"\(st.id)\",\"layoutClassList\":[\"full\"]}]}").0, 200)
        let (gs, _, gb) = try http("GET", "\(P)/stream/\(st.id)")
        XCTAssertEqual(gs, 200)
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(gb.utf8)) as? [String: Any])?["layoutClassList"] as? [String], ["full"])
        XCTAssertEqual(try http("GET", "\(P)/stream/nope").0, 404)

        for spelling in ["excludedStreamIds", "excludedStreams", "excudedStreamIds"] {
            XCTAssertEqual(try http("POST", "\(P)/mute", body: "{\"active\":true,\"\(spelling)\":[\"\(st.id)\"]}").0, 200)
            XCTAssertEqual(server.streams(in: sid).first?.hasAudio, true, spelling)
        }
        rb.waitFor(.muteForced(true, nil))
        XCTAssertEqual(try http("POST", "\(P)/mute", body: #"{"active":false}"#).0, 200)
        rb.waitFor(.muteForced(false, nil))
        XCTAssertEqual(try http("POST", "\(P)/stream/\(st.id)/mute", body: "{}").0, 200)
        rb.waitFor(.changed(st.id, .hasAudio(false)))
        ra.waitFor(.muteForced(true, st.id))

        XCTAssertEqual(try http("DELETE", "\(P)/connection/\(aid)").0, 204)
        ra.waitFor(.disconnected)
        rb.waitFor(.streamDestroyed(st.id))
        rb.waitFor(.connectionDestroyed(aid))
        XCTAssertEqual(try http("DELETE", "\(P)/connection/\(aid)").0, 404)
        XCTAssertEqual(try http("GET", "/v2/project/\(project.apiKey)/session/\(SessionID(apiKey: project.apiKey, createTimeMillis: 1).string)/stream").0, 404)
        XCTAssertEqual(try http("GET", "/v2/project/\(project.apiKey)/archive").0, 404)
    }

    func testServesTheBrowserClientAndDemoPageOfThisCheckout() throws {
        let js = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../bindings/js")
        let client = try String(contentsOf: js.appendingPathComponent("otsession.js"), encoding: .utf8)
        let page = try String(contentsOf: js.appendingPathComponent("demo.html"), encoding: .utf8)
        let (status, headers, body) = try http("GET", "/js/otsession.js", auth: "")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(headers["content-type"], "text/javascript; charset=utf-8")
        XCTAssertEqual(headers["x-content-type-options"], "nosniff")
        XCTAssertEqual(body, client, "the server serves bindings/js/otsession.js byte for byte")
        for path in ["/demo", "/js/demo.html"] {
            let (s, h, b) = try http("GET", path + "?ignored=1", auth: "")
            XCTAssertEqual(s, 200, path)
            XCTAssertEqual(h["content-type"], "text/html; charset=utf-8")
            XCTAssertEqual(b, page)
        }
        // HEAD: the GET's headers, no body (read raw: a response parser would wait for Content-Length bytes).
        let head = rawExchange(port: server.port, Array("HEAD /js/otsession.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200 OK\r\n"), head)
        XCTAssertTrue(head.contains("\r\nContent-Length: \(client.utf8.count)\r\n"), head)
        XCTAssertTrue(head.hasSuffix("\r\n\r\n"), "no body after a HEAD response's head")
        XCTAssertEqual(try http("POST", "/js/otsession.js", auth: "").0, 405)
        XCTAssertEqual(try http("GET", "/js/other.js", auth: "").0, 404)
        XCTAssertEqual(try http("GET", "/js/../js/otsession.js", auth: "").0, 404)
    }

    func testMalformedHTTPAndUpgrades() {
        XCTAssertTrue(rawExchange(port: server.port, Array("NONSENSE\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 400"))
        let noKey = "GET /v2/signaling HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n"
        XCTAssertTrue(rawExchange(port: server.port, Array(noKey.utf8)).hasPrefix("HTTP/1.1 400"))
        XCTAssertTrue(rawExchange(port: server.port, Array("GET /nowhere HTTP/1.1\r\nConnection: close\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 404"))
        XCTAssertTrue(rawExchange(port: server.port, Array("POST /session/create HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 403"))
        // The server still serves after all that.
        XCTAssertNoThrow(try server.createSession(apiKey: project.apiKey))
    }

    /// With `allowedOrigins` set, a page of this server (its Origin's host and port are the request's Host) still
    /// upgrades, as does a listed origin; a foreign Origin gets 403.
    func testSameOriginUpgradesPassTheOriginListAndForeignOnesAreRefused() throws {
        let s = SessionServer(.init(projects: [project], allowedOrigins: ["https://app.example.com"]))
        try s.start()
        defer { s.stop() }
        /// The status line of an upgrade with these headers (the socket closes after reading the head).
        func upgrade(origin: String, host: String) -> String {
            let fd = loopbackSocket(port: s.port)
            guard fd >= 0 else { return "" }
            defer { close(fd) }
            let req = "GET /v2/signaling HTTP/1.1\r\nHost: \(host)\r\nOrigin: \(origin)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            _ = Array(req.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            var head: [UInt8] = []
            var b: UInt8 = 0
            while !head.suffix(4).elementsEqual([13, 10, 13, 10]), recv(fd, &b, 1, 0) == 1 { head.append(b) }
            return String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n").first ?? ""
        }
        let here = "127.0.0.1:\(s.port)"
        XCTAssertTrue(upgrade(origin: "http://\(here)", host: here).hasPrefix("HTTP/1.1 101"), "the server's own /demo page")
        XCTAssertTrue(upgrade(origin: "HTTP://127.0.0.1:\(s.port)", host: here).hasPrefix("HTTP/1.1 101"), "scheme and host are case-insensitive")
        XCTAssertTrue(upgrade(origin: "https://app.example.com", host: here).hasPrefix("HTTP/1.1 101"), "a listed origin")
        XCTAssertTrue(upgrade(origin: "https://evil.example.com", host: here).hasPrefix("HTTP/1.1 403"), "a foreign origin")
        XCTAssertTrue(upgrade(origin: "http://127.0.0.1:\(s.port &+ 1)", host: here).hasPrefix("HTTP/1.1 403"), "another port is another origin")
        XCTAssertTrue(upgrade(origin: "http://evil.example.com", host: "evil.example.com").hasPrefix("HTTP/1.1 101"),
                      "same origin as the Host the client sent: a name pointing at this server")
    }

    func testUnknownMessageTypesGetAnErrorReplyPingsAPlainOneAndTheConnectionStays() throws {
        let sid = try server.createSession(apiKey: project.apiKey)
        let fd = loopbackSocket(port: server.port)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        func sendText(_ text: String) {
            let frame = WebSocketFrame(opcode: .text, payload: Array(text.utf8)).encoded(maskKey: (9, 8, 7, 6))
            _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        }
        var http = HTTPParser(kind: .response), reader = WebSocketReader(requireMasked: false)
        var upgraded = false
        /// The next JSON text message from the server.
        func next() throws -> [String: Any] {
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                if upgraded, let m = try reader.next() {
                    if case .text(let t) = m { return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(t.utf8)) as? [String: Any]) }
                    continue
                }
                let n = recv(fd, &buf, buf.count, 0)
                guard n > 0 else { throw OTError(.connectionDropped, "closed") }
                if upgraded { reader.append(buf[0..<n]) } else {
                    http.append(buf[0..<n])
                    if try http.nextResponse() != nil { upgraded = true; reader.append(http.takeLeftover()) }
                }
            }
        }
        let key = WebSocketHandshake.makeKey()
        let hs = WebSocketHandshake.clientRequest(host: "x", path: SessionServer.signalingPath, key: key).serialized()
        _ = hs.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        // Before connect too: a newer client may announce itself first.
        sendText(#"{"type":"hello","id":3,"features":["x"]}"#)
        var m = try next()
        XCTAssertEqual(m["type"] as? String, "reply")
        XCTAssertEqual(m["id"] as? Int, 3)
        XCTAssertEqual(m["code"] as? Int, 1011)
        XCTAssertEqual(m["message"] as? String, #"unknown message type "hello""#)
        // A ping request (browsers' liveness check) gets a plain reply, before connect as after.
        sendText(#"{"type":"ping","id":1}"#)
        m = try next()
        XCTAssertEqual([m["type"] as? String, m["id"].map { "\($0)" }], ["reply", "1"])
        XCTAssertNil(m["code"])
        sendText(SignalingCodec.encode(ClientMessage.connect(ConnectRequest(id: 4, apiKey: project.apiKey, sessionId: sid, token: try server.token(sessionId: sid)))))
        XCTAssertEqual(try next()["type"] as? String, "connected")
        sendText(#"{"type":"futureRequest","id":5,"streamId":"s"}"#)
        sendText(#"{"type":"futureNotification"}"#)  // no id: nothing to answer, ignored
        sendText(SignalingCodec.encode(ClientMessage.signal(id: 6, type: "t", data: "still here", to: nil)))
        m = try next()
        XCTAssertEqual([m["type"] as? String, m["id"].map { "\($0)" }, m["code"].map { "\($0)" }], ["reply", "5", "1011"])
        var rest = [try next(), try next()].sorted { ($0["type"] as? String ?? "") < ($1["type"] as? String ?? "") }
        XCTAssertEqual(rest[0]["type"] as? String, "reply")
        XCTAssertEqual(rest[0]["id"] as? Int, 6)
        XCTAssertNil(rest[0]["code"])
        XCTAssertEqual(rest[1]["data"] as? String, "still here")
        rest = []
        sendText(SignalingCodec.encode(ClientMessage.ping(id: 7)))
        m = try next()
        XCTAssertEqual([m["type"] as? String, m["id"].map { "\($0)" }], ["reply", "7"])
        XCTAssertNil(m["code"])
        // Malformed JSON still closes the socket with an error.
        sendText("{not json")
        XCTAssertEqual(try next()["type"] as? String, "error")
    }

    func testHundredsOfConnectionsOnOneServerThread() throws {
        let sessions = try (0..<10).map { _ in try server.createSession(apiKey: project.apiKey) }
        var clients: [(Session, Recorder)] = []
        for i in 0..<300 {
            let rec = Recorder()
            let s = Session(apiKey: project.apiKey, sessionId: sessions[i % 10], delegate: rec,
                            settings: SessionSettings(serverURL: server.signalingURL, connectionEventsSuppressed: true))
            try s.connect(token: server.token(sessionId: sessions[i % 10]))
            clients.append((s, rec))
        }
        for (_, r) in clients { r.waitFor(.connected) }
        XCTAssertEqual(server.openSockets, 300)
        XCTAssertEqual(sessions.map { server.connections(in: $0).count }, Array(repeating: 30, count: 10))
        try clients[0].0.signal(type: "hello", data: "x")
        for (i, c) in clients.enumerated() where i % 10 == 0 { c.1.waitFor(.signal("hello", "x", clients[0].0.connection?.id)) }
        XCTAssertFalse(clients[1].1.events.contains(.signal("hello", "x", clients[0].0.connection?.id)))
        for (s, _) in clients { try s.disconnect() }
        for (_, r) in clients { r.waitFor(.disconnected) }
    }
}

final class KeepaliveTests: XCTestCase {
    func testIdleClientsStayAndDeadSocketsAreDropped() throws {
        let project = Project.generate()
        var limits = ServerLimits()
        limits.reconnectGrace = .milliseconds(100)
        let server = SessionServer(.init(projects: [project], limits: limits, pingInterval: .milliseconds(100)))
        try server.start()
        defer { server.stop() }
        let sid = try server.createSession(apiKey: project.apiKey)
        // A live client answers pings (and pings itself) and stays connected while idle.
        let rec = Recorder()
        let live = Session(apiKey: project.apiKey, sessionId: sid, delegate: rec,
                           settings: SessionSettings(serverURL: server.signalingURL, pingInterval: .milliseconds(100)))
        try live.connect(token: server.token(sessionId: sid))
        rec.waitFor(.connected)
        // A dead client: completes the upgrade and connect, then never reads or answers again.
        let fd = loopbackSocket(port: server.port)
        defer { close(fd) }
        let key = WebSocketHandshake.makeKey()
        var bytes = WebSocketHandshake.clientRequest(host: "x", path: SessionServer.signalingPath, key: key).serialized()
        let hello = ClientMessage.connect(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: try server.token(sessionId: sid)))
        bytes += WebSocketFrame(opcode: .text, payload: Array(SignalingCodec.encode(hello).utf8)).encoded(maskKey: (1, 2, 3, 4))
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        rec.wait("dead client joins") { $0.contains { if case .connectionCreated = $0 { true } else { false } } }
        guard case .connectionCreated(let deadId)? = rec.events.first(where: { if case .connectionCreated = $0 { true } else { false } }) else { return XCTFail() }
        // Silent for three ping intervals: dropped, then expired after the grace period.
        rec.waitFor(.connectionDestroyed(deadId))
        XCTAssertEqual(live.status, .connected)
        XCTAssertFalse(rec.events.contains(.disconnected))
        XCTAssertEqual(server.connections(in: sid).map(\.id), [live.connection?.id ?? ""])
    }
}
