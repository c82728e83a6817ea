import OTBase
@testable import OTServer
import OTWire
import XCTest

/// The router's caps (docs/protocol.md, "Limits"), with the helpers of `SignalingRouterTests`.
extension SignalingRouterTests {
    func router(_ tweak: (inout ServerLimits) -> Void = { _ in }) throws -> (SignalingRouter, String) { try makeRouter(tweak) }

    func connect(_ r: SignalingRouter, _ sid: String, socket: Int, token: String) -> [SignalingRouter.Output] {
        r.receive(socket: socket, .connect(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: token)), now: t, nowMillis: ms)
    }

    func refusalCode(_ out: [SignalingRouter.Output]) -> Int32? {
        if case .send(_, .error(let code, _))? = out.first { return code }
        return nil
    }


    func testOneTokenOpensAtMostItsShareOfConnections() throws {
        let (r, sid) = try router { $0.maxConnectionsPerToken = 3 }
        let shared = try token(sid)
        for s in 1...3 { XCTAssertNil(refusalCode(connect(r, sid, socket: s, token: shared))) }
        XCTAssertEqual(refusalCode(connect(r, sid, socket: 4, token: shared)), 1027)
        XCTAssertNil(refusalCode(connect(r, sid, socket: 5, token: try token(sid))), "another token still joins")
        // A clean leave frees the slot.
        _ = r.receive(socket: 1, .disconnect, now: t, nowMillis: ms)
        XCTAssertNil(refusalCode(connect(r, sid, socket: 6, token: shared)))
        XCTAssertEqual(ServerLimits().maxConnectionsPerToken, 100)
        XCTAssertEqual(ServerLimits().maxConnectionsPerSession, 2_000)
    }

    func testStreamsAreCappedPerConnectionAndSessionAndNamesInBytes() throws {
        let (r, sid) = try router { $0.maxStreamsPerConnection = 2; $0.maxStreamsPerSession = 3 }
        _ = connect(r, sid, socket: 1, token: try token(sid))
        _ = connect(r, sid, socket: 2, token: try token(sid))
        func publish(_ socket: Int, _ p: PublishRequest = PublishRequest()) -> Int32?? {
            replyCode(r.receive(socket: socket, .publish(id: 7, p), now: t, nowMillis: ms), socket)
        }
        XCTAssertEqual(publish(1), .some(nil)); XCTAssertEqual(publish(1), .some(nil))
        XCTAssertEqual(publish(1), 1605, "per connection")
        XCTAssertEqual(publish(2), .some(nil))
        XCTAssertEqual(publish(2), 1605, "per session")
        let (r2, sid2) = try router()
        _ = connect(r2, sid2, socket: 1, token: try token(sid2))
        func publish2(_ p: PublishRequest) -> Int32?? { replyCode(r2.receive(socket: 1, .publish(id: 7, p), now: t, nowMillis: ms), 1) }
        // One grapheme of 30 KB is 30 KB, not one character.
        XCTAssertEqual(publish2(PublishRequest(name: "e" + String(repeating: "\u{301}", count: 15_000))), 1011)
        XCTAssertEqual(publish2(PublishRequest(name: String(repeating: "é", count: 501))), 1011)
        XCTAssertEqual(publish2(PublishRequest(name: String(repeating: "é", count: 500))), .some(nil))
        XCTAssertEqual(publish2(PublishRequest(width: Int.max)), 1011)
        XCTAssertEqual(publish2(PublishRequest(height: -1)), 1011)
        XCTAssertEqual(r2.streams(in: sid2).count, 1)
    }

    func testIssueReportsAreARingAndDescriptionsAreCut() throws {
        let (r, sid) = try router { $0.maxIssueReports = 5; $0.maxIssueDescriptionBytes = 10 }
        _ = connect(r, sid, socket: 1, token: try token(sid))
        for i in 0..<12 {
            _ = r.receive(socket: 1, .reportIssue(id: i, issueId: "issue-\(String(format: "%04d", i))", description: "éééééééééé\n\(i)"),
                          now: t, nowMillis: ms)
        }
        XCTAssertEqual(r.issues.map(\.issueId), (7..<12).map { "issue-\(String(format: "%04d", $0))" })
        XCTAssertEqual(r.issues.first?.description, "ééééé", "cut at 10 bytes on a character boundary")
    }

    func testADroppedConnectionsQueueIsBoundedInBytes() throws {
        let (r, sid) = try router { $0.maxQueuedBytesWhileDropped = 20_000 }
        let out = connect(r, sid, socket: 1, token: try token(sid))
        guard case .send(_, .connected(let info))? = out.first else { return XCTFail() }
        _ = connect(r, sid, socket: 2, token: try token(sid))
        _ = r.socketClosed(1, now: t)
        let data = String(repeating: "x", count: 8000)
        for i in 0..<10 { _ = r.receive(socket: 2, .signal(id: i, type: "t", data: data, to: nil), now: t, nowMillis: ms) }
        let back = r.receive(socket: 3, .connect(ConnectRequest(id: 2, apiKey: project.apiKey, sessionId: sid, token: try token(sid),
                                                                resumeConnectionId: info.connection.id, resumeToken: info.resumeToken)),
                             now: t, nowMillis: ms)
        let signals = back.filter { if case .send(_, .signal) = $0 { true } else { false } }
        XCTAssertEqual(signals.count, 2, "two 8 KB signals fit in 20,000 bytes")
    }

    func testPeerIdsWithControlCharactersAreRefused() throws {
        let (r, sid) = try router()
        _ = connect(r, sid, socket: 1, token: try token(sid))
        _ = connect(r, sid, socket: 2, token: try token(sid))
        guard case .send(_, .reply(_, nil, _, let st?, _))? = r.receive(socket: 1, .publish(id: 1, PublishRequest()), now: t, nowMillis: ms).first else {
            return XCTFail()
        }
        for bad in ["a\nb", "x\u{1B}[31m", "\u{2028}", String(repeating: "p", count: 129)] {
            let out = r.receive(socket: 2, .mediaOffer(id: 5, peerId: bad, streamId: st.id, direction: .subscribe, sdp: "v=0"), now: t, nowMillis: ms)
            XCTAssertEqual(replyCode(out, 2), .some(1011), bad)
        }
        XCTAssertEqual(r.mediaPeerCount, 0)
    }
}
