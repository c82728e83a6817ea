import OTBase
@testable import OTServer
import OTTestSupport
import OTTransport
@testable import OTWire
import XCTest

/// `RouterCore` alone, sans-IO: packets, connection events and virtual instants in; forwards, commands and deadlines out.
final class RouterCoreTests: XCTestCase {
    static let audio: UInt32 = 0xA0D1, video: UInt32 = 0x71DE
    let pub = 1, sub1 = 2, sub2 = 3
    private func at(_ ms: Int64) -> Instant { Instant(micros: 1_000_000 + ms * 1000) }

    private func section(_ kind: String, pt: UInt8, ssrc: UInt32?) -> SDPNegotiatedMedia {
        SDPNegotiatedMedia(kind: kind, mid: kind == "audio" ? "0" : "1",
                           codec: SDPCodec(payloadType: pt, name: kind == "audio" ? "opus" : "VP8", clockRate: kind == "audio" ? 48000 : 90000),
                           rtxPayloadType: nil, feedback: [], extmaps: [], remoteSSRCs: ssrc.map { [$0] } ?? [], remoteRTXSSRCs: [:],
                           direction: .sendrecv)
    }

    /// A core with a publisher of audio and video and two subscribers, made at `at(0)` and (`connected`) their connections
    /// up; commands drained.
    private func makeCore(quality: QualityFallbackConfig = QualityFallbackConfig(), fallback: Bool = true, connected: Bool = true) -> RouterCore {
        let core = RouterCore(config: RouterCore.Config(pliInterval: .milliseconds(300), quality: quality, qualityInterval: .seconds(1)), now: at(0))
        _ = core.addPublisher(peerId: "pub", handle: pub, sessionId: "s", connectionId: "cp", streamId: "st", audioFallbackEnabled: fallback,
                              media: [section("audio", pt: 111, ssrc: Self.audio), section("video", pt: 96, ssrc: Self.video)])
        for (h, id) in [(sub1, "sub1"), (sub2, "sub2")] {
            core.addSubscriber(peerId: id, handle: h, sessionId: "s", connectionId: "c\(id)", streamId: "st", audioFallbackEnabled: true,
                               media: [section("audio", pt: 111, ssrc: nil), section("video", pt: 100, ssrc: nil)], now: at(0))
            if connected { core.subscriberConnected(h, now: at(0)) }
        }
        _ = commands(core)
        return core
    }

    private func vp8(seq: UInt16, keyframe: Bool) -> [UInt8] {
        RTPPacket(marker: true, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(seq) * 3000, ssrc: Self.video,
                  payload: [0x10, keyframe ? 0x00 : 0x01, UInt8(seq & 0xFF)]).serialized()
    }
    private func opus(seq: UInt16) -> [UInt8] {
        RTPPacket(payloadType: 111, sequenceNumber: seq, timestamp: UInt32(seq) * 960, ssrc: Self.audio, payload: [0xF8]).serialized()
    }
    private func commands(_ core: RouterCore) -> [RouterCore.Command] {
        var out: [RouterCore.Command] = []
        while let c = core.pollCommand() { out.append(c) }
        return out
    }
    /// (handle, sequence number, payload type) of each forward of the last `receive`.
    private func forwarded(_ core: RouterCore) -> [(Int, UInt16, UInt8)] {
        core.forwards.map { ($0.handle, UInt16($0.out[2]) << 8 | UInt16($0.out[3]), $0.out[1] & 0x7F) }
    }

    func testVideoWaitsForAKeyframeAndAudioFlowsAtOnceWithEachSubscribersPayloadType() {
        let core = makeCore()
        core.receive(opus(seq: 7), from: pub, now: at(1))
        XCTAssertEqual(forwarded(core).map(\.0), [sub1, sub2])
        core.receive(vp8(seq: 10, keyframe: false), from: pub, now: at(2))
        XCTAssertTrue(core.forwards.isEmpty, "a delta frame is held for both")
        XCTAssertEqual(core.counters(streamId: "st")?.packetsHeldForKeyframe, 2)
        core.receive(vp8(seq: 11, keyframe: true), from: pub, now: at(3))
        XCTAssertEqual(forwarded(core).map(\.0), [sub1, sub2])
        XCTAssertEqual(forwarded(core).map(\.2), [100, 100], "rewritten to the subscribers' payload type")
        XCTAssertEqual(forwarded(core).map(\.1), [11, 11])
        core.receive(vp8(seq: 12, keyframe: false), from: pub, now: at(4))
        XCTAssertEqual(forwarded(core).map(\.1), [12, 12])
        core.recordSent(packets: 2, bytes: 40)
        XCTAssertEqual(core.counters(streamId: "st")?.packetsOut, 2)
        core.receive(vp8(seq: 13, keyframe: false), from: sub1, now: at(5))
        XCTAssertTrue(core.forwards.isEmpty, "a subscriber's packets go nowhere")
    }

    func testKeyframeRequestsAreAggregatedAndRepeatedWhileASubscriberWaits() {
        let core = makeCore(connected: false)
        core.subscriberConnected(sub1, now: at(0))
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)])
        XCTAssertEqual(core.nextDeadline, at(300), "the window's end is checked")
        core.subscriberRequestedKeyframe(sub2, now: at(50))
        XCTAssertEqual(commands(core), [], "folded into the request already sent")
        // No keyframe came: at the window's end the request goes again, and again one window later.
        core.handleTimeout(now: at(300))
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)])
        core.handleTimeout(now: at(600))
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)])
        // The keyframe passes: nobody waits any more, so the next window's end sends nothing.
        core.receive(vp8(seq: 1, keyframe: true), from: pub, now: at(650))
        core.handleTimeout(now: at(900))
        XCTAssertEqual(commands(core), [])
        XCTAssertEqual(core.counters(streamId: "st")?.keyframeRequestsSent, 3)
        XCTAssertEqual(core.counters(streamId: "st")?.keyframeRequestsAggregated, 1)
    }

    func testTheGateOpensOnlyOnceTheSubscribersConnectionIsUp() {
        let core = makeCore(connected: false)
        core.subscriberConnected(sub2, now: at(0))
        core.receive(vp8(seq: 20, keyframe: true), from: pub, now: at(1))
        XCTAssertEqual(forwarded(core).map(\.0), [sub2], "sub1's connection is not up: this keyframe would never reach it")
        core.receive(vp8(seq: 21, keyframe: false), from: pub, now: at(2))
        XCTAssertEqual(forwarded(core).map(\.0), [sub2], "nor would the frames after it")
        core.subscriberConnected(sub1, now: at(3))
        XCTAssertEqual(commands(core).filter { $0 == .requestKeyframe(publisher: pub, ssrc: Self.video) }.count, 2,
                       "one at each connection (the first keyframe had passed)")
        core.receive(vp8(seq: 22, keyframe: false), from: pub, now: at(4))
        XCTAssertEqual(forwarded(core).map(\.0), [sub2], "held until the keyframe asked for")
        core.receive(vp8(seq: 23, keyframe: true), from: pub, now: at(40))
        XCTAssertEqual(forwarded(core).map { [$0.0, Int($0.1)] }, [[sub1, 23], [sub2, 23]])
    }

    /// A subscriber whose keyframe start was lost on its downlink sees only the packets after it, cannot NACK what came
    /// before the first packet it saw, and asks for a keyframe: right after its gate opened, that request goes to the
    /// publisher at once (not folded into the window as a repair: at 20 % loss that cost 300–600 ms of the first
    /// frame, docs/benchmarks.md "Loss", stop 22), and again at the window's end until a keyframe passes.
    func testAKeyframeRequestRightAfterTheGateOpenedGoesAtOnceAndIsRepeated() {
        let core = makeCore()  // both connected at 0: the first-keyframe request went then
        core.receive(vp8(seq: 10, keyframe: true), from: pub, now: at(20))
        core.receive(vp8(seq: 11, keyframe: false), from: pub, now: at(50))
        XCTAssertEqual(forwarded(core).map(\.0), [sub1, sub2])
        core.subscriberRequestedKeyframe(sub1, now: at(60))  // 10 was lost on sub1's downlink
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)], "at once, not at the window's end")
        XCTAssertEqual(core.nextDeadline, at(360))
        core.handleTimeout(now: at(360))
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)], "no keyframe passed since: again")
        core.receive(vp8(seq: 12, keyframe: true), from: pub, now: at(400))
        core.subscriberRequestedKeyframe(sub2, now: at(500))  // long after its gate opened: a repair, for the window's end
        XCTAssertEqual(commands(core), [])
        core.handleTimeout(now: at(660))
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)], "the repair request, trailing")
        core.receive(vp8(seq: 13, keyframe: true), from: pub, now: at(700))
        core.handleTimeout(now: at(960))
        XCTAssertEqual(commands(core), [], "the keyframes passed: nobody waits")
    }

    func testAPausedSubscriberResumesWithoutASequenceGapFromAKeyframe() {
        let core = makeCore()
        core.receive(vp8(seq: 100, keyframe: true), from: pub, now: at(1))
        core.receive(vp8(seq: 101, keyframe: false), from: pub, now: at(2))
        core.setSubscription(peerId: "sub1", audio: true, video: false, now: at(3))
        core.receive(vp8(seq: 102, keyframe: false), from: pub, now: at(4))
        XCTAssertEqual(forwarded(core).map(\.0), [sub2])
        core.setSubscription(peerId: "sub1", audio: true, video: true, now: at(5))
        XCTAssertEqual(commands(core), [.requestKeyframe(publisher: pub, ssrc: Self.video)], "resumed video needs a keyframe")
        core.receive(vp8(seq: 103, keyframe: false), from: pub, now: at(6))
        XCTAssertEqual(forwarded(core).map(\.0), [sub2], "held until the keyframe")
        core.receive(vp8(seq: 104, keyframe: true), from: pub, now: at(7))
        XCTAssertEqual(forwarded(core).map { [$0.0, Int($0.1)] }, [[sub1, 102], [sub2, 104]], "sub1 continues right after 101")
    }

    /// A subscriber's NACK is answered from the stream's one history: each number it names (in its own numbering) is the
    /// publisher's packet it was sent as, written for it again (its sequence number and payload type); numbers from
    /// before its last pause, numbers never given out, packets the history no longer holds and other SSRCs find nothing.
    func testRetransmissionsAreTheStreamsPacketsWrittenForEachSubscriber() {
        let core = makeCore()
        /// (sequence number, payload type, the publisher's sequence number in the payload's last byte)
        func fields(_ packets: [[UInt8]?]) -> [[Int]?] {
            packets.map { $0.map { [Int(UInt16($0[2]) << 8 | UInt16($0[3])), Int($0[1] & 0x7F), Int($0[$0.count - 1])] } }
        }
        core.receive(vp8(seq: 100, keyframe: true), from: pub, now: at(1))
        core.receive(vp8(seq: 101, keyframe: false), from: pub, now: at(2))
        core.setSubscription(peerId: "sub1", audio: true, video: false, now: at(3))
        core.receive(vp8(seq: 102, keyframe: false), from: pub, now: at(4))
        core.setSubscription(peerId: "sub1", audio: true, video: true, now: at(5))
        core.receive(vp8(seq: 103, keyframe: true), from: pub, now: at(6))
        core.receive(vp8(seq: 104, keyframe: false), from: pub, now: at(7))
        XCTAssertEqual(forwarded(core).map { [$0.0, Int($0.1)] }, [[sub1, 103], [sub2, 104]])
        XCTAssertEqual(fields(core.retransmissions(for: sub1, ssrc: Self.video, sequences: [103, 101, 102, 104], now: at(8))),
                       [[103, 100, 104], nil, [102, 100, 103], nil], "sub1 got 103 and 104 as 102 and 103; its 101 came before the pause")
        XCTAssertEqual(fields(core.retransmissions(for: sub2, ssrc: Self.video, sequences: [101, 99], now: at(8))), [[101, 100, 101], nil])
        // Our clients NACK audio too: answered from the stream's audio history, as it was forwarded.
        core.receive(opus(seq: 7), from: pub, now: at(8))
        let sent = core.forwards.first { $0.handle == sub2 }.map { Array($0.out) }
        XCTAssertNotNil(sent)
        let sentSeq = sent.map { UInt16($0[2]) << 8 | UInt16($0[3]) } ?? 0
        XCTAssertEqual(core.retransmissions(for: sub2, ssrc: Self.audio, sequences: [sentSeq, sentSeq &+ 1], now: at(8)), [sent, nil],
                       "the audio packet as forwarded; a number not sent yet: nothing")
        for seq: UInt16 in 105..<1200 { core.receive(vp8(seq: seq, keyframe: false), from: pub, now: at(9)) }
        XCTAssertEqual(fields(core.retransmissions(for: sub2, ssrc: Self.video, sequences: [101, 1199], now: at(10))), [nil, [1199, 100, 1199 & 0xFF]],
                       "1024 packets kept")
    }

    func testPoorDownlinkDropsVideoThenGoodOneBringsItBackOnVirtualTime() {
        let quality = QualityFallbackConfig(warnAfter: .seconds(2), disableAfter: .seconds(4), recoverAfter: .seconds(3))
        let core = makeCore(quality: quality)
        _ = commands(core)
        var highest: UInt32 = 0
        var events: [MediaQualityEvent] = []
        func second(_ s: Int64, lost: UInt8) {
            highest += 100
            core.subscriberReport(sub1, RTCPReportBlock(ssrc: Self.video, fractionLost: lost, extendedHighestSequence: highest))
            core.subscriberReport(sub2, RTCPReportBlock(ssrc: Self.video, fractionLost: 0, extendedHighestSequence: highest))
            XCTAssertLessThanOrEqual(core.nextDeadline, at(s * 1000))
            core.handleTimeout(now: at(s * 1000))
            for case .quality(let peer, let e) in commands(core) { XCTAssertEqual(peer, "sub1"); events.append(e) }
        }
        // Half the packets lost after repair. The first report anchors; the window (5 s) is full at second 5: the
        // warning 2 s later, video off 4 s later.
        for s in Int64(1)...9 { second(s, lost: 128) }
        XCTAssertEqual(events, [.videoDisableWarning, .videoDisabled])
        core.receive(vp8(seq: 5, keyframe: true), from: pub, now: at(9001))
        XCTAssertEqual(forwarded(core).map(\.0), [sub2], "sub1 gets no video")
        core.receive(opus(seq: 5), from: pub, now: at(9002))
        XCTAssertEqual(forwarded(core).map(\.0), [sub1, sub2], "audio continues")
        XCTAssertEqual(core.counters(streamId: "st")?.subscribersVideoDisabled, 1)
        events = []
        // Clean from second 10: the window is poor at 12 (3 lossy seconds of 5: 30 %), fair at 13 (20 %), good from
        // 14 on (10 %); video back 3 s after 13.
        for s in Int64(10)...16 { second(s, lost: 0) }
        XCTAssertEqual(events, [.videoEnabled])
        XCTAssertEqual(core.counters(streamId: "st")?.subscribersVideoDisabled, 0)
        core.receive(vp8(seq: 6, keyframe: true), from: pub, now: at(16_001))
        XCTAssertEqual(forwarded(core).map(\.0), [sub1, sub2])
    }

    func testPublisherLossIsReportedToSubscribedStreamsAndTheStreamGoesWithItsLastPeer() {
        let core = makeCore()
        XCTAssertEqual(core.close(peerId: "pub"), pub)
        XCTAssertEqual(commands(core), [.publisherLink(streamId: "st", up: false)])
        XCTAssertEqual(core.streamCount, 1, "its subscribers hold it")
        _ = core.addPublisher(peerId: "pub2", handle: 9, sessionId: "s", connectionId: "cp", streamId: "st", audioFallbackEnabled: true,
                              media: [section("video", pt: 96, ssrc: Self.video)])
        core.publisherLink(9, up: true)
        XCTAssertEqual(commands(core), [.publisherLink(streamId: "st", up: true)])
        core.close(peerId: "sub1"); core.close(peerId: "sub2"); core.close(peerId: "pub2")
        XCTAssertEqual(core.streamCount, 0)
        XCTAssertEqual(core.peerCount, 0)
    }

    func testASubscribeOfferWaitsForItsPublisherAndCanBeDropped() {
        let core = RouterCore(config: RouterCore.Config(), now: at(0))
        XCTAssertNil(core.source(forSubscriberOf: "st", sessionId: "s", token: 41))
        XCTAssertNil(core.source(forSubscriberOf: "other", sessionId: "s", token: 42))
        XCTAssertEqual(core.streamCount, 2)
        core.dropPending(tokens: [42])
        XCTAssertEqual(core.streamCount, 1)
        let r = core.addPublisher(peerId: "pub", handle: pub, sessionId: "s", connectionId: "cp", streamId: "st", audioFallbackEnabled: true,
                                  media: [section("video", pt: 96, ssrc: Self.video)])
        XCTAssertEqual(r.pending, [41])
        let source = core.source(forSubscriberOf: "st", sessionId: "s", token: 43)
        XCTAssertEqual(source?.video, .some(Self.video))
        XCTAssertNil(source?.audio ?? nil, "no audio published")
    }
}

/// The router core's forwarding allocates nothing once warm: each subscriber's copy goes into its reused buffer.
final class RouterCoreAllocationTests: XCTestCase {
    func testForwardingAllocatesNothingPerPacket() {
        let video: UInt32 = 0x71DE, audio: UInt32 = 0xA0D1
        func section(_ kind: String, pt: UInt8, ssrc: UInt32?) -> SDPNegotiatedMedia {
            SDPNegotiatedMedia(kind: kind, mid: kind == "audio" ? "0" : "1",
                               codec: SDPCodec(payloadType: pt, name: kind == "audio" ? "opus" : "VP8", clockRate: kind == "audio" ? 48000 : 90000),
                               rtxPayloadType: nil, feedback: [], extmaps: [], remoteSSRCs: ssrc.map { [$0] } ?? [], remoteRTXSSRCs: [:],
                               direction: .sendrecv)
        }
        let start = Instant(micros: 1_000_000)
        let core = RouterCore(config: RouterCore.Config(pliInterval: .milliseconds(300), quality: QualityFallbackConfig(),
                                                        qualityInterval: .seconds(1)), now: start)
        _ = core.addPublisher(peerId: "pub", handle: 1, sessionId: "s", connectionId: "cp", streamId: "st", audioFallbackEnabled: false,
                              media: [section("audio", pt: 111, ssrc: audio), section("video", pt: 96, ssrc: video)])
        for h in 2...5 {
            core.addSubscriber(peerId: "sub\(h)", handle: h, sessionId: "s", connectionId: "c\(h)", streamId: "st", audioFallbackEnabled: false,
                               media: [section("audio", pt: 111, ssrc: nil), section("video", pt: 100, ssrc: nil)], now: start)
            core.subscriberConnected(h, now: start)
        }
        var packet = RTPPacket(marker: true, payloadType: 96, sequenceNumber: 0, timestamp: 0, ssrc: video,
                               payload: [0x10, 0x00] + Array(repeating: 0x55, count: 1100)).serialized()
        // An audio packet after every fourth video packet (both histories fill and wrap).
        var voice = RTPPacket(payloadType: 111, sequenceNumber: 0, timestamp: 0, ssrc: audio, payload: [UInt8](repeating: 0x33, count: 120)[...]).serialized()
        var seq: UInt16 = 0
        var forwarded = 0
        func step() {
            packet[2] = UInt8(seq >> 8); packet[3] = UInt8(seq & 0xFF)
            packet[13] = seq == 0 ? 0x00 : 0x01  // a keyframe first, then delta frames
            core.receive(packet, from: 1, now: start + .microseconds(Int64(seq) * 500))
            forwarded += core.forwards.count
            if seq % 4 == 0 {
                voice[2] = UInt8((seq / 4) >> 8); voice[3] = UInt8((seq / 4) & 0xFF)
                core.receive(voice, from: 1, now: start + .microseconds(Int64(seq) * 500 + 100))
                forwarded += core.forwards.count
            }
            seq &+= 1
        }
        for _ in 0..<2048 { step() }
        while core.pollCommand() != nil {}
        let allocations = ThreadAllocations.during { for _ in 0..<5000 { step() } }
        XCTAssertEqual(forwarded, 4 * (7048 + 7048 / 4), "every packet forwarded to the four subscribers")
        XCTAssertEqual(allocations, 0, "allocations in 5000 video and 1250 audio packets forwarded to 4 subscribers")
    }
}
