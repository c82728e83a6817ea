import OTBase
import OTWire
import XCTest
@testable import OTServer

/// The server's media signaling (docs/protocol.md, "Media signaling"), driven sans-IO through `SignalingRouter`.
final class MediaSignalingTests: XCTestCase {
    let project = Project.generate()
    var router: SignalingRouter!
    let now = Instant.zero
    let nowMillis = wallClockMillis()

    override func setUp() { router = SignalingRouter(projects: [project]) }

    private func connect(_ socket: Int, _ sid: String, role: SessionRole = .publisher) throws -> String {
        let token = try ClientToken(apiKey: project.apiKey, sessionId: sid, role: role, createTime: nowMillis / 1000,
                                    expireTime: nowMillis / 1000 + 600, connectionData: nil, format: .jwt).mint(secret: project.secret)
        let out = router.receive(socket: socket, .connect(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: token)),
                                 now: now, nowMillis: nowMillis)
        for case .send(_, .connected(let info)) in out { return info.connection.id }
        XCTFail("not connected: \(out)"); return ""
    }

    private func publish(_ socket: Int) -> String {
        let out = router.receive(socket: socket, .publish(id: 2, PublishRequest(name: "cam")), now: now, nowMillis: nowMillis)
        for case .send(_, .reply(_, nil, _, let stream?, _)) in out { return stream.id }
        XCTFail("no stream: \(out)"); return ""
    }

    private func send(_ socket: Int, _ m: ClientMessage) -> [SignalingRouter.Output] {
        router.receive(socket: socket, m, now: now, nowMillis: nowMillis)
    }

    private func replyCode(_ out: [SignalingRouter.Output], id: Int) -> Int32?? {
        for case .send(_, .reply(let rid, let code, _, _, _)) in out where rid == id { return .some(code) }
        return .none
    }

    func testRelayedOfferAnswerCandidatesAndSettingsReachTheOtherSide() throws {
        let sid = try router.createSession(apiKey: project.apiKey, relayed: true, nowMillis: nowMillis)
        _ = try connect(1, sid)
        let subCid = try connect(2, sid)
        let stream = publish(1)

        var out = send(2, .mediaOffer(id: 7, peerId: "p1", streamId: stream, direction: .subscribe, sdp: "v=0 offer"))
        XCTAssertTrue(out.contains(.send([1], .mediaOffer(peerId: "p1", streamId: stream, direction: .subscribe, sdp: "v=0 offer", from: subCid))))
        XCTAssertEqual(replyCode(out, id: 7), .some(nil))

        out = send(1, .mediaAnswer(peerId: "p1", sdp: "v=0 answer"))
        XCTAssertEqual(out, [.send([2], .mediaAnswer(peerId: "p1", sdp: "v=0 answer"))])
        out = send(1, .mediaCandidate(peerId: "p1", candidate: "candidate:1 1 udp 1 127.0.0.1 5000 typ host"))
        XCTAssertEqual(out, [.send([2], .mediaCandidate(peerId: "p1", candidate: "candidate:1 1 udp 1 127.0.0.1 5000 typ host"))])
        out = send(2, .mediaCandidate(peerId: "p1", candidate: "", sdpMid: "0", sdpMLineIndex: 0))
        XCTAssertEqual(out, [.send([1], .mediaCandidate(peerId: "p1", candidate: "", sdpMid: "0", sdpMLineIndex: 0))])  // passed on as is
        out = send(2, .subscriberSettings(peerId: "p1", audio: true, video: false))
        XCTAssertEqual(out, [.send([1], .subscriberSettings(peerId: "p1", audio: true, video: false))])
        // Only the publisher may answer, only the subscriber may change its settings.
        XCTAssertEqual(send(2, .mediaAnswer(peerId: "p1", sdp: "forged")), [])
        XCTAssertEqual(send(1, .subscriberSettings(peerId: "p1", audio: false, video: false)), [])

        out = send(2, .mediaClose(peerId: "p1"))
        XCTAssertEqual(out, [.send([1], .mediaClose(peerId: "p1", reason: "closed"))])
        XCTAssertEqual(router.mediaPeerCount, 0)
    }

    /// A relayed publisher refuses a subscriber's offer (no video codec in common): the subscriber hears why, as
    /// `mediaClose` with reason `refused`, the reason cut to 500 bytes; a subscriber cannot "refuse" its own offer.
    func testARelayedPublishersRefusalReachesTheSubscriberWithItsReason() throws {
        let sid = try router.createSession(apiKey: project.apiKey, relayed: true, nowMillis: nowMillis)
        _ = try connect(1, sid)
        _ = try connect(2, sid)
        let stream = publish(1)
        for peer in ["p1", "p2"] {
            _ = send(2, .mediaOffer(id: 8, peerId: peer, streamId: stream, direction: .subscribe, sdp: "v=0 offer"))
        }
        let why = "the stream's video is VP9, which the subscriber's offer does not list"
        XCTAssertEqual(send(1, .mediaClose(peerId: "p1", refusal: why)), [.send([2], .mediaClose(peerId: "p1", reason: "refused", message: why))])
        XCTAssertEqual(send(1, .mediaClose(peerId: "p2", refusal: String(repeating: "é", count: 400))),
                       [.send([2], .mediaClose(peerId: "p2", reason: "refused", message: String(repeating: "é", count: 250)))])
        _ = send(2, .mediaOffer(id: 9, peerId: "p3", streamId: stream, direction: .subscribe, sdp: "v=0 offer"))
        XCTAssertEqual(send(2, .mediaClose(peerId: "p3", refusal: "forged")), [.send([1], .mediaClose(peerId: "p3", reason: "closed"))])
        XCTAssertEqual(router.mediaPeerCount, 0)
    }

    func testRelayedRolesStreamsAndPublishOffersAreRefused() throws {
        let sid = try router.createSession(apiKey: project.apiKey, relayed: true, nowMillis: nowMillis)
        _ = try connect(1, sid)
        _ = try connect(2, sid, role: .publisheronly)
        _ = try connect(3, sid, role: .subscriber)
        let stream = publish(1)
        XCTAssertEqual(replyCode(send(2, .mediaOffer(id: 3, peerId: "a", streamId: stream, direction: .subscribe, sdp: "x")), id: 3), .some(1535))
        XCTAssertEqual(replyCode(send(3, .mediaOffer(id: 4, peerId: "b", streamId: "nope", direction: .subscribe, sdp: "x")), id: 4), .some(1604))
        XCTAssertEqual(replyCode(send(3, .mediaOffer(id: 5, peerId: "c", streamId: stream, direction: .publish, sdp: "x")), id: 5), .some(1500))
        // Relayed publishers answer; they never offer to the server.
        XCTAssertEqual(replyCode(send(1, .mediaOffer(id: 6, peerId: "d", streamId: stream, direction: .publish, sdp: "x")), id: 6), .some(1011))
        XCTAssertEqual(router.mediaPeerCount, 0)
        // Peer ids are unique.
        XCTAssertEqual(replyCode(send(3, .mediaOffer(id: 8, peerId: "e", streamId: stream, direction: .subscribe, sdp: "x")), id: 8), .some(nil))
        XCTAssertEqual(replyCode(send(3, .mediaOffer(id: 9, peerId: "e", streamId: stream, direction: .subscribe, sdp: "x")), id: 9), .some(1011))
    }

    func testPeersPerConnectionAreLimited() throws {
        var limits = ServerLimits()
        limits.maxMediaPeersPerConnection = 2
        router = SignalingRouter(projects: [project], limits: limits)
        let sid = try router.createSession(apiKey: project.apiKey, relayed: true, nowMillis: nowMillis)
        _ = try connect(1, sid)
        _ = try connect(2, sid)
        let stream = publish(1)
        XCTAssertEqual(replyCode(send(2, .mediaOffer(id: 3, peerId: "a", streamId: stream, direction: .subscribe, sdp: "x")), id: 3), .some(nil))
        XCTAssertEqual(replyCode(send(2, .mediaOffer(id: 4, peerId: "b", streamId: stream, direction: .subscribe, sdp: "x")), id: 4), .some(nil))
        XCTAssertEqual(replyCode(send(2, .mediaOffer(id: 5, peerId: "c", streamId: stream, direction: .subscribe, sdp: "x")), id: 5), .some(1605))
        _ = send(2, .mediaClose(peerId: "a"))
        XCTAssertEqual(replyCode(send(2, .mediaOffer(id: 6, peerId: "c", streamId: stream, direction: .subscribe, sdp: "x")), id: 6), .some(nil))
    }

    func testUnpublishAndLeavingCloseThePeersOfTheOtherSide() throws {
        let sid = try router.createSession(apiKey: project.apiKey, relayed: true, nowMillis: nowMillis)
        _ = try connect(1, sid)
        _ = try connect(2, sid)
        let stream = publish(1)
        _ = send(2, .mediaOffer(id: 3, peerId: "s1", streamId: stream, direction: .subscribe, sdp: "x"))
        var out = send(1, .unpublish(id: 4, streamId: stream))
        XCTAssertTrue(out.contains(.send([2], .mediaClose(peerId: "s1", reason: "streamDestroyed"))), "\(out)")
        let stream2 = publish(1)
        _ = send(2, .mediaOffer(id: 5, peerId: "s2", streamId: stream2, direction: .subscribe, sdp: "x"))
        out = send(2, .disconnect)
        XCTAssertTrue(out.contains(.send([1], .mediaClose(peerId: "s2", reason: "connectionGone"))), "\(out)")
        XCTAssertEqual(router.mediaPeerCount, 0)
    }

    func testRoutedOffersGoToTheMediaRouterAndItsAnswerComesBack() throws {
        let sid = try router.createSession(apiKey: project.apiKey, relayed: false, nowMillis: nowMillis)
        let pubCid = try connect(1, sid)
        let subCid = try connect(2, sid)
        let stream = publish(1)
        var out = send(1, .mediaOffer(id: 3, peerId: "pub", streamId: stream, direction: .publish, sdp: "offer-p"))
        XCTAssertEqual(out, [.routeOffer(MediaOfferRequest(sessionId: sid, connectionId: pubCid, peerId: "pub", streamId: stream,
                                                           direction: .publish, sdp: "offer-p"))])
        out = router.mediaAnswered(peerId: "pub", .success("answer-p"))
        XCTAssertEqual(out, [.send([1], .reply(id: 3, code: nil, message: nil, stream: nil, issueId: nil)),
                             .send([1], .mediaAnswer(peerId: "pub", sdp: "answer-p"))])

        out = send(2, .mediaOffer(id: 4, peerId: "sub", streamId: stream, direction: .subscribe, sdp: "offer-s"))
        XCTAssertEqual(out, [.routeOffer(MediaOfferRequest(sessionId: sid, connectionId: subCid, peerId: "sub", streamId: stream,
                                                           direction: .subscribe, sdp: "offer-s"))])
        out = router.mediaAnswered(peerId: "sub", .failure(OTError(.subscriberWebRTC, "no")))
        XCTAssertEqual(out, [.send([2], .reply(id: 4, code: 1600, message: "no", stream: nil, issueId: nil))])

        _ = send(2, .mediaOffer(id: 5, peerId: "sub2", streamId: stream, direction: .subscribe, sdp: "offer-s"))
        _ = router.mediaAnswered(peerId: "sub2", .success("a"))
        XCTAssertEqual(send(2, .subscriberSettings(peerId: "sub2", audio: true, video: false)),
                       [.routeSubscription(peerId: "sub2", audio: true, video: false)])
        // The router's audio-fallback decisions go to the subscriber only.
        XCTAssertEqual(router.mediaQuality(peerId: "sub2", event: .videoDisabled), [.send([2], .mediaQuality(peerId: "sub2", event: .videoDisabled))])
        XCTAssertEqual(router.mediaQuality(peerId: "pub", event: .videoDisabled), [], "a publisher's peer has no fallback")
        XCTAssertEqual(router.mediaQuality(peerId: "nope", event: .videoEnabled), [])
        out = send(1, .disconnect)
        XCTAssertTrue(out.contains(.routeClose(peerId: "pub")), "\(out)")
        XCTAssertTrue(out.contains(.routeClose(peerId: "sub2")), "\(out)")
        XCTAssertTrue(out.contains(.send([2], .mediaClose(peerId: "sub2", reason: "streamDestroyed"))), "\(out)")
        XCTAssertTrue(out.contains(.routeConnectionGone(connectionId: pubCid)), "\(out)")
        XCTAssertEqual(router.mediaPeerCount, 0)
    }

    func testThePublishersAudioFallbackSettingReachesStreamsAndTheRouter() throws {
        let sid = try router.createSession(apiKey: project.apiKey, relayed: false, nowMillis: nowMillis)
        _ = try connect(1, sid)
        _ = try connect(2, sid)
        let out = send(1, .publish(id: 2, PublishRequest(name: "cam", audioFallbackEnabled: false)))
        var stream: StreamInfo?
        for case .send(_, .reply(_, nil, _, let s?, _)) in out { stream = s }
        XCTAssertEqual(stream?.audioFallbackEnabled, false)
        XCTAssertTrue(out.contains(.send([2], .streamCreated(try XCTUnwrap(stream)))), "others see the flag")
        let offer = send(2, .mediaOffer(id: 3, peerId: "sub", streamId: try XCTUnwrap(stream?.id), direction: .subscribe, sdp: "o"))
        guard case .routeOffer(let req) = offer.first else { return XCTFail("\(offer)") }
        XCTAssertFalse(req.audioFallbackEnabled, "the router learns it with the offer")
        // Relayed sessions: a relayed subscriber's fallback messages are not the router's to send.
        let rsid = try router.createSession(apiKey: project.apiKey, relayed: true, nowMillis: nowMillis)
        _ = try connect(3, rsid)
        _ = try connect(4, rsid)
        let rstream = publish(3)
        _ = send(4, .mediaOffer(id: 5, peerId: "rsub", streamId: rstream, direction: .subscribe, sdp: "o"))
        XCTAssertEqual(router.mediaQuality(peerId: "rsub", event: .videoDisabled), [])
    }

    func testMediaMessagesRoundTripThroughJSON() throws {
        let c: [ClientMessage] = [.mediaOffer(id: 1, peerId: "p", streamId: "s", direction: .subscribe, sdp: "v=0\r\n"),
                                  .mediaAnswer(peerId: "p", sdp: "v=0"), .mediaCandidate(peerId: "p", candidate: ""),
                                  .mediaClose(peerId: "p"), .subscriberSettings(peerId: "p", audio: false, video: true)]
        for m in c { XCTAssertEqual(try SignalingCodec.decodeClient(SignalingCodec.encode(m)), m) }
        let s: [ServerMessage] = [.mediaOffer(peerId: "p", streamId: "s", direction: .publish, sdp: "x", from: "c"),
                                  .mediaAnswer(peerId: "p", sdp: "y"), .mediaCandidate(peerId: "p", candidate: "candidate:x"),
                                  .mediaClose(peerId: "p", reason: "closed"), .subscriberSettings(peerId: "p", audio: true, video: false)]
        for m in s { XCTAssertEqual(try SignalingCodec.decodeServer(SignalingCodec.encode(m)), m) }
        XCTAssertThrowsError(try SignalingCodec.decodeClient(#"{"type":"mediaOffer","id":1,"peerId":"p","streamId":"s","direction":"sideways","sdp":""}"#))
    }
}
