import Foundation
import OTBase
@testable import OTServer
import OTWire
import XCTest

/// The server's sans-IO core, with virtual time and integer sockets.
final class SignalingRouterTests: XCTestCase {
    let project = Project(apiKey: "100", secret: "abcdef0123456789")
    let ms: Int64 = 1_800_000_000_000
    var t = Instant(micros: 5_000_000)

    func makeRouter(_ tweak: (inout ServerLimits) -> Void = { _ in }) throws -> (SignalingRouter, String) {
        var limits = ServerLimits()
        tweak(&limits)
        let r = SignalingRouter(projects: [project], limits: limits)
        return (r, try r.createSession(apiKey: project.apiKey, nowMillis: ms))
    }

    func token(_ sid: String, _ role: SessionRole = .publisher) throws -> String {
        try ClientToken(apiKey: project.apiKey, sessionId: sid, role: role, createTime: ms / 1000).mint(secret: project.secret)
    }

    /// Connects a socket; returns its connection id and resume token.
    func join(_ r: SignalingRouter, _ sid: String, socket: Int, role: SessionRole = .publisher) throws -> (String, String) {
        let out = try connectSocket(r, project, sid: sid, socket: socket, role: role, now: t, nowMillis: ms)
        guard case .send([socket], .connected(let info))? = out.first else { XCTFail("not connected: \(out)"); return ("", "") }
        return (info.connection.id, info.resumeToken)
    }

    func messages(_ out: [SignalingRouter.Output], to socket: Int) -> [ServerMessage] {
        out.compactMap { if case .send(let ids, let m) = $0, ids.contains(socket) { m } else { nil } }
    }

    func replyCode(_ out: [SignalingRouter.Output], _ socket: Int) -> Int32?? {
        for m in messages(out, to: socket) { if case .reply(_, let code, _, _, _) = m { return .some(code) } }
        return nil
    }

    /// Fuzz/corpus/control/'s client messages, messages naming this session's own stream and connections, and
    /// seeded mutations of them (extreme numbers among them), from a moderator, a publisher and a socket that has
    /// not connected, with the clock moving on: the router may refuse them, never trap.
    func testMutatedClientMessagesNeverTrapTheRouter() throws {
        let (r, sid) = try makeRouter()
        let (modId, _) = try join(r, sid, socket: 1, role: .moderator)
        _ = try join(r, sid, socket: 2)
        let pub = r.receive(socket: 2, .publish(id: 5, PublishRequest()), now: t, nowMillis: ms)
        guard case .reply(_, nil, _, let st?, _)? = messages(pub, to: 2).first else { return XCTFail() }
        let own: [ClientMessage] = [
            .signal(id: 1, type: "t", data: "d", to: modId), .updateStream(id: 2, streamId: st.id, hasAudio: false, hasVideo: true, width: 320, height: 240),
            .subscribe(id: 3, streamId: st.id), .mediaOffer(id: 4, peerId: "p", streamId: st.id, direction: .subscribe, sdp: "v=0"),
            .mediaCandidate(peerId: "p", candidate: "candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host", sdpMid: "0", sdpMLineIndex: 0),
            .forceMuteAll(id: 5, active: true, excludedStreams: [st.id]), .forceMuteStream(id: 6, streamId: st.id),
            .reportIssue(id: 7, issueId: "i", description: "d"), .ping(id: 8),
        ]
        let corpus = FuzzMutator.readCorpus(directory: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/control").path)
            .filter { (try? SignalingCodec.decodeClient(String(decoding: $0, as: UTF8.self))) != nil } + own.map { Array(SignalingCodec.encode($0).utf8) }
        var mutator = FuzzMutator(corpus: corpus, seed: 0x2047, maxRandomLength: 600)
        var decoded = 0
        for i in 0..<(corpus.count + 40_000) {
            guard let m = try? SignalingCodec.decodeClient(String(decoding: i < corpus.count ? corpus[i] : mutator.next(), as: UTF8.self)) else {
                continue
            }
            decoded += 1
            t = t + .milliseconds(10)
            for socket in [1, 2, 3] { _ = r.receive(socket: socket, m, now: t, nowMillis: ms + Int64(i) * 10) }
            _ = r.tick(now: t)
        }
        XCTAssertGreaterThan(decoded, 2_000, "enough mutations still decode to reach the router")
    }

    func testRolesAreEnforcedWhateverTheClientSends() throws {
        let (r, sid) = try makeRouter()
        let (pubId, _) = try join(r, sid, socket: 1)
        _ = try join(r, sid, socket: 2, role: .subscriber)
        _ = try join(r, sid, socket: 3, role: .publisheronly)
        let pub = r.receive(socket: 1, .publish(id: 5, PublishRequest()), now: t, nowMillis: ms)
        guard case .reply(_, nil, _, let st?, _)? = messages(pub, to: 1).first else { return XCTFail() }
        let cases: [(Int, ClientMessage, Int32)] = [
            (2, .signal(id: 1, type: "a", data: "", to: nil), 1535),
            (3, .signal(id: 1, type: "a", data: "", to: pubId), 1535),
            (2, .publish(id: 1, PublishRequest()), 1500),
            (3, .subscribe(id: 1, streamId: st.id), 1535),
            (1, .forceMuteAll(id: 1, active: true, excludedStreams: []), 1535),
            (1, .forceMuteStream(id: 1, streamId: st.id), 1535),
            (1, .forceDisconnect(id: 1, connectionId: pubId), 1520),
            (2, .unpublish(id: 1, streamId: st.id), 1535),
            (2, .updateStream(id: 1, streamId: st.id, hasAudio: false, hasVideo: nil, width: nil, height: nil), 1535),
        ]
        for (socket, msg, code) in cases {
            let out = r.receive(socket: socket, msg, now: t, nowMillis: ms)
            XCTAssertEqual(replyCode(out, socket), .some(code), "\(msg)")
            XCTAssertEqual(out.count, 1, "nothing but the refusal goes out for \(msg)")
        }
        XCTAssertEqual(r.streams(in: sid).first?.hasAudio, true)
        XCTAssertEqual(r.connections(in: sid).count, 3)
    }

    func testRequestsBeforeConnectAreRefused() throws {
        let (r, _) = try makeRouter()
        let out = r.receive(socket: 9, .signal(id: 1, type: "a", data: "", to: nil), now: t, nowMillis: ms)
        XCTAssertEqual(out, [.send([9], .error(code: 1010, message: "send connect first")), .close(9)])
    }

    func testSignalRateLimitIsATokenBucket() throws {
        let (r, sid) = try makeRouter { $0.signalsPerSecond = 10; $0.signalBurst = 5 }
        _ = try join(r, sid, socket: 1)
        var codes: [Int32?] = []
        for i in 0..<7 { codes.append(replyCode(r.receive(socket: 1, .signal(id: i, type: "a", data: "", to: nil), now: t, nowMillis: ms), 1) ?? 0) }
        XCTAssertEqual(codes, [nil, nil, nil, nil, nil, 1015, 1015])
        t = t + .milliseconds(100)   // one token back
        XCTAssertEqual(replyCode(r.receive(socket: 1, .signal(id: 8, type: "a", data: "", to: nil), now: t, nowMillis: ms), 1), .some(nil))
        XCTAssertEqual(replyCode(r.receive(socket: 1, .signal(id: 9, type: "a", data: "", to: nil), now: t, nowMillis: ms), 1), .some(1015))
    }

    func testConnectionLimitAndBadConnects() throws {
        let (r, sid) = try makeRouter { $0.maxConnectionsPerSession = 1 }
        _ = try join(r, sid, socket: 1)
        func refusal(_ req: ConnectRequest, socket: Int) -> Int32? {
            let out = r.receive(socket: socket, .connect(req), now: t, nowMillis: ms)
            guard case .send(_, .error(let code, _))? = out.first, out.last == .close(socket) else { return nil }
            return code
        }
        let tok = try token(sid)
        XCTAssertEqual(refusal(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: tok), socket: 2), 1027)
        XCTAssertEqual(refusal(ConnectRequest(id: 1, apiKey: "999", sessionId: sid, token: tok), socket: 3), 1004)
        XCTAssertEqual(refusal(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: "junk", token: tok), socket: 4), 1005)
        XCTAssertEqual(refusal(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: tok + "x"), socket: 5), 1004)
        XCTAssertEqual(refusal(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: tok), socket: 1), 1015, "connect twice")
    }

    func testDroppedConnectionResumesWithQueuedMessagesOrExpires() throws {
        let (r, sid) = try makeRouter { $0.reconnectGrace = .seconds(5) }
        let (aId, aResume) = try join(r, sid, socket: 1)
        let (bId, _) = try join(r, sid, socket: 2)
        XCTAssertEqual(r.socketClosed(1, now: t), [], "nobody is told yet")
        let sig = r.receive(socket: 2, .signal(id: 3, type: "t", data: "queued", to: aId), now: t, nowMillis: ms)
        XCTAssertEqual(replyCode(sig, 2), .some(nil))
        XCTAssertEqual(r.tick(now: t + .seconds(4)), [])
        // Wrong resume token: refused, the connection stays resumable.
        let bad = r.receive(socket: 3, .connect(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: try token(sid),
                                                               resumeConnectionId: aId, resumeToken: "nope")), now: t, nowMillis: ms)
        XCTAssertEqual(bad.first, .send([3], .error(code: 1022, message: "connection \(aId) cannot be resumed")))
        let back = r.receive(socket: 4, .connect(ConnectRequest(id: 7, apiKey: project.apiKey, sessionId: sid, token: try token(sid),
                                                                resumeConnectionId: aId, resumeToken: aResume)), now: t + .seconds(4), nowMillis: ms)
        let msgs = messages(back, to: 4)
        guard case .connected(let info)? = msgs.first else { return XCTFail("\(back)") }
        XCTAssertTrue(info.resumed)
        XCTAssertEqual(info.connection.id, aId)
        XCTAssertEqual(info.connections.map(\.id), [bId])
        XCTAssertEqual(msgs.dropFirst().first, .signal(type: "t", data: "queued", from: bId))
        XCTAssertEqual(r.tick(now: t + .seconds(60)), [], "resumed: nothing expires")

        // Drop again and let the grace period pass: b learns, with the stream first.
        _ = r.receive(socket: 4, .publish(id: 8, PublishRequest()), now: t, nowMillis: ms)
        _ = r.socketClosed(4, now: t + .seconds(60))
        let expired = r.tick(now: t + .seconds(65))
        let toB = messages(expired, to: 2)
        XCTAssertEqual(toB.count, 2)
        if case .streamDestroyed(_, let reason)? = toB.first { XCTAssertEqual(reason, "networkDisconnected") } else { XCTFail("\(toB)") }
        XCTAssertEqual(toB.last, .connectionDestroyed(connectionId: aId, reason: "networkDisconnected"))
        XCTAssertEqual(r.connections(in: sid).map(\.id), [bId])
    }

    func testMuteAllAffectsNewStreamsUntilDisabled() throws {
        let (r, sid) = try makeRouter()
        _ = try join(r, sid, socket: 1, role: .moderator)
        _ = try join(r, sid, socket: 2)
        func publish() -> StreamInfo? {
            for m in messages(r.receive(socket: 2, .publish(id: 1, PublishRequest()), now: t, nowMillis: ms), to: 2) {
                if case .reply(_, nil, _, let s?, _) = m { return s }
            }
            return nil
        }
        let keep = publish(), mute = publish()
        let out = try r.forceMuteAll(sessionId: sid, active: true, excluded: [keep?.id ?? ""])
        XCTAssertEqual(messages(out, to: 1).filter { if case .streamChanged = $0 { true } else { false } }.count, 1)
        XCTAssertTrue(messages(out, to: 2).contains(.muteForced(active: true, streamId: nil, excludedStreamIds: [keep?.id ?? ""])))
        XCTAssertEqual(r.streams(in: sid).map(\.hasAudio), [true, false])
        XCTAssertEqual(r.streams(in: sid).last?.id, mute?.id)
        XCTAssertEqual(publish()?.hasAudio, false)
        _ = try r.forceMuteAll(sessionId: sid, active: false, excluded: [])
        XCTAssertFalse(r.muteAllActive(in: sid))
        XCTAssertEqual(publish()?.hasAudio, true)
    }

    func testServerOperationsThrowDomainErrors() throws {
        let (r, sid) = try makeRouter()
        let (aId, _) = try join(r, sid, socket: 1)
        func expect(_ e: SignalingError, _ body: () throws -> Void, line: UInt = #line) {
            XCTAssertThrowsError(try body(), line: line) { XCTAssertEqual($0 as? SignalingError, e, line: line) }
        }
        expect(.sessionNotFound("nope")) { _ = try r.signalFromServer(sessionId: "nope", connectionId: nil, type: "a", data: "") }
        expect(.connectionNotFound("nope")) { _ = try r.signalFromServer(sessionId: sid, connectionId: "nope", type: "a", data: "") }
        expect(.badSignal(OTError(.signalDataTooLong))) {
            _ = try r.signalFromServer(sessionId: sid, connectionId: nil, type: "a", data: String(repeating: "x", count: 8193))
        }
        expect(.badSignal(OTError(.invalidSignalType))) { _ = try r.signalFromServer(sessionId: sid, connectionId: nil, type: "a b", data: "") }
        XCTAssertEqual(try r.signalFromServer(sessionId: sid, connectionId: aId, type: "a", data: "b"), [.send([1], .signal(type: "a", data: "b", from: nil))])
        expect(.connectionNotFound("nope")) { _ = try r.forceDisconnect(sessionId: sid, connectionId: "nope") }
        expect(.streamNotFound("nope")) { _ = try r.forceMuteStream(sessionId: sid, streamId: "nope") }
        expect(.streamNotFound("nope")) { _ = try r.stream(sessionId: sid, streamId: "nope") }
        expect(.sessionNotFound("nope")) { _ = try r.listStreams(sessionId: "nope") }
        expect(.invalidArgument("stream nope not found")) { try r.setLayoutClassLists(sessionId: sid, [("nope", ["a"])]) }
        // The WebSocket side replies with the same refusals' protocol codes.
        XCTAssertEqual(messages(r.receive(socket: 1, .signal(id: 7, type: "a", data: "", to: "nope"), now: t, nowMillis: ms), to: 1),
                       [.reply(id: 7, code: OTErrorCode.invalidParameter.rawValue, message: "no connection nope in this session", stream: nil, issueId: nil)])
        XCTAssertEqual(messages(r.receive(socket: 1, .subscribe(id: 8, streamId: "nope"), now: t, nowMillis: ms), to: 1),
                       [.reply(id: 8, code: OTErrorCode.serverCannotFindStream.rawValue, message: "stream nope not found", stream: nil, issueId: nil)])
        XCTAssertThrowsError(try r.createSession(apiKey: "unknown", nowMillis: ms))
    }

    func testProjectParsingRefusesVonageLookingSecrets() {
        XCTAssertEqual(try Project.parse("123:abc"), Project(apiKey: "123", secret: "abc"))
        XCTAssertThrowsError(try Project.parse("123:abc.key"))
        XCTAssertThrowsError(try Project.parse("123"))
        XCTAssertThrowsError(try Project.parse(":abc"))
        let g = Project.generate()
        XCTAssertNoThrow(try Project.parse("\(g.apiKey):\(g.secret)"))
        XCTAssertEqual(g.secret.count, 40)
    }
}
