import OTBase
@testable import OTWire
import XCTest

/// HTTP/1.1, WebSocket, tokens, session ids and signaling JSON.
final class ControlWireTests: XCTestCase {
    // Made by the official opentok 3.15.0 Python SDK with this key and secret.
    let key = "12345678", secret = "00112233445566778899aabbccddeeff00112233"
    let sid = "1_MX4xMjM0NTY3OH5-MTc5NjA0NTI1NjU0NH5hMDhmNGZlNThjNjJhYmFmMDYzOThjOWR-Un5-"
    let pyT1 = "T1==cGFydG5lcl9pZD0xMjM0NTY3OCZzaWc9YThlZDc4ODM3ZmYxOTE0MTlmZDVmNTE2NTdmZTQ3ODQ5YzQzNjUwNDpzZXNzaW9uX2lkPTFfTVg0eE1qTTBOVFkzT0g1LU1UYzVOakEwTlRJMU5qVTBOSDVoTURobU5HWmxOVGhqTmpKaFltRm1NRFl6T1Roak9XUi1VbjUtJmNyZWF0ZV90aW1lPTE3OTYwNDUyNTgmZXhwaXJlX3RpbWU9MTc5NjEwMDAwMCZyb2xlPW1vZGVyYXRvciZub25jZT05MzE0MyZpbml0aWFsX2xheW91dF9jbGFzc19saXN0PWZvY3VzK3gmY29ubmVjdGlvbl9kYXRhPW5hbWUlM0RhK2IlMjZ4JTNEMQ=="
    let pyJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzZXNzaW9uX2lkIjoiMV9NWDR4TWpNME5UWTNPSDUtTVRjNU5qQTBOVEkxTmpVME5INWhNRGhtTkdabE5UaGpOakpoWW1GbU1EWXpPVGhqT1dSLVVuNS0iLCJyb2xlIjoic3Vic2NyaWJlciIsImlhdCI6MTc5NjA0NTI1OCwiZXhwIjoxNzk2MTAwMDAwLCJzY29wZSI6InNlc3Npb24uY29ubmVjdCIsImNvbm5lY3Rpb25fZGF0YSI6ImQiLCJpc3MiOiIxMjM0NTY3OCIsImlzdCI6InByb2plY3QiLCJub25jZSI6NDA5Mjg4fQ.Ras9Qz6b1WcfR1zqkMvT0jLg6nolPhJthSnLB3xfKsk"
    let pyAuth = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3QiOiJwcm9qZWN0IiwiaWF0IjoxNzk2MDQ1MjU4LCJleHAiOjE3OTYwNDU0MzgsImlzcyI6IjEyMzQ1Njc4IiwianRpIjoiMC4wNzEyMzA1OTgyMTIyNzAyOSJ9.t5nKyR-o16mLe9ofWyQmrv8bLfOwLhPNnGyqay7ECXA"
    let pyNow: Int64 = 1_796_045_300

    func testPythonSDKTokensVerify() throws {
        let t1 = try ClientToken.verify(pyT1, apiKey: key, secret: secret, now: pyNow)
        XCTAssertEqual(t1.sessionId, sid)
        XCTAssertEqual(t1.role, .moderator)
        XCTAssertEqual(t1.connectionData, "name=a b&x=1")
        XCTAssertEqual(t1.initialLayoutClassList, ["focus", "x"])
        XCTAssertEqual(t1.expireTime, 1_796_100_000)
        XCTAssertEqual(t1.format, .t1)
        let j = try ClientToken.verify(pyJWT, apiKey: key, secret: secret, now: pyNow)
        XCTAssertEqual(j.role, .subscriber)
        XCTAssertEqual(j.connectionData, "d")
        XCTAssertEqual(j.format, .jwt)
        XCTAssertEqual(ClientToken.claimedAPIKey(pyT1), key)
        XCTAssertEqual(ClientToken.claimedAPIKey(pyJWT), key)
        XCTAssertNoThrow(try ProjectAuth.verify(pyAuth, apiKey: key, secret: secret, now: pyNow))
    }

    func testTokensAreRefusedWith1004() {
        func code(_ t: String, key k: String? = nil, secret s: String? = nil, now: Int64? = nil) -> OTErrorCode? {
            do { _ = try ClientToken.verify(t, apiKey: k ?? key, secret: s ?? secret, now: now ?? pyNow); return nil } catch {
                return (error as? OTError)?.code
            }
        }
        XCTAssertEqual(code(pyT1, now: 1_796_100_000), .authorizationFailure, "expired")
        XCTAssertEqual(code(pyJWT, now: 1_796_100_001), .authorizationFailure, "expired")
        XCTAssertEqual(code(pyT1, secret: "ff" + secret.dropFirst(2)), .authorizationFailure, "wrong secret")
        XCTAssertEqual(code(pyJWT, secret: "ff" + secret.dropFirst(2)), .authorizationFailure, "wrong secret")
        XCTAssertEqual(code(pyJWT, key: "87654321"), .authorizationFailure, "other api key")
        XCTAssertEqual(code(pyT1, key: "87654321"), .authorizationFailure, "other api key")
        // Flip one character of the signed part.
        var chars = Array(pyJWT)
        chars[60] = chars[60] == "A" ? "B" : "A"
        XCTAssertEqual(code(String(chars)), .authorizationFailure)
        guard let raw = TokenCrypto.base64Decode(String(pyT1.dropFirst(4))) else { return XCTFail() }
        let forged = String(decoding: raw, as: UTF8.self).replacingOccurrences(of: "role=moderator", with: "role=publisher")
        XCTAssertEqual(code("T1==" + TokenCrypto.base64(Array(forged.utf8))), .authorizationFailure)
        for junk in ["", "T1==", "T1==!!!", "a.b", "a.b.c", "eyJ.eyJ.x", "T1==" + TokenCrypto.base64(Array("no colon".utf8))] {
            XCTAssertEqual(code(junk), .authorizationFailure, junk)
        }
        XCTAssertThrowsError(try ProjectAuth.verify(pyAuth, apiKey: key, secret: secret, now: 1_796_045_438 + 31))
        XCTAssertThrowsError(try ProjectAuth.verify(pyAuth, apiKey: "1", secret: secret, now: pyNow))
        XCTAssertThrowsError(try ProjectAuth.verify(pyJWT, apiKey: key, secret: secret, now: pyNow), "a client token is not a project token") 
    }

    func testMintedTokensRoundTrip() throws {
        for format in [TokenFormat.jwt, .t1] {
            let t = try ClientToken(apiKey: key, sessionId: sid, role: .publisheronly, createTime: pyNow, connectionData: "x y+z%",
                                    initialLayoutClassList: ["a", "b"], format: format).mint(secret: secret)
            XCTAssertTrue(t.hasPrefix(format == .jwt ? "eyJ" : "T1=="))
            let v = try ClientToken.verify(t, apiKey: key, secret: secret, now: pyNow + 10)
            XCTAssertEqual(v.role, .publisheronly)
            XCTAssertEqual(v.connectionData, "x y+z%")
            XCTAssertEqual(v.initialLayoutClassList, ["a", "b"])
            XCTAssertEqual(v.expireTime, pyNow + ClientToken.defaultLifetime)
        }
        XCTAssertThrowsError(try ClientToken(apiKey: key, sessionId: sid, createTime: pyNow, connectionData: String(repeating: "d", count: 1001)).mint(secret: secret))
        XCTAssertThrowsError(try ClientToken(apiKey: key, sessionId: sid, createTime: pyNow, expireTime: pyNow + 31 * 86400).mint(secret: secret))
        XCTAssertThrowsError(try ClientToken(apiKey: "999", sessionId: sid, createTime: pyNow).mint(secret: secret))
    }

    func testJWTMatchesRFC7515HMACExample() throws {
        // RFC 7515 appendix A.1: HS256 over the given header and payload with the given key.
        let header = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
        let payload = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        guard let key = TokenCrypto.base64Decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow") else { return XCTFail() }
        let sig = TokenCrypto.hmacSHA256(key: key, Array((header + "." + payload).utf8))
        XCTAssertEqual(TokenCrypto.base64url(sig), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
    }

    func testSessionIdLayout() throws {
        let id = SessionID(apiKey: "4711", location: "10.0.0.1", createTimeMillis: 1234, random: "abc", relayed: true, e2ee: false)
        let s = id.string
        XCTAssertTrue(s.hasPrefix("1_"))
        XCTAssertTrue(s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
        XCTAssertEqual(TokenCrypto.base64Decode(String(s.dropFirst(2))).map { String(decoding: $0, as: UTF8.self) }, "1~4711~10.0.0.1~1234~abc~P~~")
        XCTAssertEqual(try SessionID.parse(s), id)
        XCTAssertEqual(try SessionID.parse(sid).apiKey, key)
        XCTAssertTrue(try SessionID.parse(SessionID(apiKey: "1", createTimeMillis: 1, e2ee: true).string).e2ee)
        for bad in ["", "2_abc", "1_", "1_!!!", "1_" + TokenCrypto.base64url(Array("1~~x".utf8)), String(repeating: "1_", count: 200)] {
            XCTAssertThrowsError(try SessionID.parse(bad)) { XCTAssertEqual(($0 as? OTError)?.code, .invalidSession) }
        }
    }

    func testHTTPRequestParsingIncrementalAndPipelined() throws {
        var p = HTTPParser(kind: .request)
        let raw = Array("POST /session/create HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-Opentok-Auth: t\r\n\r\nhelloGET /a?b=c+d&e=%41 HTTP/1.1\r\n\r\n".utf8)
        var got: [HTTPRequest] = []
        for b in raw {
            p.append([b])
            while let r = try p.nextRequest() { got.append(r) }
        }
        XCTAssertEqual(got.count, 2)
        XCTAssertEqual(got[0].method, "POST")
        XCTAssertEqual(got[0].body, Array("hello".utf8))
        XCTAssertEqual(got[0].headers["x-opentok-auth"], "t")
        XCTAssertEqual(got[1].path, "/a")
        XCTAssertEqual(got[1].query, ["b": "c d", "e": "A"])
        XCTAssertTrue(p.leftover.isEmpty)
    }

    func testHTTPParserRejectsBadInput() {
        let bad = ["GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nNoColon\r\n\r\n", "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                   "GET / HTTP/1.1\r\nContent-Length: zz\r\n\r\n", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                   "GET / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"]
        for b in bad {
            var p = HTTPParser(kind: .request)
            p.append(Array(b.utf8))
            XCTAssertThrowsError(try p.nextRequest(), b)
        }
        var big = HTTPParser(kind: .request, maxHeadBytes: 100)
        big.append(Array(repeating: UInt8(ascii: "a"), count: 200))
        XCTAssertThrowsError(try big.nextRequest())
    }

    func testHTTPResponseRoundTrip() throws {
        let r = HTTPResponse.json(200, Array("[1]".utf8))
        var p = HTTPParser(kind: .response)
        p.append(r.serialized())
        let back = try p.nextResponse()
        XCTAssertEqual(back?.status, 200)
        XCTAssertEqual(back?.headers["content-type"], "application/json")
        XCTAssertEqual(back?.body, Array("[1]".utf8))
        XCTAssertFalse(String(decoding: HTTPResponse(status: 204).serialized(), as: UTF8.self).contains("Content-Length"))
    }

    func testWebSocketAcceptKeyRFC6455Example() {
        XCTAssertEqual(WebSocketHandshake.acceptKey(for: "dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func testWebSocketHandshakeBothSides() throws {
        let key = WebSocketHandshake.makeKey()
        let req = WebSocketHandshake.clientRequest(host: "h", path: "/v2/signaling", key: key)
        let resp = try WebSocketHandshake.serverResponse(to: req)
        XCTAssertEqual(resp.status, 101)
        XCTAssertNoThrow(try WebSocketHandshake.validate(response: resp, key: key))
        XCTAssertThrowsError(try WebSocketHandshake.validate(response: resp, key: WebSocketHandshake.makeKey()))
        var noVersion = req
        noVersion.headers.set("Sec-WebSocket-Version", "8")
        XCTAssertThrowsError(try WebSocketHandshake.serverResponse(to: noVersion))
    }

    func testWebSocketFramesMaskedFragmentedAndSizes() throws {
        var r = WebSocketReader(requireMasked: true)
        let sizes = [0, 1, 125, 126, 65535, 65536, 70000]
        var bytes: [UInt8] = []
        for n in sizes { bytes += WebSocketFrame(opcode: .binary, payload: Array(repeating: UInt8(n & 0xFF), count: n)).encoded(maskKey: (1, 2, 3, 4)) }
        // A fragmented text message with a ping in the middle.
        bytes += WebSocketFrame(fin: false, opcode: .text, payload: Array("hel".utf8)).encoded(maskKey: (9, 8, 7, 6))
        bytes += WebSocketFrame(opcode: .ping, payload: [7]).encoded(maskKey: (1, 1, 1, 1))
        bytes += WebSocketFrame(fin: true, opcode: .continuation, payload: Array("lo".utf8)).encoded(maskKey: (5, 5, 5, 5))
        bytes += WebSocketFrame.close(code: 1000, reason: "bye").encoded(maskKey: (0, 0, 0, 0))
        var got: [WebSocketMessage] = []
        var i = 0
        while i < bytes.count {   // odd-sized chunks
            r.append(bytes[i..<min(bytes.count, i + 997)])
            i += 997
            while let m = try r.next() { got.append(m) }
        }
        XCTAssertEqual(got.count, sizes.count + 3)
        for (k, n) in sizes.enumerated() { XCTAssertEqual(got[k], .binary(Array(repeating: UInt8(n & 0xFF), count: n))) }
        XCTAssertEqual(got[sizes.count], .ping([7]))
        XCTAssertEqual(got[sizes.count + 1], .text("hello"))
        XCTAssertEqual(got[sizes.count + 2], .close(1000, "bye"))
    }

    func testWebSocketReaderRejectsViolations() {
        func fails(_ bytes: [UInt8], masked: Bool = true, max: Int = 1 << 20) -> Bool {
            var r = WebSocketReader(requireMasked: masked, maxMessageBytes: max)
            r.append(bytes)
            do { _ = try r.next(); return false } catch { return true }
        }
        XCTAssertTrue(fails(WebSocketFrame(opcode: .text, payload: [65]).encoded()), "unmasked client frame")
        XCTAssertTrue(fails(WebSocketFrame(opcode: .text, payload: [65]).encoded(maskKey: (1, 2, 3, 4)), masked: false), "masked server frame")
        XCTAssertTrue(fails([0x83, 0x80, 0, 0, 0, 0]), "unknown opcode")
        XCTAssertTrue(fails([0xC1, 0x80, 0, 0, 0, 0]), "reserved bit")
        XCTAssertTrue(fails([0x80, 0x80, 0, 0, 0, 0]), "continuation without start")
        XCTAssertTrue(fails(WebSocketFrame(fin: false, opcode: .ping, payload: []).encoded(maskKey: (0, 0, 0, 0))), "fragmented control")
        XCTAssertTrue(fails(WebSocketFrame(opcode: .text, payload: [0xFF, 0xFE]).encoded(maskKey: (0, 0, 0, 0))), "bad UTF-8")
        XCTAssertTrue(fails(WebSocketFrame(opcode: .binary, payload: Array(repeating: 0, count: 200)).encoded(maskKey: (0, 0, 0, 0)), max: 100))
        XCTAssertTrue(fails([0x82, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), "absurd length")
        // Truncated input is not an error, just incomplete.
        var r = WebSocketReader(requireMasked: true)
        r.append(WebSocketFrame(opcode: .text, payload: Array("abc".utf8)).encoded(maskKey: (1, 2, 3, 4)).dropLast())
        XCTAssertNil(try r.next())
    }

    func testSignalingMessagesRoundTrip() throws {
        let stream = StreamInfo(id: "s", connectionId: "c", name: "n", hasAudio: true, hasVideo: false, videoType: "screen", width: 1, height: 2,
                                creationTime: 3, layoutClassList: ["x"])
        let conn = ConnectionInfo(id: "c", creationTime: 5, data: "d")
        let client: [ClientMessage] = [
            .connect(ConnectRequest(id: 1, apiKey: "k", sessionId: "s", token: "t", eventsSuppressed: true, resumeConnectionId: "c", resumeToken: "r")),
            .signal(id: 2, type: "t", data: "d", to: nil), .signal(id: 3, type: "t", data: "\"quoted\"\n", to: "c"),
            .publish(id: 4, PublishRequest(name: "p")), .unpublish(id: 5, streamId: "s"),
            .updateStream(id: 6, streamId: "s", hasAudio: false, hasVideo: nil, width: 3, height: 4), .subscribe(id: 7, streamId: "s"),
            .forceMuteStream(id: 8, streamId: "s"), .forceMuteAll(id: 9, active: true, excludedStreams: ["a"]),
            .forceDisconnect(id: 10, connectionId: "c"), .reportIssue(id: 11, issueId: "i", description: "d"), .disconnect,
            .mediaClose(peerId: "p"), .mediaClose(peerId: "p", refusal: "no VP9"),
        ]
        for m in client { XCTAssertEqual(try SignalingCodec.decodeClient(SignalingCodec.encode(m)), m) }
        let server: [ServerMessage] = [
            .connected(ConnectedInfo(id: 1, connection: conn, role: .moderator, resumeToken: "r", connections: [conn], streams: [stream],
                                     muteForced: true, resumed: false, relayed: true, e2ee: false)),
            .reply(id: 2, code: nil, message: nil, stream: stream, issueId: nil), .reply(id: 3, code: 1535, message: "no", stream: nil, issueId: "i"),
            .connectionCreated(conn), .connectionDestroyed(connectionId: "c", reason: "r"), .streamCreated(stream),
            .streamDestroyed(streamId: "s", reason: "r"), .streamChanged(stream, property: "hasAudio"),
            .signal(type: "t", data: "d", from: nil), .signal(type: "t", data: "d", from: "c"),
            .muteForced(active: false, streamId: nil, excludedStreamIds: []),
            .muteForced(active: true, streamId: "s", excludedStreamIds: []),
            .muteForced(active: true, streamId: nil, excludedStreamIds: ["a", "b"]), .disconnected(reason: "x"), .error(code: 1004, message: "m"),
            .publisherMedia(peerId: "p", state: .interrupted), .publisherMedia(peerId: "p", state: .resumed),
            .mediaClose(peerId: "p", reason: "closed"), .mediaClose(peerId: "p", reason: "refused", message: "no VP9"),
        ]
        for m in server { XCTAssertEqual(try SignalingCodec.decodeServer(SignalingCodec.encode(m)), m) }
        for bad in ["", "[]", "{}", #"{"type":"nope"}"#, #"{"type":"signal","id":"x"}"#, #"{"type":"signal","id":1,"signalType":5,"data":""}"#] {
            XCTAssertThrowsError(try SignalingCodec.decodeClient(bad), bad)
        }
    }

    /// A stream carries its connection (with data), so a client reaches the owner of a stream whose connection it was
    /// never told of; a stream without it (older servers) still names the connection id, and a connection that names
    /// another id is not taken for the stream's.
    func testStreamCarriesItsConnection() throws {
        let conn = ConnectionInfo(id: "c", creationTime: 5, data: "name=ann")
        let s = StreamInfo(id: "s", connectionId: "c", name: "n", hasAudio: true, hasVideo: true, videoType: "camera", width: 1, height: 2,
                           creationTime: 3, connection: conn)
        let text = SignalingCodec.encode(ServerMessage.streamCreated(s))
        XCTAssertTrue(text.contains(#""connection":{"creationTime":5,"data":"name=ann","id":"c"}"#), text)
        guard case .streamCreated(let back) = try SignalingCodec.decodeServer(text) else { return XCTFail() }
        XCTAssertEqual(back.connection, conn)
        let bare = #"{"type":"streamCreated","stream":{"id":"s","connectionId":"c","name":"","hasAudio":true,"hasVideo":true,"videoType":"camera","width":1,"height":1,"creationTime":0,"layoutClassList":[]}}"#
        guard case .streamCreated(let old) = try SignalingCodec.decodeServer(bare) else { return XCTFail() }
        XCTAssertEqual(old.connection, ConnectionInfo(id: "c", creationTime: 0, data: ""))
        let liar = bare.replacingOccurrences(of: #""layoutClassList":[]"#, with: #""layoutClassList":[],"connection":{"id":"x","creationTime":1,"data":"d"}"#)
        guard case .streamCreated(let fixed) = try SignalingCodec.decodeServer(liar) else { return XCTFail() }
        XCTAssertEqual(fixed.connection.id, "c")
        // A mute all names its excluded streams; one stream's mute and a disable do not carry the list.
        XCTAssertTrue(SignalingCodec.encode(ServerMessage.muteForced(active: true, streamId: nil, excludedStreamIds: ["x"])).contains(#""excludedStreamIds":["x"]"#))
        XCTAssertFalse(SignalingCodec.encode(ServerMessage.muteForced(active: false, streamId: nil, excludedStreamIds: [])).contains("excluded"))
    }

    /// The audio-fallback fields and message: round trips, absent flags read as true, unknown events refused.
    func testAudioFallbackSignaling() throws {
        let off = StreamInfo(id: "s", connectionId: "c", name: "n", hasAudio: true, hasVideo: true, videoType: "camera", width: 1, height: 2,
                             creationTime: 3, audioFallbackEnabled: false)
        XCTAssertEqual(try SignalingCodec.decodeServer(SignalingCodec.encode(ServerMessage.streamCreated(off))), .streamCreated(off))
        let req = ClientMessage.publish(id: 1, PublishRequest(name: "p", audioFallbackEnabled: false))
        XCTAssertEqual(try SignalingCodec.decodeClient(SignalingCodec.encode(req)), req)
        for e in [MediaQualityEvent.videoDisableWarning, .videoDisableWarningLifted, .videoDisabled, .videoEnabled] {
            let m = ServerMessage.mediaQuality(peerId: "p", event: e)
            XCTAssertEqual(try SignalingCodec.decodeServer(SignalingCodec.encode(m)), m)
        }
        let legacyStream = #"{"type":"streamCreated","stream":{"id":"s","connectionId":"c","name":"","hasAudio":true,"hasVideo":true,"#
            + #""videoType":"camera","width":1,"height":1,"creationTime":0,"layoutClassList":[]}}"#
        guard case .streamCreated(let s) = try SignalingCodec.decodeServer(legacyStream) else { return XCTFail("not a streamCreated") }
        XCTAssertTrue(s.audioFallbackEnabled)
        let legacyPublish = #"{"type":"publish","id":1,"stream":{"name":"","hasAudio":true,"hasVideo":true,"videoType":"camera","width":1,"height":1}}"#
        guard case .publish(_, let p) = try SignalingCodec.decodeClient(legacyPublish) else { return XCTFail("not a publish") }
        XCTAssertTrue(p.audioFallbackEnabled)
        XCTAssertThrowsError(try SignalingCodec.decodeServer(#"{"type":"mediaQuality","peerId":"p","event":"explode"}"#))
    }

    func testSignalRules() {
        func code(_ t: String, _ d: String) -> OTErrorCode? {
            do { try SignalRules.validate(type: t, data: d); return nil } catch { return (error as? OTError)?.code }
        }
        XCTAssertNil(code("", ""))
        XCTAssertNil(code("Az09_~-", String(repeating: "x", count: 8192)))
        XCTAssertEqual(code(String(repeating: "a", count: 129), ""), .signalTypeTooLong)
        XCTAssertEqual(code("a.b", ""), .invalidSignalType)
        XCTAssertEqual(code("a", String(repeating: "x", count: 8193)), .signalDataTooLong)
    }

    func testFormEncodingBothSpaceSpellings() {
        XCTAssertEqual(FormEncoding.decode("a=b+c&d=e%20f&g&h=%zz"), ["a": "b c", "d": "e f", "g": "", "h": "%zz"])
        XCTAssertEqual(FormEncoding.encode([("k", "a b&c=d/é")]), "k=a+b%26c%3Dd%2F%C3%A9")
    }

    func testUnknownClientTypesAreToldApartFromMalformedMessages() {
        XCTAssertThrowsError(try SignalingCodec.decodeClient(#"{"type":"fromTheFuture","id":12,"x":[1]}"#)) {
            XCTAssertEqual($0 as? UnknownMessageType, UnknownMessageType(type: "fromTheFuture", id: 12))
        }
        XCTAssertThrowsError(try SignalingCodec.decodeClient(#"{"type":"fromTheFuture"}"#)) {
            XCTAssertEqual($0 as? UnknownMessageType, UnknownMessageType(type: "fromTheFuture", id: nil))
        }
        // A known type with missing fields, or no type at all, is malformed.
        for bad in [#"{"type":"signal","id":1}"#, #"{"id":1}"#, "[]"] {
            XCTAssertThrowsError(try SignalingCodec.decodeClient(bad)) { XCTAssertTrue($0 is WireError, bad) }
        }
    }

    func testCandidatesCarryTheirSectionAndOldOnesWithoutItStillDecode() throws {
        let old = try SignalingCodec.decodeClient(#"{"type":"mediaCandidate","peerId":"p","candidate":"candidate:1 1 udp 1 127.0.0.1 9 typ host"}"#)
        XCTAssertEqual(old, .mediaCandidate(peerId: "p", candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host", sdpMid: nil, sdpMLineIndex: nil))
        let new = ClientMessage.mediaCandidate(peerId: "p", candidate: "", sdpMid: "0", sdpMLineIndex: 0)
        let text = SignalingCodec.encode(new)
        XCTAssertTrue(text.contains(#""sdpMid":"0""#) && text.contains(#""sdpMLineIndex":0"#), text)
        XCTAssertEqual(try SignalingCodec.decodeClient(text), new)
        let forwarded = ServerMessage.mediaCandidate(peerId: "p", candidate: "c", sdpMid: "a", sdpMLineIndex: 2)
        XCTAssertEqual(try SignalingCodec.decodeServer(SignalingCodec.encode(forwarded)), forwarded)
        XCTAssertFalse(SignalingCodec.encode(ServerMessage.mediaCandidate(peerId: "p", candidate: "c")).contains("sdpMid"))
    }

    func testMediaMessagesNameTheirPeerConnectionAndOthersDoNot() {
        let media: [ServerMessage] = [
            .mediaAnswer(peerId: "p", sdp: "v=0"), .mediaCandidate(peerId: "p", candidate: ""), .mediaClose(peerId: "p", reason: "closed"),
            .subscriberSettings(peerId: "p", audio: true, video: false), .mediaQuality(peerId: "p", event: .videoDisabled),
        ]
        for m in media { XCTAssertEqual(m.mediaPeerId, "p", "\(m)") }
        XCTAssertNil(ServerMessage.signal(type: "t", data: "d", from: nil).mediaPeerId)
        XCTAssertNil(ServerMessage.disconnected(reason: "x").mediaPeerId)
    }
}

/// Random and mutated input never traps the control-plane parsers (they throw or wait for more).
final class ControlWireRobustnessTests: XCTestCase {
    func testParsersSurviveMutatedInput() {
        var rng = SeededRandom(seed: 42)
        let seeds: [[UInt8]] = [
            Array("POST /session/create HTTP/1.1\r\nContent-Length: 3\r\nX-OPENTOK-AUTH: a.b.c\r\n\r\nabc".utf8),
            WebSocketFrame(opcode: .text, payload: Array(#"{"type":"signal","id":1,"signalType":"a","data":"b"}"#.utf8)).encoded(maskKey: (1, 2, 3, 4)),
            Array(#"{"type":"connect","id":1,"apiKey":"k","sessionId":"s","token":"t","eventsSuppressed":false}"#.utf8),
            Array("T1==cGFydG5lcl9pZD0xJnNpZz1hYjpzZXNzaW9uX2lkPXg=".utf8),
        ]
        var survived = 0
        for round in 0..<3000 {
            var input = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                let i = Int.random(in: 0..<max(1, input.count), using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0 where !input.isEmpty: input[i] = UInt8.random(in: 0...255, using: &rng)
                case 1: input.insert(UInt8.random(in: 0...255, using: &rng), at: min(i, input.count))
                default: if !input.isEmpty { input.remove(at: i) }
                }
            }
            var http = HTTPParser(kind: .request)
            http.append(input)
            _ = try? http.nextRequest()
            var resp = HTTPParser(kind: .response)
            resp.append(input)
            _ = try? resp.nextResponse()
            var ws = WebSocketReader(requireMasked: true, maxMessageBytes: 4096)
            ws.append(input)
            while (try? ws.next()) != nil {}
            let text = String(decoding: input, as: UTF8.self)
            _ = try? SignalingCodec.decodeClient(text)
            _ = try? SignalingCodec.decodeServer(text)
            _ = try? ClientToken.verify(text, apiKey: "1", secret: "s", now: 0)
            _ = try? SessionID.parse(text)
            _ = FormEncoding.decode(text)
            survived += 1
        }
        XCTAssertEqual(survived, 3000)
    }
}
