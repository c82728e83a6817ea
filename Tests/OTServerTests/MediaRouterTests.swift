import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OTBase
@testable import OTServer
import OTTransport
import OTWire
import Synchronization
import XCTest

/// A client-side peer connection (full ICE) on loopback that records what it receives.
final class RouterClient: Sendable {
    let driver: PeerConnectionDriver
    let events = Mutex<[PeerConnectionEvent]>([])
    let audioSSRC: UInt32?, videoSSRC: UInt32?

    init(audioSSRC: UInt32? = nil, videoSSRC: UInt32? = nil, videoFormats: [any RTPPayloadFormat] = [PayloadFormats.vp8]) throws {
        self.audioSSRC = audioSSRC; self.videoSSRC = videoSSRC
        let box = WeakClient()
        var config = PeerConnectionConfig(
            audioTrack: audioSSRC.map { SDPLocalTrack(ssrc: $0, streamID: "pub", trackID: "a", cname: "pub") },
            videoTrack: videoSSRC.map { SDPLocalTrack(ssrc: $0, streamID: "pub", trackID: "v", cname: "pub") })
        config.videoFormats = videoFormats
        driver = try PeerConnectionDriver(config: config) { e in
            box.client?.events.withLock { $0.append(e) }
        }
        box.client = self
    }

    var connected: Bool { events.withLock { $0.contains { if case .connected = $0 { true } else { false } } } }
    /// (ssrc, seq, payload) of the RTP received.
    func received(ssrc: UInt32) -> [(seq: UInt16, payload: [UInt8])] {
        events.withLock {
            $0.compactMap {
                guard case .rtp(let r) = $0, r.packet.ssrc == ssrc else { return nil }
                let p = r.packet
                return (p.sequenceNumber, Array(p.payload))
            }
        }
    }
    var keyframeRequests: Int { events.withLock { $0.filter { if case .keyframeRequested = $0 { true } else { false } }.count } }
}

/// A flag set from another thread.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// The handler's reference to its client: weak, so client and driver do not keep each other alive.
final class WeakClient: @unchecked Sendable {
    private let lock = NSLock()
    private weak var value: RouterClient?
    var client: RouterClient? {
        get { lock.lock(); defer { lock.unlock() }; return value }
        set { lock.lock(); value = newValue; lock.unlock() }
    }
}

func waitFor(seconds: Double = 10, _ cond: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end { if cond() { return true }; usleep(2000) }
    return cond()
}

/// A router and its clients, closed after each test.
class RouterTestCase: XCTestCase {
    static let audio: UInt32 = 0xA0D1, video: UInt32 = 0x71DE
    var router: MediaRouter!
    var clients: [RouterClient] = []

    override func tearDown() {
        for c in clients { c.driver.close() }
        router?.stop()
    }
}

final class MediaRouterTests: RouterTestCase {

    /// Offers through the router and applies its answer.
    func negotiate(_ client: RouterClient, sid: String = "sess", peer: String, stream: String = "st1", _ dir: MediaDirection) throws -> String {
        let offer = try client.driver.createOffer()
        let result = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: sid, connectionId: "c-\(peer)", peerId: peer, streamId: stream, direction: dir, sdp: offer)) { r in
            result.withLock { $0 = r }
        }
        XCTAssertTrue(waitFor { result.withLock { $0 != nil } })
        let answer = try XCTUnwrap(result.withLock { $0 }).get()
        try client.driver.setRemoteAnswer(answer)
        return answer
    }

    /// A VP8 RTP packet: keyframe start or delta, payload bytes identify it.
    func vp8(seq: UInt16, keyframe: Bool) -> [UInt8] {
        RTPPacket(marker: true, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(seq) * 3000, ssrc: Self.video,
                  payload: [0x10, keyframe ? 0x00 : 0x01, UInt8(seq & 0xFF), UInt8(seq >> 8)]).serialized()
    }
    func opus(seq: UInt16) -> [UInt8] {
        RTPPacket(payloadType: 111, sequenceNumber: seq, timestamp: UInt32(seq) * 960, ssrc: Self.audio, payload: [0xF8, UInt8(seq & 0xFF)]).serialized()
    }

    func send(_ c: RouterClient, video seqs: Range<UInt16>, keyframeEvery: UInt16 = 0) {
        for s in seqs {
            var v = vp8(seq: s, keyframe: keyframeEvery > 0 && s % keyframeEvery == 0)
            XCTAssertTrue(c.driver.sendRTP(&v))
            var a = opus(seq: s)
            XCTAssertTrue(c.driver.sendRTP(&a))
        }
    }

    /// A publisher and two subscribers of its stream, all connected.
    func setUpRoute(pliInterval: Duration = .milliseconds(300)) throws -> (pub: RouterClient, s1: RouterClient, s2: RouterClient) {
        router = try MediaRouter(pliInterval: pliInterval)
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video)
        let s1 = try RouterClient(), s2 = try RouterClient()
        clients = [pub, s1, s2]
        let pubAnswer = try negotiate(pub, peer: "pub", .publish)
        XCTAssertTrue(pubAnswer.contains("a=ice-lite"))
        XCTAssertTrue(pubAnswer.contains("a=recvonly"))
        for (c, id) in [(s1, "sub1"), (s2, "sub2")] {
            let answer = try negotiate(c, peer: id, .subscribe)
            XCTAssertTrue(answer.contains("a=ssrc:\(Self.video) "), "the subscriber's answer declares the publisher's SSRCs")
            XCTAssertTrue(answer.contains("a=ssrc:\(Self.audio) "))
            XCTAssertTrue(answer.contains("a=sendonly"))
        }
        XCTAssertTrue(waitFor { [pub, s1, s2].allSatisfy(\.connected) })
        XCTAssertEqual(router.peerCount, 3)
        return (pub, s1, s2)
    }

    func testSubscribersReceiveThePublishersRTPWithItsSSRCs() throws {
        let (pub, s1, s2) = try setUpRoute()
        send(pub, video: 0..<40, keyframeEvery: 20)
        for s in [s1, s2] {
            XCTAssertTrue(waitFor { s.received(ssrc: Self.audio).count == 40 && s.received(ssrc: Self.video).count >= 20 })
            let video = s.received(ssrc: Self.video)
            // Video starts at a keyframe (packet 0 or 20, by when the subscriber connected) and keeps sequence numbers.
            XCTAssertTrue([0, 20].contains(video.first?.seq), "starts at a keyframe: \(String(describing: video.first?.seq))")
            for v in video { XCTAssertEqual(v.payload[2], UInt8(v.seq & 0xFF), "content and sequence number preserved") }
            XCTAssertEqual(s.received(ssrc: Self.audio).map(\.seq), (0..<40).map { $0 })
        }
        let c = try XCTUnwrap(router.counters(streamId: "st1"))
        XCTAssertEqual(c.packetsIn, 80)
        XCTAssertEqual(c.subscribers, 2)
        XCTAssertGreaterThanOrEqual(c.packetsOut, 120)
    }

    /// The publisher's uplink only receives, so no report block measures its round trip: it asks with XR RRTRs, the
    /// publisher's connection answers with DLRRs, and the measured round trip is in the stream's counters and stats.
    func testThePublishersUplinkMeasuresItsRoundTripFromXR() throws {
        let (pub, _, _) = try setUpRoute()
        XCTAssertNil(router.counters(streamId: "st1")?.publisherRoundTripTime, "not measured before any media")
        var seq: UInt16 = 0
        let measured = waitFor(seconds: 30) {
            send(pub, video: seq..<seq + 1, keyframeEvery: 50)
            seq &+= 1
            usleep(20_000)
            return self.router.counters(streamId: "st1")?.publisherRoundTripTime != nil
        }
        XCTAssertTrue(measured, "no DLRR answer measured the uplink after \(seq) packets")
        let rtt = try XCTUnwrap(router.counters(streamId: "st1")?.publisherRoundTripTime)
        XCTAssertGreaterThanOrEqual(rtt, .zero)
        let stats = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(router.statsJSON(apiKey: nil))) as? [String: Any])
        let stream = ((stats["sessions"] as? [String: Any])?["sess"] as? [String: Any]).flatMap { ($0["streams"] as? [String: Any])?["st1"] as? [String: Any] }
        XCTAssertNotNil(stream?["publisherRttMs"] as? Double, "\(stats)")
        // The publisher's side measures its own RTT from the router's report blocks, on the two ends' own report
        // schedules: the router's DLRR answer can come first, so keep the media going until the publisher has one.
        let publisherMeasured = waitFor(seconds: 30) {
            send(pub, video: seq..<seq + 1, keyframeEvery: 50)
            seq &+= 1
            usleep(20_000)
            return pub.events.withLock { $0.contains { if case .roundTripTime = $0 { true } else { false } } }
        }
        XCTAssertTrue(publisherMeasured, "the publisher measured no round trip from the router's reports after \(seq) packets")
    }

    func testVideoToggleStopsAndResumesWithoutASequenceGap() throws {
        let (pub, s1, s2) = try setUpRoute()
        send(pub, video: 0..<10, keyframeEvery: 100)  // keyframe at 0
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 10 && s2.received(ssrc: Self.video).count == 10 })
        router.setSubscription(peerId: "sub1", audio: true, video: false)
        send(pub, video: 10..<20)
        XCTAssertTrue(waitFor { s2.received(ssrc: Self.video).count == 20 && s1.received(ssrc: Self.audio).count == 20 })
        XCTAssertEqual(s1.received(ssrc: Self.video).count, 10, "video off: nothing forwarded")
        router.setSubscription(peerId: "sub1", audio: true, video: true)
        XCTAssertTrue(waitFor { pub.keyframeRequests > 0 }, "resuming asks the publisher for a keyframe")
        send(pub, video: 20..<25)            // deltas: held until a keyframe
        send(pub, video: 25..<30, keyframeEvery: 25)
        // Wait for everything sent so far at both subscribers: they receive on separate sockets, in any order.
        XCTAssertTrue(waitFor {
            s1.received(ssrc: Self.video).count == 15 && s1.received(ssrc: Self.audio).count == 30
                && s2.received(ssrc: Self.video).count == 30
        })
        let seqs = s1.received(ssrc: Self.video).map(\.seq)
        XCTAssertEqual(seqs, (0..<15).map { $0 }, "rewritten: no gap across the pause")
        XCTAssertEqual(s1.received(ssrc: Self.video)[10].payload[2], 25, "resumed at the keyframe")
        XCTAssertEqual(s2.received(ssrc: Self.video).map(\.seq), (0..<30).map { $0 }, "the other subscriber is untouched")
        // Audio off too.
        router.setSubscription(peerId: "sub1", audio: false, video: false)
        send(pub, video: 30..<35)
        XCTAssertTrue(waitFor { s2.received(ssrc: Self.audio).count == 35 })
        XCTAssertEqual(s1.received(ssrc: Self.audio).count, 30)
    }

    func testSubscriptionWishesSentBeforeTheOfferIsAnsweredAreKept() throws {
        let (pub, s1, _) = try setUpRoute()
        // A client sends its offer and, right behind it, "no video": the settings may reach the router first.
        router.setSubscription(peerId: "sub3", audio: true, video: false)
        let s3 = try RouterClient()
        clients.append(s3)
        _ = try negotiate(s3, peer: "sub3", .subscribe)
        XCTAssertTrue(waitFor { s3.connected })
        send(pub, video: 0..<10, keyframeEvery: 100)
        XCTAssertTrue(waitFor { s3.received(ssrc: Self.audio).count == 10 && s1.received(ssrc: Self.video).count == 10 })
        XCTAssertEqual(s3.received(ssrc: Self.video).count, 0, "video was turned off before the connection existed")
    }

    func testKeyframeRequestsAreAggregatedPerPublisher() throws {
        let (pub, s1, s2) = try setUpRoute(pliInterval: .seconds(2))
        // Raw PLIs, as a receiver without pacing (ours pace at the connection) would burst them.
        for _ in 0..<5 {
            s1.driver.sendRTCP(RTCP.serialize([.pli(senderSSRC: 1, mediaSSRC: Self.video)]))
            s2.driver.sendRTCP(RTCP.serialize([.pli(senderSSRC: 2, mediaSSRC: Self.video)]))
        }
        XCTAssertTrue(waitFor { (self.router.counters(streamId: "st1")?.keyframeRequestsAggregated ?? 0) >= 10 })
        let c = try XCTUnwrap(router.counters(streamId: "st1"))
        XCTAssertLessThanOrEqual(c.keyframeRequestsSent, 2, "at most one per window plus one trailing")
        XCTAssertTrue(waitFor { pub.keyframeRequests >= 1 })
        XCTAssertLessThanOrEqual(pub.keyframeRequests, c.keyframeRequestsSent + 1)
        XCTAssertLessThan(pub.keyframeRequests, 12, "12 requests (2 connects + 10) did not all reach the publisher")
    }

    /// The first-keyframe gate opens at the keyframe's first packet even when it arrives after later packets (lost on
    /// the uplink, then repaired by NACK): what came after it is replayed from the stream's history, in order.
    func testGateOpensAtAKeyframeWhoseFirstPacketArrivesLate() throws {
        let (pub, s1, s2) = try setUpRoute()
        send(pub, video: 1..<4)  // the rest of the keyframe (here: packets after it) arrives first...
        XCTAssertTrue(waitFor { (self.router.counters(streamId: "st1")?.packetsHeldForKeyframe ?? 0) == 6 }, "held for both")
        var first = vp8(seq: 0, keyframe: true)  // ...then its first packet
        XCTAssertTrue(pub.driver.sendRTP(&first))
        send(pub, video: 4..<6)
        for s in [s1, s2] {
            XCTAssertTrue(waitFor { s.received(ssrc: Self.video).count == 6 })
            XCTAssertEqual(s.received(ssrc: Self.video).map(\.seq), [0, 1, 2, 3, 4, 5], "from the keyframe, in order")
        }
        XCTAssertEqual(router.counters(streamId: "st1")?.packetsReplayed, 6)
    }

    /// While a subscriber waits for its first keyframe, the router asks the publisher again at the end of each
    /// aggregation window (a request or the keyframe may have been lost), and stops once the keyframe has passed.
    func testFirstKeyframeIsRequestedAgainUntilItPasses() throws {
        let (pub, s1, _) = try setUpRoute(pliInterval: .milliseconds(200))
        XCTAssertTrue(waitFor { pub.keyframeRequests >= 4 }, "the request is repeated while nothing comes")
        send(pub, video: 0..<3, keyframeEvery: 100)
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 3 })
        let atKeyframe = pub.keyframeRequests
        usleep(800_000)  // four windows
        XCTAssertLessThanOrEqual(pub.keyframeRequests, atKeyframe + 1, "no more requests once the keyframe went by")
    }

    func testSubscriberNACKIsAnsweredFromTheRoutersCache() throws {
        let (pub, s1, _) = try setUpRoute()
        send(pub, video: 0..<10, keyframeEvery: 100)
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 10 })
        s1.driver.sendRTCP(RTCP.serialize([.nack(senderSSRC: 1, mediaSSRC: Self.video, lost: [3, 4])]))
        XCTAssertTrue(waitFor { (self.router.peerStats(peerId: "sub1")?.retransmissionsSent ?? 0) == 2 })
        // RTX was negotiated (the subscriber offered it, the router declared an RTX SSRC): the copies come on the RTX
        // stream and are unwrapped into the packets they resend.
        XCTAssertTrue(waitFor { s1.driver.stats.rtxPacketsReceived == 2 }, "the resent copies reached the subscriber")
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 12 })
        XCTAssertEqual(s1.received(ssrc: Self.video).map(\.seq).suffix(2), [3, 4])
        XCTAssertEqual(s1.driver.stats.replaysDropped, 0)
        XCTAssertEqual(pub.driver.stats.nacksReceived, 0, "not passed upstream")
        // Our clients NACK audio too: answered from the stream's audio history.
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.audio).count == 10 })
        s1.driver.sendRTCP(RTCP.serialize([.nack(senderSSRC: 1, mediaSSRC: Self.audio, lost: [5])]))
        XCTAssertTrue(waitFor { (self.router.peerStats(peerId: "sub1")?.retransmissionsSent ?? 0) == 3 }, "the audio packet resent")
        // Audio has no RTX: the copy comes as it was first sent (same sequence number and SRTP index), so this
        // subscriber, which had it, drops it as a replay (one that had lost it would take it).
        XCTAssertTrue(waitFor { s1.driver.stats.replaysDropped == 1 }, "the resent audio packet reached the subscriber")
        XCTAssertEqual(s1.received(ssrc: Self.audio).count, 10)
    }

    /// The router's connections read RTCP by the same rule as a client's: a subscriber's compound with a malformed XR
    /// between a PLI and a NACK still has its keyframe request taken and its packet resent; the link counts the skip.
    func testASubscribersMalformedRTCPPacketCostsOnlyItself() throws {
        let (pub, s1, _) = try setUpRoute()
        send(pub, video: 0..<10, keyframeEvery: 100)
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 10 })
        // An XR with no room for its sender SSRC.
        let badXR: [UInt8] = [0x80, 207, 0, 0]
        XCTAssertTrue(s1.driver.sendRTCP(RTCP.serialize([.pli(senderSSRC: 1, mediaSSRC: Self.video)]) + badXR
                                         + RTCP.serialize([.nack(senderSSRC: 1, mediaSSRC: Self.video, lost: [3])])))
        XCTAssertTrue(waitFor { (self.router.peerStats(peerId: "sub1")?.retransmissionsSent ?? 0) == 1 }, "the NACK answered")
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 11 })
        let link = try XCTUnwrap(router.peerStats(peerId: "sub1"))
        XCTAssertEqual(link.keyframeRequestsReceived, 1, "the PLI taken")
        XCTAssertEqual(link.rtcpPacketsSkipped, 1)
        XCTAssertEqual(router.peerStats(peerId: "pub")?.rtcpPacketsSkipped, 0, "what a client sends parses")
        XCTAssertEqual(pub.driver.stats.rtcpPacketsSkipped, 0, "what the router sends parses")
    }

    func testRouterCyclesReleaseEveryDescriptor() throws {
        func openFDs() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
        func cycle() throws {
            _ = try setUpRoute()
            send(clients[0], video: 0..<5, keyframeEvery: 5)
            XCTAssertTrue(waitFor { self.clients[1].received(ssrc: Self.audio).count == 5 })
            router.close(peerId: "sub2")
            router.connectionGone(connectionId: "c-sub1")
            for c in clients { c.driver.close() }
            router.stop()
            clients = []
            router = nil
        }
        try cycle()
        usleep(100_000)
        let before = openFDs()
        for _ in 0..<5 { try cycle() }
        XCTAssertTrue(waitFor { openFDs() <= before }, "descriptors: \(before) before, \(openFDs()) after 5 router cycles")
    }

    func testClosingPeersAndStatsEndpoint() throws {
        let project = Project.generate()
        let server = SessionServer(SessionServer.Configuration(projects: [project], media: .init()))
        try server.start()
        defer { server.stop() }
        let sid = try server.createSession(apiKey: project.apiKey)
        router = try XCTUnwrap(server.mediaRouter)
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video), sub = try RouterClient()
        clients = [pub, sub]
        _ = try negotiate(pub, sid: sid, peer: "p", .publish)
        _ = try negotiate(sub, sid: sid, peer: "s", .subscribe)
        XCTAssertTrue(waitFor { pub.connected && sub.connected })
        send(pub, video: 0..<10, keyframeEvery: 5)
        XCTAssertTrue(waitFor { sub.received(ssrc: Self.audio).count == 10 })

        var req = URLRequest(url: URL(string: "\(server.apiURL)/v2/stats")!)
        req.setValue(try ProjectAuth.mint(apiKey: project.apiKey, secret: project.secret, now: wallClockMillis() / 1000), forHTTPHeaderField: "X-OPENTOK-AUTH")
        let body = Mutex<Data?>(nil)
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: req) { d, _, _ in body.withLock { $0 = d }; done.signal() }.resume()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: try XCTUnwrap(body.withLock { $0 })) as? [String: Any])
        let session = try XCTUnwrap((json["sessions"] as? [String: Any])?[sid] as? [String: Any], "\(json)")
        XCTAssertEqual(session["packetsIn"] as? Int, 20)
        XCTAssertEqual(session["peers"] as? Int, 2)
        XCTAssertEqual(session["mediaWorker"] as? Int, 0)
        XCTAssertEqual(session["mediaPort"] as? Int, Int(router.endpoint.address.port))
        XCTAssertEqual(try server.mediaPlacement(sessionId: sid), MediaRouter.Placement(worker: 0, port: router.endpoint.address.port))
        XCTAssertThrowsError(try server.mediaPlacement(sessionId: "not a session id"))
        let stream = try XCTUnwrap((session["streams"] as? [String: Any])?["st1"] as? [String: Any])
        XCTAssertEqual(stream["subscribers"] as? Int, 1)
        XCTAssertGreaterThanOrEqual(stream["packetsOut"] as? Int ?? 0, 10)

        router.connectionGone(connectionId: "c-s")
        XCTAssertEqual(router.peerCount, 1)
        XCTAssertEqual(router.counters(streamId: "st1")?.subscribers, 0)
        router.close(peerId: "p")
        XCTAssertEqual(router.peerCount, 0)
        XCTAssertNil(router.counters(streamId: "st1"))
        XCTAssertEqual(router.endpoint.connectionCount, 0)
    }

    /// Sends a subscribe offer that must wait for the publisher's; returns whether it was answered.
    private func offerBeforePublisher(_ client: RouterClient, peer: String, stream: String) throws -> Flag {
        let answered = Flag()
        router.handleOffer(MediaOfferRequest(sessionId: "sess", connectionId: "c-\(peer)", peerId: peer, streamId: stream,
                                             direction: .subscribe, sdp: try client.driver.createOffer())) { _ in answered.set() }
        return answered
    }

    private func statsSessions() throws -> [String: Any] {
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(router.statsJSON(apiKey: nil))) as? [String: Any])
        return try XCTUnwrap(json["sessions"] as? [String: Any])
    }

    func testASubscriberClosedBeforeItsPublisherLeavesNoStream() throws {
        router = try MediaRouter()
        let early = try RouterClient(), gone = try RouterClient()
        clients = [early, gone]
        let answeredEarly = try offerBeforePublisher(early, peer: "early", stream: "st-late")
        let answeredGone = try offerBeforePublisher(gone, peer: "gone", stream: "st-other")
        XCTAssertEqual(router.streamCount, 2, "each waiting offer holds its stream")
        XCTAssertNotNil(router.counters(streamId: "st-late"))
        XCTAssertEqual(try statsSessions().count, 1)

        router.close(peerId: "early")
        XCTAssertEqual(router.streamCount, 1, "the closed subscriber's stream goes with its offer")
        XCTAssertNil(router.counters(streamId: "st-late"))
        router.connectionGone(connectionId: "c-gone")
        XCTAssertEqual(router.streamCount, 0)
        XCTAssertEqual(router.peerCount, 0)
        XCTAssertEqual(try statsSessions().count, 0, "the stats endpoint lists no session")

        // A publisher arriving afterwards answers nobody from before.
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video)
        clients.append(pub)
        _ = try negotiate(pub, peer: "pub", stream: "st-late", .publish)
        XCTAssertTrue(waitFor { pub.connected })
        XCTAssertFalse(answeredEarly.isSet)
        XCTAssertFalse(answeredGone.isSet)
        XCTAssertEqual(router.peerCount, 1)
        XCTAssertEqual(router.counters(streamId: "st-late")?.subscribers, 0)
        router.close(peerId: "pub")
        XCTAssertEqual(router.streamCount, 0)
    }

    func testAWaitingSubscriberIsAnsweredWhenItsPublisherArrives() throws {
        router = try MediaRouter()
        let sub = try RouterClient(), other = try RouterClient()
        clients = [sub, other]
        let offer = try sub.driver.createOffer()
        let result = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: "sess", connectionId: "c-sub", peerId: "sub", streamId: "st1", direction: .subscribe, sdp: offer)) { r in
            result.withLock { $0 = r }
        }
        // Another waiting subscriber of the same stream leaves; the stream stays for the first.
        _ = try offerBeforePublisher(other, peer: "other", stream: "st1")
        router.close(peerId: "other")
        XCTAssertEqual(router.streamCount, 1)
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video)
        clients.append(pub)
        _ = try negotiate(pub, peer: "pub", .publish)
        XCTAssertTrue(waitFor { result.withLock { $0 != nil } })
        try sub.driver.setRemoteAnswer(try XCTUnwrap(result.withLock { $0 }).get())
        XCTAssertTrue(waitFor { pub.connected && sub.connected })
        XCTAssertEqual(router.counters(streamId: "st1")?.subscribers, 1)
        router.close(peerId: "sub")
        router.close(peerId: "pub")
        XCTAssertEqual(router.streamCount, 0)
        XCTAssertEqual(router.peerCount, 0)
    }
}

/// Keyframe-request aggregation, on explicit instants (`KeyframeRequestAggregator`), then through a router.
extension MediaRouterTests {
    private func at(_ ms: Int64) -> Instant { Instant(micros: 1_000_000 + ms * 1000) }

    func testKeyframeAggregationSendsTheFirstRequestOfAWindowAtOnce() {
        var agg = KeyframeRequestAggregator(interval: .milliseconds(300))
        XCTAssertEqual(agg.request(.repair, now: at(0)), .send, "no window open: straight to the publisher (check at 300 ms)")
        XCTAssertTrue(agg.awaitingKeyframe)
        // While the requested keyframe has not passed, later requests are folded into it.
        XCTAssertEqual(agg.request(.repair, now: at(10)), .folded)
        XCTAssertEqual(agg.request(.firstKeyframe, now: at(20)), .folded)
        agg.keyframeForwarded()
        XCTAssertFalse(agg.awaitingKeyframe)
        // The keyframe served them: nothing is sent at the window's end unless a receiver still waits.
        XCTAssertEqual(agg.windowEnded(now: at(300), receiversWaiting: false), .folded)
        XCTAssertEqual(agg.request(.repair, now: at(301)), .send, "a new window opens with the next request")
    }

    func testKeyframeAggregationFoldsARepairBurstIntoOneTrailingRequest() {
        var agg = KeyframeRequestAggregator(interval: .milliseconds(300))
        var sent: [Int64] = []
        var check: Instant?
        // Requests every 10 ms for 1 s; the publisher answers each request with a keyframe 40 ms later.
        for ms in stride(from: Int64(0), to: 1000, by: 10) {
            if let c = check, at(ms) >= c {
                check = nil
                switch agg.windowEnded(now: at(ms), receiversWaiting: false) {
                case .send: sent.append(ms); check = at(ms + 300)
                case .checkAt(let t): check = t
                case .folded: break
                }
            }
            if let last = sent.last, ms == last + 40 { agg.keyframeForwarded() }
            switch agg.request(.repair, now: at(ms)) {
            case .send: sent.append(ms); check = at(ms + 300)
            case .checkAt(let t): check = t
            case .folded: break
            }
        }
        XCTAssertEqual(sent, [0, 300, 600, 900], "one request per window: the first at once, then one at each window's end")
    }

    func testKeyframeAggregationSendsANewReceiversRequestAtOnceOnceTheKeyframeHasPassed() {
        var agg = KeyframeRequestAggregator(interval: .milliseconds(300))
        XCTAssertEqual(agg.request(.firstKeyframe, now: at(0)), .send)
        agg.keyframeForwarded()
        // A subscriber that connects 100 ms later cannot use the keyframe that went by: its request is not held.
        XCTAssertEqual(agg.request(.firstKeyframe, now: at(100)), .send)
        // A second new receiver while that keyframe is on its way is folded into it...
        XCTAssertEqual(agg.request(.firstKeyframe, now: at(110)), .folded)
        // ...and if it still waits at the window's end (the keyframe was lost), a request goes then, and again at the
        // end of each window after that while it waits.
        XCTAssertEqual(agg.windowEnded(now: at(400), receiversWaiting: true), .send)
        XCTAssertEqual(agg.windowEnded(now: at(700), receiversWaiting: true), .send)
        XCTAssertEqual(agg.windowEnded(now: at(1000), receiversWaiting: false), .folded)
    }

    func testKeyframeAggregationCheckMovesWithALaterWindow() {
        var agg = KeyframeRequestAggregator(interval: .milliseconds(300))
        XCTAssertEqual(agg.request(.repair, now: at(0)), .send)
        XCTAssertEqual(agg.request(.repair, now: at(10)), .folded)
        agg.keyframeForwarded()
        XCTAssertEqual(agg.request(.firstKeyframe, now: at(200)), .send, "opens a window ending at 500 ms")
        XCTAssertEqual(agg.windowEnded(now: at(300), receiversWaiting: true), .checkAt(at(500)), "not before the new window ends")
        XCTAssertEqual(agg.windowEnded(now: at(500), receiversWaiting: false), .folded)
    }

    /// A subscriber that joins just after another one got its keyframe asks the publisher at once, not at the end
    /// of the aggregation window (10 s here, so the window's end cannot be what delivers it).
    func testNewSubscriberKeyframeRequestIsNotHeldByTheWindow() throws {
        router = try MediaRouter(pliInterval: .seconds(10))
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video)
        let s1 = try RouterClient(), s2 = try RouterClient()
        clients = [pub, s1, s2]
        _ = try negotiate(pub, peer: "pub", .publish)
        _ = try negotiate(s1, peer: "sub1", .subscribe)
        XCTAssertTrue(waitFor { pub.connected && s1.connected })
        XCTAssertTrue(waitFor { pub.keyframeRequests == 1 }, "the first subscriber's request went at once")
        send(pub, video: 0..<3, keyframeEvery: 100)  // the keyframe it asked for, then deltas
        XCTAssertTrue(waitFor { s1.received(ssrc: Self.video).count == 3 })
        _ = try negotiate(s2, peer: "sub2", .subscribe)
        XCTAssertTrue(waitFor(seconds: 5) { pub.keyframeRequests == 2 }, "the second subscriber's request was held")
        let c = try XCTUnwrap(router.counters(streamId: "st1"))
        XCTAssertEqual(c.keyframeRequestsSent, 2)
        XCTAssertEqual(c.keyframeRequestsAggregated, 0)
    }
}
