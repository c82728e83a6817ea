import Foundation
import OTBase
@testable import OTWire
import XCTest

/// What an attacker can send to the control plane: RFC 9112 framing vectors, WebSocket close codes, absurd numbers
/// in every token time, oversized rosters.
final class HostileInputTests: XCTestCase {
    func status(_ raw: String, maxBody: Int = 1 << 20) -> Int? {
        var p = HTTPParser(kind: .request, maxBodyBytes: maxBody)
        p.append(Array(raw.utf8))
        do { _ = try p.nextRequest(); return nil } catch { return (error as? HTTPParseError)?.status ?? -1 }
    }

    func testHTTPFramingPerRFC9112() {
        let smuggle = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: 39\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
        XCTAssertEqual(status(smuggle), 400, "differing duplicate Content-Length")
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\nhello"), 400)
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 501)
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n"), 400, "chunked must be last")
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 411)
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello"), 400, "TE with CL")
        for cl in ["+2", "-0", "0x10", "2.0", "1e3", " ", "", "2 2", "１"] {
            XCTAssertEqual(status("POST /x HTTP/1.1\r\nContent-Length: \(cl)\r\n\r\nab"), 400, "Content-Length \(cl)")
        }
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n"), 413)
        XCTAssertEqual(status("POST /x HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", maxBody: 1000), 413)
        XCTAssertEqual(status("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), 400, "obsolete line folding")
        XCTAssertEqual(status("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n"), 400)
        XCTAssertEqual(status("GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello"), 400, "space before the colon")
        XCTAssertEqual(status("GET / HTTP/1.1\r\nX: a\nContent-Length: 5\r\n\r\nhello"), 400, "bare LF")
        XCTAssertEqual(status("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"), 400, "bare CR")
        XCTAssertEqual(status("GET / HTTP/1.1\r\nX: a\u{0}b\r\n\r\n"), 400, "NUL")
        XCTAssertEqual(status("GET / HTTP/2.0\r\n\r\n"), 400)
        XCTAssertEqual(status("G(T / HTTP/1.1\r\n\r\n"), 400)
        var big = HTTPParser(kind: .request, maxHeadBytes: 100)
        big.append(Array("GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 200))".utf8))
        XCTAssertThrowsError(try big.nextRequest()) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 431) }
        // Identical repeats are one length; leading zeros are digits.
        var p = HTTPParser(kind: .request)
        p.append(Array("POST /x HTTP/1.1\r\nContent-Length: 005\r\ncontent-length: 005\r\n\r\nhelloGET /y HTTP/1.0\r\n\r\n".utf8))
        XCTAssertEqual(try p.nextRequest()?.body, Array("hello".utf8))
        XCTAssertEqual(try p.nextRequest()?.path, "/y")
        XCTAssertFalse(p.hasBufferedBytes)
    }

    func testManyPipelinedRequestsParseInLinearTime() throws {
        var p = HTTPParser(kind: .request)
        let one = Array("GET /a HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        var all: [UInt8] = []
        for _ in 0..<20_000 { all += one }
        p.append(all)
        var n = 0
        while try p.nextRequest() != nil { n += 1 }
        XCTAssertEqual(n, 20_000)
    }

    func testWebSocketCloseCodes() {
        func code(_ bytes: [UInt8], max: Int = 1 << 20) -> UInt16? {
            var r = WebSocketReader(requireMasked: true, maxMessageBytes: max)
            r.append(bytes)
            do { while try r.next() != nil {}; return nil } catch { return (error as? WebSocketError)?.closeCode }
        }
        let k: (UInt8, UInt8, UInt8, UInt8) = (1, 2, 3, 4)
        XCTAssertEqual(code(WebSocketFrame(opcode: .text, payload: [0xC3, 0x28]).encoded(maskKey: k)), 1007)
        XCTAssertEqual(code(WebSocketFrame(fin: false, opcode: .text, payload: [0xE2, 0x82]).encoded(maskKey: k)
                            + WebSocketFrame(opcode: .continuation, payload: [0x28]).encoded(maskKey: k)), 1007, "split sequence, then invalid")
        XCTAssertEqual(code(WebSocketFrame(opcode: .close, payload: [0x03, 0xE8, 0xFF]).encoded(maskKey: k)), 1007, "close reason")
        XCTAssertEqual(code(WebSocketFrame(opcode: .text, payload: Array(repeating: 65, count: 200)).encoded(maskKey: k), max: 100), 1009)
        XCTAssertEqual(code(WebSocketFrame(fin: false, opcode: .text, payload: Array(repeating: 65, count: 80)).encoded(maskKey: k)
                            + WebSocketFrame(opcode: .continuation, payload: Array(repeating: 65, count: 80)).encoded(maskKey: k), max: 100), 1009)
        XCTAssertEqual(code([0x81, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), 1009, "absurd length")
        XCTAssertEqual(code(WebSocketFrame(opcode: .close, payload: [0x03, 0xED]).encoded(maskKey: k)), 1002, "1005 may not be sent")
        XCTAssertEqual(code(WebSocketFrame(opcode: .close, payload: [0x03]).encoded(maskKey: k)), 1002)
        XCTAssertEqual(code(WebSocketFrame(opcode: .text, payload: [65]).encoded()), 1002, "unmasked")
        // Valid multi-byte text split across fragments is fine.
        XCTAssertNil(code(WebSocketFrame(fin: false, opcode: .text, payload: [0xE2, 0x82]).encoded(maskKey: k)
                          + WebSocketFrame(opcode: .continuation, payload: [0xAC]).encoded(maskKey: k)))
    }

    // MARK: tokens

    let key = "12345678", secret = "00112233445566778899aabbccddeeff00112233"
    let now: Int64 = 1_796_045_300
    var sid: String { SessionID(apiKey: key, createTimeMillis: now * 1000).string }

    func jwt(_ claims: [String: JSONValue]) throws -> String {
        var c: [String: JSONValue] = ["iss": .string(key), "ist": "project", "iat": .int(now), "exp": .int(now + 600),
                                      "session_id": .string(sid), "role": "publisher", "scope": "session.connect", "nonce": 1]
        for (k, v) in claims { c[k] = v }
        return try JWT.sign(claims: c, secret: secret)
    }

    func t1(_ fields: [(String, String)]) -> String {
        var f: [(String, String)] = [("session_id", sid), ("create_time", String(now)), ("expire_time", String(now + 600)),
                                     ("role", "publisher"), ("nonce", "1")]
        for (k, v) in fields { f.removeAll { $0.0 == k }; f.append((k, v)) }
        let data = FormEncoding.encode(f)
        let sig = TokenCrypto.hex(TokenCrypto.hmacSHA1(key: Array(secret.utf8), Array(data.utf8)))
        return "T1==" + TokenCrypto.base64(Array("partner_id=\(key)&sig=\(sig):\(data)".utf8))
    }

    func refused(_ token: String) -> Bool {
        do { _ = try ClientToken.verify(token, apiKey: key, secret: secret, now: now); return false } catch {
            return (error as? OTError)?.code == .authorizationFailure
        }
    }

    /// Correctly signed tokens (a buggy backend) with absurd times are refused with 1004; nothing traps.
    func testAbsurdTimesInEveryTokenFieldAreRefused() throws {
        XCTAssertFalse(refused(try jwt([:])))
        XCTAssertFalse(refused(t1([])))
        let absurd: [JSONValue] = [1e19, 1e300, -1e19, -1, "nan", "NaN", "inf", "-inf", "1e400", "1e19", "9223372036854775808",
                                   "-9223372036854775809", "+1796045900", "0x10", " 1796045900", "1796045900 ", "", "١٢٣",
                                   .int(Int64.max), .int(Int64.min), .double(-0.5), .bool(true), .null, .array([1]), .object([:])]
        for v in absurd {
            XCTAssertTrue(refused(try jwt(["exp": v])), "exp \(v)")
            XCTAssertTrue(refused(try jwt(["iat": v])), "iat \(v)")
            var noExp = try JWT.verify(try jwt([:]), secret: secret)
            noExp["exp"] = nil
            noExp["expire_time"] = v
            XCTAssertTrue(refused(try JWT.sign(claims: noExp, secret: secret)), "expire_time \(v)")
            XCTAssertTrue(refused(try jwt(["create_time": v])), "create_time \(v)")
        }
        for v in ["1e19", "1e300", "nan", "-1", "18446744073709551616", "9999999999999999999999", "+5", "0x10", "1796045900e0", "inf", ""] {
            XCTAssertTrue(refused(t1([("expire_time", v)])), "T1 expire_time \(v)")
            XCTAssertTrue(refused(t1([("create_time", v)])), "T1 create_time \(v)")
        }
        // A lifetime beyond 30 days (plus the slack for clock differences) is refused; fractional seconds are fine.
        XCTAssertTrue(refused(try jwt(["exp": .int(now + ClientToken.maxLifetime + ClientToken.expirySlack + 1)])))
        XCTAssertFalse(refused(try jwt(["exp": .double(Double(now) + 600.5)])))
        XCTAssertFalse(refused(t1([("expire_time", "\(now + 600).25")])))
        XCTAssertTrue(refused(String(repeating: "a", count: ClientToken.maxTokenBytes + 1)))
    }

    func testAbsurdTimesInRESTAuthAreRefused() throws {
        func auth(_ claims: [String: JSONValue]) throws -> String {
            var c: [String: JSONValue] = ["ist": "project", "iss": .string(key), "iat": .int(now), "exp": .int(now + 180)]
            for (k, v) in claims { c[k] = v }
            return try JWT.sign(claims: c, secret: secret)
        }
        XCTAssertNoThrow(try ProjectAuth.verify(try auth([:]), apiKey: key, secret: secret, now: now))
        for v: JSONValue in [1e19, 1e300, -1e19, "nan", "1e19", .int(Int64.max), .int(Int64.min), .null] {
            XCTAssertThrowsError(try ProjectAuth.verify(try auth(["exp": v]), apiKey: key, secret: secret, now: now), "exp \(v)")
            XCTAssertThrowsError(try ProjectAuth.verify(try auth(["iat": v]), apiKey: key, secret: secret, now: now), "iat \(v)")
        }
    }

    func testTokenTimeParsing() {
        XCTAssertEqual(TokenTime.seconds("0"), 0)
        XCTAssertEqual(TokenTime.seconds("1796100000"), 1_796_100_000)
        XCTAssertEqual(TokenTime.seconds("1796100000.999"), 1_796_100_000)
        XCTAssertEqual(TokenTime.seconds("253402300799"), TokenTime.latest)
        for bad in ["253402300800", "1.", ".5", "1..2", "1.2.3", "", "-0", "00000000000001"] { XCTAssertNil(TokenTime.seconds(bad), bad) }
        XCTAssertEqual(TokenTime.seconds(.double(1e9)), 1_000_000_000)
        XCTAssertNil(TokenTime.seconds(.double(.nan)))
        XCTAssertNil(TokenTime.seconds(.double(.infinity)))
    }

    func testConnectionDataCountsScalarsNotGraphemes() throws {
        let combining = "e" + String(repeating: "\u{301}", count: 5000)   // one grapheme, 5001 scalars
        XCTAssertEqual(combining.count, 1)
        XCTAssertFalse(ConnectionDataRules.isValid(combining))
        XCTAssertTrue(ConnectionDataRules.isValid(String(repeating: "😀", count: 1000)))
        XCTAssertFalse(ConnectionDataRules.isValid(String(repeating: "😀", count: 1001)))
        let token = ClientToken(apiKey: key, sessionId: sid, createTime: now, connectionData: combining)
        XCTAssertThrowsError(try token.mint(secret: secret))
        XCTAssertTrue(refused(try jwt(["connection_data": .string(combining)])))
    }

    /// The longest tokens the minter makes still verify (the verifier's length cap is above them).
    func testLongestValidTokensVerify() throws {
        let data = String(repeating: "😀", count: 1000)
        for format in [TokenFormat.jwt, .t1] {
            let t = try ClientToken(apiKey: key, sessionId: sid, createTime: now, connectionData: data,
                                    initialLayoutClassList: [String(repeating: "é", count: 999)], format: format).mint(secret: secret)
            XCTAssertLessThanOrEqual(t.utf8.count, ClientToken.maxTokenBytes)
            XCTAssertEqual(try ClientToken.verify(t, apiKey: key, secret: secret, now: now).connectionData, data)
        }
    }

    func testLogEscapingForgesNoLines() {
        let forged = "ok\n[server] forged line\r\u{1B}[31mred\u{7}\u{2028}x\\"
        let e = Log.escaped(forged)
        XCTAssertFalse(e.contains("\n")); XCTAssertFalse(e.contains("\r")); XCTAssertFalse(e.contains("\u{1B}"))
        XCTAssertFalse(e.contains("\u{2028}"))
        XCTAssertTrue(e.hasPrefix("ok\\u{a}[server] forged line\\u{d}\\u{1b}[31mred\\u{7}\\u{2028}x\\\\"), e)
        XCTAssertEqual(Log.escaped(String(repeating: "a", count: 50), max: 10), String(repeating: "a", count: 10) + "…")
    }

    // MARK: rosters

    func testLargeRostersAreSentInPartsThatEachFit() throws {
        let data = String(repeating: "€", count: 1000)   // 3,000 UTF-8 bytes
        let conns = (0..<600).map { ConnectionInfo(id: "c\($0)", creationTime: 1, data: data) }
        let streams = (0..<300).map { StreamInfo(id: "s\($0)", connectionId: "c\($0)", name: String(repeating: "n", count: 1000), hasAudio: true,
                                                  hasVideo: true, videoType: "camera", width: 640, height: 480, creationTime: 1) }
        let info = ConnectedInfo(id: 1, connection: ConnectionInfo(id: "me", creationTime: 1, data: ""), role: .publisher, resumeToken: "r",
                                 connections: conns, streams: streams, muteForced: false, resumed: false, relayed: false, e2ee: false,
                                 reconnectGraceMillis: 10_000)
        XCTAssertGreaterThan(SignalingCodec.encode(ServerMessage.connected(info)).utf8.count, 1 << 20, "more than a client accepts at once")
        let frames = SignalingCodec.encodeFrames(.connected(info))
        XCTAssertGreaterThan(frames.count, 4)
        var gotConns: [ConnectionInfo] = [], gotStreams: [StreamInfo] = []
        for (i, f) in frames.enumerated() {
            XCTAssertLessThanOrEqual(f.utf8.count, SignalingCodec.maxRosterMessageBytes)
            switch try SignalingCodec.decodeServer(f) {
            case .connected(let c) where i == 0:
                XCTAssertEqual(c.rosterFollows, true)
                gotConns += c.connections; gotStreams += c.streams
            case .roster(let c, let s, let last):
                XCTAssertEqual(last, i == frames.count - 1)
                gotConns += c; gotStreams += s
            default: XCTFail("unexpected frame \(i)")
            }
        }
        XCTAssertEqual(gotConns, conns)
        XCTAssertEqual(gotStreams, streams)
        // A small roster stays one message without the flag.
        var small = info
        small.connections = Array(conns.prefix(2)); small.streams = []
        XCTAssertEqual(SignalingCodec.encodeFrames(.connected(small)), [SignalingCodec.encode(ServerMessage.connected(small))])
    }
}
