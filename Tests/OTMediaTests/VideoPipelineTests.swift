import OTBase
@testable import OTMedia
import OTRTP
import OTTransport
import OTWire
import XCTest

/// A seeded network path: drops packets with a probability (or by script) and delays each by a base delay
/// plus random jitter, which reorders packets sent close together.
struct SeededLossyPath {
    var random: SeededRandom
    var lossProbability: Double
    var baseDelay: Duration
    var maxJitter: Duration

    init(seed: UInt64, lossProbability: Double, baseDelay: Duration = .milliseconds(20), maxJitter: Duration = .zero) {
        random = SeededRandom(seed: seed); self.lossProbability = lossProbability
        self.baseDelay = baseDelay; self.maxJitter = maxJitter
    }

    /// The arrival time of a packet sent at `now`, or nil when it is lost.
    mutating func arrival(sentAt now: Instant) -> Instant? {
        let lost = Double(random.next() % 1_000_000) / 1_000_000 < lossProbability
        let jitter = maxJitter.microseconds > 0 ? Int64(random.next() % UInt64(maxJitter.microseconds)) : 0
        return lost ? nil : now + baseDelay + .microseconds(jitter)
    }
}

/// A publisher's and a subscriber's video pipelines joined by SRTP and a seeded lossy path, driven in
/// simulated time, with the RTP session's repair processors between them as a connection runs them: the receiver's
/// `NACKGenerator` NACKs gaps (and gives up on packets, which the pipeline hears through `packetsUnrecoverable`), the
/// sender's `NACKResponder` answers from its send history; keyframe requests and NACKs travel back after `feedbackDelay`.
final class VideoLink {
    enum Event {
        case arrive([UInt8], protected: Bool)
        case pli
        case nack([UInt16])
    }

    let sender: VideoSendPipeline
    let receiver: VideoReceivePipeline
    let srtpSend: SRTPContext, srtpReceive: SRTPContext
    let source: TestPatternSource
    var path: SeededLossyPath
    var answerNACK = true
    var answerPLI = true
    var retransmissionsCanBeLost = false
    /// Frames whose packets are all dropped.
    var dropFrames: Set<Int> = []
    let feedbackDelay = Duration.milliseconds(10)
    let start = Instant(micros: 1_000_000)

    private var queue: [(at: Instant, order: Int, event: Event)] = []
    private var order = 0
    private(set) var now: Instant
    private(set) var stamps: [TestPatternStamp?] = []
    private(set) var keyframeFlags: [Bool] = []
    /// The VP8 frames behind the decoded pictures (`DecodedVideoFrame.encoded`).
    private(set) var encodedFrames: [[UInt8]] = []
    private(set) var keyframeRequests: [Instant] = []
    private(set) var nackLists: [[UInt16]] = []
    private(set) var droppedSequences: [UInt16] = []
    private(set) var sentPackets: [RTPPacket] = []
    /// Frames at least one packet of which got through.
    private(set) var framesWithArrivals: Set<Int> = []
    /// The repair processors (OTRTP) and the round-trip time they are given.
    /// Packets missing 400 ms are given up (a connection waits up to 1 s; these short runs need the answer sooner).
    private(set) var nackGenerator: NACKGenerator = { var g = NACKGenerator(); g.maxAge = .milliseconds(400); return g }()
    private(set) var history = NACKResponder(capacity: 1024)
    var rtt: Duration { (path.baseDelay + feedbackDelay) * 2 }

    init(width: Int = 320, height: Int = 240, path: SeededLossyPath, sendConfig: VideoSendConfig? = nil,
         receiveConfig: VideoReceiveConfig = VideoReceiveConfig(),
         sendTransform: any FrameTransform = IdentityFrameTransform(),
         receiveTransform: any FrameTransform = IdentityFrameTransform()) throws {
        let material = (0..<SRTPProfile.aeadAes128Gcm.keyingMaterialLength).map { UInt8($0 * 7 & 0xFF) }
        srtpSend = try SRTPContext(profile: .aeadAes128Gcm, keys: SRTPKeys(keyingMaterial: material, profile: .aeadAes128Gcm, isDTLSClient: true))
        srtpReceive = try SRTPContext(profile: .aeadAes128Gcm, keys: SRTPKeys(keyingMaterial: material, profile: .aeadAes128Gcm, isDTLSClient: false))
        let config = sendConfig ?? VideoSendConfig(ssrc: 0xCAFE, encoder: VideoEncoderConfig(width: width, height: height, bitrateKbps: 600,
                                                                                           frameDropThreshold: 0),
                                                   initialSequenceNumber: 65_500)
        sender = try VideoSendPipeline(config: config, transform: sendTransform)
        receiver = try VideoReceivePipeline(config: receiveConfig, transform: receiveTransform)
        source = try TestPatternSource(width: width, height: height)
        self.path = path
        now = start
    }

    private func schedule(_ event: Event, at time: Instant) {
        queue.append((time, order, event)); order += 1
    }

    /// Sends frames `range` at 30 fps and then lets the network drain for `drain`.
    func run(frames range: Range<Int>, drain: Duration = .seconds(1)) throws {
        for k in range {
            let capture = start + .microseconds(Int64(k) * 33_333)
            try advance(to: capture)
            let frame = source.render(frameNumber: UInt32(k), timestampMicros: capture.micros)
            try sender.send(frame, now: capture) { bytes in
                sentPackets.append(try RTPPacket(parsing: bytes))
                let seq = UInt16(bytes[2]) << 8 | UInt16(bytes[3])
                history.store(sequence: seq, packet: bytes)
                try srtpSend.protectRTP(&bytes)
                if dropFrames.contains(k) { droppedSequences.append(seq); return }
                if let at = path.arrival(sentAt: capture) {
                    schedule(.arrive(bytes, protected: true), at: at)
                    framesWithArrivals.insert(k)
                } else {
                    droppedSequences.append(seq)
                }
            }
        }
        try advance(to: now + drain)
    }

    private func advance(to end: Instant) throws {
        while true {
            let next = queue.min { ($0.at, $0.order) < ($1.at, $1.order) }
            let deadline = [receiver.nextDeadline, nackGenerator.nextPoll(rtt: rtt)].compactMap { $0 }.min()
            if let d = deadline, d <= end, next.map({ d < $0.at }) ?? true {
                now = max(now, d)
                try handle(receiver.poll(now: now))
                try repair()
                continue
            }
            guard let item = next, item.at <= end else { break }
            queue.removeAll { $0.order == item.order }
            now = max(now, item.at)
            switch item.event {
            case .arrive(var bytes, let protected):
                if protected { try srtpReceive.unprotectRTP(&bytes) }
                let packet = try RTPPacket(parsing: bytes)
                nackGenerator.received(sequence: packet.sequenceNumber, now: now)
                try handle(receiver.receive(packet, now: now))
                try repair()
            case .pli:
                sender.requestKeyframe(.pli)
            case .nack(let list):
                // Retransmissions skip SRTP here: a resent copy of a packet that was only reordered would be
                // dropped by the receiver's SRTP replay window, and this test counts such duplicates at the pipeline.
                for bytes in history.packets(for: list, now: now, rtt: rtt) {
                    if retransmissionsCanBeLost, path.arrival(sentAt: now) == nil { continue }
                    schedule(.arrive(bytes, protected: false), at: now + path.baseDelay)
                }
            }
        }
        now = max(now, end)
    }

    /// The receiver's NACKs due now, and the packets it gave up on (the pipeline stops waiting for them).
    private func repair() throws {
        let list = nackGenerator.poll(now: now, rtt: rtt)
        if !list.isEmpty {
            nackLists.append(list)
            if answerNACK { schedule(.nack(list), at: now + feedbackDelay) }
        }
        let given = nackGenerator.takeGivenUp()
        if !given.isEmpty { try handle(receiver.packetsUnrecoverable(given, now: now)) }
    }

    private func handle(_ events: [VideoReceiveEvent]) throws {
        for e in events {
            switch e {
            case .frame(let f):
                stamps.append(TestPatternReader.read(f.frame))
                keyframeFlags.append(f.isKeyframe)
                encodedFrames.append(f.encoded)
            case .requestKeyframe:
                keyframeRequests.append(now)
                if answerPLI { schedule(.pli, at: now + feedbackDelay) }
            }
        }
    }

    var decodedCounters: [Int] { stamps.compactMap { $0.map { Int($0.frameNumber) } } }
}

final class VideoPipelineTests: XCTestCase {
    func testTestPatternThroughSRTPAndReorderingDecodesEveryCounterInOrder() throws {
        let link = try VideoLink(path: SeededLossyPath(seed: 1, lossProbability: 0, maxJitter: .milliseconds(15)))
        try link.run(frames: 0..<60)
        XCTAssertEqual(link.decodedCounters, Array(0..<60))
        XCTAssertFalse(link.stamps.contains { $0 == nil }, "every decoded frame carries a readable stamp")
        XCTAssertEqual(link.keyframeRequests, [])
        // The capture timestamps ride along too.
        XCTAssertEqual(link.stamps.last??.timestampMicros, link.start.micros + 59 * 33_333)
        let s = link.receiver.stats
        XCTAssertEqual(s.framesDecoded, 60)
        XCTAssertEqual(s.keyFramesDecoded, 1)
        XCTAssertEqual(s.packetsLost, 0)
        XCTAssertEqual(s.packetsReceived, link.sentPackets.count)
        XCTAssertEqual(s.bytesReceived, link.sentPackets.reduce(0) { $0 + $1.payload.count })
        XCTAssertEqual(s.framesDropped, 0)
        XCTAssertEqual(s.frameWidth, 320); XCTAssertEqual(s.frameHeight, 240)
        XCTAssertGreaterThan(s.jitter, 0, "reordering shows up as interarrival jitter")
        XCTAssertEqual(link.sender.stats.framesEncoded, 60)
        // Reordered packets may be NACKed before they show up; their retransmissions are discarded as duplicates.
        XCTAssertEqual(link.sender.stats.packetsSent, link.sentPackets.count)
        XCTAssertEqual(s.packetsDiscarded, link.history.resent)
    }

    func testRandomLossIsRepairedByNACKWithoutKeyframes() throws {
        let link = try VideoLink(path: SeededLossyPath(seed: 7, lossProbability: 0.05, maxJitter: .milliseconds(4)))
        try link.run(frames: 0..<90)
        // A loss at the very end only shows once a later packet arrives: the stream goes on, losslessly.
        link.path.lossProbability = 0
        try link.run(frames: 90..<91)
        XCTAssertGreaterThan(link.droppedSequences.count, 3, "the seed drops packets")
        let nacked = Set(link.nackLists.joined())
        XCTAssertTrue(Set(link.droppedSequences).isSubset(of: nacked), "every lost packet is NACKed")
        XCTAssertEqual(link.decodedCounters, Array(0..<91), "retransmissions repair every frame")
        XCTAssertEqual(link.keyframeRequests, [])
        let s = link.receiver.stats
        XCTAssertEqual(s.packetsLost, 0, "retransmitted packets count as received")
        XCTAssertGreaterThanOrEqual(link.nackGenerator.recovered, link.droppedSequences.count, "lost ones, and reordered ones NACKed early")
        XCTAssertGreaterThanOrEqual(link.nackGenerator.nacked, link.droppedSequences.count)
        XCTAssertEqual(link.history.resent, link.nackGenerator.nacked - link.history.missed - link.history.suppressed)
        XCTAssertGreaterThanOrEqual(link.history.resent, link.droppedSequences.count)
    }

    func testUnrepairedLossRequestsKeyframeAndRecoversAfterIt() throws {
        let link = try VideoLink(path: SeededLossyPath(seed: 3, lossProbability: 0.02, maxJitter: .milliseconds(4)))
        link.answerNACK = false
        link.dropFrames = [20, 21]
        try link.run(frames: 0..<90)
        let counters = link.decodedCounters
        XCTAssertFalse(link.stamps.contains { $0 == nil }, "no damaged picture is shown")
        XCTAssertEqual(counters, counters.sorted(), "frames come out in order")
        XCTAssertEqual(Set(counters).count, counters.count)
        XCTAssertTrue(Set(0..<20).isSuperset(of: counters.filter { $0 < 20 }))
        XCTAssertFalse(counters.contains(20)); XCTAssertFalse(counters.contains(21))
        XCTAssertGreaterThanOrEqual(link.keyframeRequests.count, 1)
        XCTAssertGreaterThan(link.sender.stats.keyFramesEncoded, 1, "the sender answered the PLI")
        XCTAssertEqual(link.sender.stats.pliCount, link.keyframeRequests.count)
        XCTAssertEqual(counters.last, 89, "decoding recovered after the keyframe")
        XCTAssertTrue(Set(link.droppedSequences).isSubset(of: Set(link.nackLists.joined())), "lost packets were NACKed first")
        let s = link.receiver.stats
        XCTAssertGreaterThan(s.packetsLost, 0)
        XCTAssertGreaterThan(s.framesDropped, 0)
        XCTAssertEqual(s.framesDropped, link.framesWithArrivals.count - counters.count, "every frame that arrived in part and was not shown")
        XCTAssertEqual(s.pliCount, link.keyframeRequests.count)
        XCTAssertEqual(s.framesDecoded, counters.count)
        // Keyframe requests are rate-limited.
        for (a, b) in zip(link.keyframeRequests, link.keyframeRequests.dropFirst()) {
            XCTAssertGreaterThanOrEqual(b - a, .milliseconds(250))
        }
    }

    /// The wait for repairs, as sessions configure it (the connection NACKs and says when it gives a packet up): a
    /// missing packet is waited for while later ones pile up (within the repair window, `holeWait`), frames resume in
    /// order when it arrives, and a give-up from the transport asks for a keyframe at once.
    func testWaitsForARepairUntilTheTransportGivesUpThenAsksForAKeyframe() throws {
        let stream = try PatternStream(width: 640, height: 480, kbps: 2500, firstSequence: 1000, reorderWindow: 256)
        let (sender, receiver) = (stream.sender, stream.receiver)
        func deliver(_ packets: [RTPPacket], at k: Int) { stream.receive(packets, at: stream.sentAt(k) + .milliseconds(5)) }
        for k in 0..<10 { deliver(try stream.frame(k), at: k) }
        XCTAssertEqual(stream.decoded, Array(0..<10))
        // Frame 10's first packet is lost; 0.9 s of frames after it arrive: within the repair window (`holeWait`,
        // 1.2 s at the default 100 ms RTT).
        var f10 = try stream.frame(10)
        let missing = f10.removeFirst()
        deliver(f10, at: 10)
        for k in 11..<38 { deliver(try stream.frame(k), at: k) }
        XCTAssertEqual(stream.decoded, Array(0..<10), "frame 10 and what follows wait for the repair")
        XCTAssertEqual(stream.keyframeRequests, [], "no keyframe while a repair can still come")
        XCTAssertFalse(receiver.isWaitingForKeyframe)
        // The retransmission arrives: everything held decodes, in order.
        stream.receive([missing], at: stream.sentAt(38))
        XCTAssertEqual(stream.decoded, Array(0..<38))
        // Now a packet the transport gives up on: a keyframe is asked for at once, and nothing after the gap is shown.
        var f38 = try stream.frame(38)
        let lost = f38.removeFirst()
        deliver(f38, at: 38)
        deliver(try stream.frame(39), at: 39)
        XCTAssertEqual(stream.keyframeRequests, [])
        stream.handle(receiver.packetsUnrecoverable([lost.sequenceNumber], now: stream.sentAt(40)), at: stream.sentAt(40))
        XCTAssertEqual(stream.keyframeRequests, [stream.sentAt(40)])
        XCTAssertTrue(receiver.isWaitingForKeyframe)
        deliver(try stream.frame(40), at: 40)
        sender.requestKeyframe()
        for k in 41..<45 { deliver(try stream.frame(k), at: k) }
        XCTAssertEqual(stream.decoded, Array(0..<38) + Array(41..<45), "resumed at the keyframe")
        XCTAssertFalse(receiver.isWaitingForKeyframe)
        XCTAssertEqual(receiver.packetsUnrecoverable([lost.sequenceNumber], now: stream.t0 + .seconds(5)).count, 0,
                       "a packet from before the keyframe is not needed any more")
    }

    /// A hole no repair fills (the transport never reported it: its NACK generator did not know the packet) is given
    /// up once no retransmission can come any more (`holeWait`, from the RTT), not after the depacketizer's window of
    /// 256 packets, which a low-bitrate stream takes many seconds to send: then a keyframe is asked for and decoding
    /// resumes with it.
    func testAHoleNoRepairFillsIsGivenUpAfterTheRepairWindowAtALowPacketRate() throws {
        let stream = try PatternStream(width: 160, height: 120, kbps: 60, firstSequence: 7, reorderWindow: 256)
        let receiver = stream.receiver
        receiver.setRoundTripTime(.milliseconds(40))
        XCTAssertEqual(receiver.holeWait, .milliseconds(1080))
        func at(_ k: Int) -> Instant { stream.sentAt(k) + .milliseconds(5) }
        for k in 0..<10 { stream.receive(try stream.frame(k), at: at(k)) }
        XCTAssertEqual(stream.decoded, Array(0..<10))
        let f10 = try stream.frame(10)
        stream.receive(Array(f10.dropFirst()), at: at(10))  // its first packet is lost for good
        var after = f10.count - 1, k = 11
        while stream.keyframeRequests.isEmpty && k < 150 {
            let p = try stream.frame(k)
            after += p.count
            stream.receive(p, at: at(k))
            k += 1
        }
        XCTAssertEqual(stream.keyframeRequests.count, 1, "the hole is given up")
        XCTAssertLessThan(after, 256, "long before the depacketizer's window of packets")
        let opened = f10.count > 1 ? at(10) : at(11)
        XCTAssertEqual(stream.keyframeRequests.first, opened + receiver.holeWait, "when no repair can come any more, not before")
        XCTAssertEqual(stream.decoded, Array(0..<10), "nothing after the hole was shown")
        stream.sender.requestKeyframe()
        let resume = k
        for j in resume..<resume + 3 { stream.receive(try stream.frame(j), at: at(j)) }
        XCTAssertEqual(Array(stream.decoded.suffix(3)), (resume..<resume + 3).map(UInt32.init), "resumed at the keyframe")
    }

    /// A frame whose packets arrive slowly but in order (a 720p keyframe of dozens of packets, paced over seconds) has
    /// no hole: however long it takes, it is not given up.
    func testABigFrameArrivingSlowlyInOrderIsNotGivenUp() throws {
        let stream = try PatternStream(width: 1280, height: 720, kbps: 4000, mtu: 150, firstSequence: 65_500, reorderWindow: 16)
        for k in 0..<3 { stream.receive(try stream.frame(k), at: stream.sentAt(k)) }
        XCTAssertEqual(stream.decoded, [0, 1, 2])
        stream.sender.requestKeyframe()
        let key = try stream.frame(3)
        XCTAssertGreaterThan(key.count, 16, "longer than the reorder window")
        var now = stream.sentAt(3)
        for p in key {
            now = now + .milliseconds(100)  // paced: the frame takes seconds, far beyond `holeWait`
            stream.receive([p], at: now)
        }
        XCTAssertGreaterThan(now - stream.t0, stream.receiver.holeWait + stream.receiver.holeWait)
        XCTAssertEqual(stream.decoded, [0, 1, 2, 3])
        XCTAssertEqual(stream.keyframeRequests, [])
    }

    func testAnOutageIsCountedAsAFreezeAndPlaybackResumes() throws {
        let link = try VideoLink(path: SeededLossyPath(seed: 8, lossProbability: 0))
        link.answerNACK = false
        link.dropFrames = Set(20..<40)   // 660 ms without packets
        try link.run(frames: 0..<70)
        XCTAssertEqual(link.decodedCounters.prefix(20), ArraySlice(0..<20))
        XCTAssertEqual(link.decodedCounters.last, 69)
        let s = link.receiver.stats
        XCTAssertEqual(s.freezeCount, 1)
        XCTAssertGreaterThanOrEqual(s.totalFreezesDuration, 0.66)
        XCTAssertLessThan(s.totalFreezesDuration, 1.5)
        XCTAssertGreaterThanOrEqual(s.packetsLost, 20)
    }

    func testANewSSRCRestartsTheStreamWithoutCountingLoss() throws {
        let receiver = try VideoReceivePipeline()
        let source = try TestPatternSource(width: 160, height: 120)
        var decoded: [UInt32] = []
        for (ssrc, firstSeq) in [(UInt32(1), UInt16(100)), (2, 30_000)] {
            let sender = try VideoSendPipeline(config: VideoSendConfig(ssrc: ssrc, encoder: VideoEncoderConfig(width: 160, height: 120, frameDropThreshold: 0),
                                                                       initialSequenceNumber: firstSeq))
            for k in 0..<5 {
                let now = Instant(micros: Int64(k) * 33_333 + (ssrc == 2 ? 1_000_000 : 0))
                try sender.send(source.render(frameNumber: UInt32(k), timestampMicros: now.micros), now: now) { bytes in
                    for case .frame(let f) in receiver.receive(try RTPPacket(parsing: bytes), now: now) {
                        decoded.append(TestPatternReader.read(f.frame)?.frameNumber ?? 999)
                    }
                }
            }
        }
        XCTAssertEqual(decoded, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4])
        XCTAssertEqual(receiver.stats.packetsLost, 0)
        XCTAssertEqual(receiver.stats.ssrc, 2)
    }

    func testPacketsCarryTimestampsMarkersAndHeaderExtensions() throws {
        let ids = RTPHeaderExtensionIds(absSendTime: 3, transportSequenceNumber: 5, mid: 9)
        let counter = TransportSequenceCounter(start: 100)
        let config = VideoSendConfig(ssrc: 42, payloadType: 100, encoder: VideoEncoderConfig(width: 320, height: 240, frameDropThreshold: 0),
                                     mtu: 600, srtpOverhead: 16, extensionIds: ids, mid: "v1",
                                     initialSequenceNumber: 65_534, initialTimestamp: 4_294_967_000)
        let sender = try VideoSendPipeline(config: config, transportSequence: counter)
        let source = try TestPatternSource(width: 320, height: 240)
        var packets: [(frame: Int, packet: RTPPacket, size: Int)] = []
        for k in 0..<5 {
            let t = Instant(micros: 5_000_000 + Int64(k) * 40_000)
            try sender.send(source.render(frameNumber: UInt32(k), timestampMicros: t.micros), now: t) { bytes in
                packets.append((k, try RTPPacket(parsing: bytes), bytes.count))
            }
        }
        XCTAssertGreaterThan(packets.count, 5)
        for (i, p) in packets.enumerated() {
            XCTAssertEqual(p.packet.ssrc, 42); XCTAssertEqual(p.packet.payloadType, 100)
            XCTAssertEqual(p.packet.sequenceNumber, 65_534 &+ UInt16(i))
            XCTAssertEqual(p.packet.timestamp, 4_294_967_000 &+ UInt32(p.frame * 3600), "90 kHz from the capture time")
            let lastOfFrame = i == packets.count - 1 || packets[i + 1].frame != p.frame
            XCTAssertEqual(p.packet.marker, lastOfFrame)
            XCTAssertLessThanOrEqual(p.size + 16 + 28, 600, "fits the MTU with SRTP and IP/UDP")
            XCTAssertEqual(try TransportWideSequenceNumber.decode(XCTUnwrap(p.packet.extensions.value(id: 5))), 100 + UInt16(i))
            XCTAssertEqual(try MidExtension.decode(XCTUnwrap(p.packet.extensions.value(id: 9))), "v1")
            let abs = try AbsSendTime.decode(XCTUnwrap(p.packet.extensions.value(id: 3)))
            XCTAssertEqual(abs, UInt32(((5_000_000 + Int64(p.frame) * 40_000) << 18) / 1_000_000) & 0xFF_FFFF)
        }
        XCTAssertEqual(counter.allocate(), 100 + UInt16(packets.count), "the counter is shared transport-wide")
        XCTAssertTrue(packets[0].packet.extensions.isOneByte)

        // Ids above 14 need the two-byte form.
        var wide = config
        wide.extensionIds = RTPHeaderExtensionIds(absSendTime: 3, mid: 20)
        let wideSender = try VideoSendPipeline(config: wide)
        var first: RTPPacket?
        try wideSender.send(source.render(frameNumber: 0, timestampMicros: 0), now: .zero) { if first == nil { first = try RTPPacket(parsing: $0) } }
        let p = try XCTUnwrap(first)
        XCTAssertTrue(p.extensions.isTwoByte)
        XCTAssertEqual(try MidExtension.decode(XCTUnwrap(p.extensions.value(id: 20))), "v1")
        XCTAssertEqual(p.extensions.value(id: 3)?.count, 3)
        wide.extensionIds = RTPHeaderExtensionIds(mid: 0)
        XCTAssertThrowsError(try VideoSendPipeline(config: wide), "id 0 is reserved")
    }

    func testKeyframeOnRequestAndRuntimeRateChanges() throws {
        let config = VideoSendConfig(ssrc: 1, encoder: VideoEncoderConfig(width: 160, height: 120, frameDropThreshold: 0))
        let sender = try VideoSendPipeline(config: config)
        let source = try TestPatternSource(width: 160, height: 120)
        var keyframes: [Int] = []
        func send(_ k: Int) throws {
            try sender.send(source.render(frameNumber: UInt32(k), timestampMicros: Int64(k) * 33_333), now: Instant(micros: Int64(k) * 33_333)) { bytes in
                let p = try RTPPacket(parsing: bytes)
                let (d, data) = try VP8PayloadDescriptor.parse(p.payload)
                if d.startsFrame, VP8FrameHeader.isKeyframe(data) { keyframes.append(k) }
            }
        }
        for k in 0..<5 { try send(k) }
        sender.requestKeyframe(.fir)
        for k in 5..<8 { try send(k) }
        sender.requestKeyframe(.pli)
        try send(8)
        XCTAssertEqual(keyframes, [0, 5, 8])
        XCTAssertEqual(sender.stats.keyFramesEncoded, 3)
        XCTAssertEqual(sender.stats.firCount, 1); XCTAssertEqual(sender.stats.pliCount, 1)
        try sender.setTargetBitrate(kbps: 150)
        try sender.setFramerate(15)
        XCTAssertEqual(sender.config.encoder.bitrateKbps, 150); XCTAssertEqual(sender.config.encoder.framerate, 15)
        XCTAssertEqual(sender.stats.targetBitrateKbps, 150); XCTAssertEqual(sender.stats.targetFramerate, 15)
        XCTAssertThrowsError(try sender.setTargetBitrate(kbps: 0))
        // A new frame size reopens the encoder and starts with a keyframe.
        let big = try TestPatternSource(width: 320, height: 240)
        var sizes: [(Int, Int)] = []
        try sender.send(big.render(frameNumber: 9, timestampMicros: 9 * 33_333), now: Instant(micros: 9 * 33_333)) { bytes in
            let (_, data) = try VP8PayloadDescriptor.parse(try RTPPacket(parsing: bytes).payload)
            if let s = VP8FrameHeader.keyframeSize(data) { sizes.append(s) }
        }
        XCTAssertEqual(sizes.map(\.0), [320]); XCTAssertEqual(sizes.map(\.1), [240])
        XCTAssertEqual(sender.stats.frameWidth, 320)
    }
}

final class VideoPipelineTransformTests: XCTestCase {
    func testFramesPassThroughATransformBetweenEncoderAndPacketizer() throws {
        let out = XORTransform(key: 0xA5, clearBytes: 10), back = XORTransform(key: 0xA5, clearBytes: 10)
        let link = try VideoLink(path: SeededLossyPath(seed: 4, lossProbability: 0, maxJitter: .milliseconds(3)),
                                 sendTransform: out, receiveTransform: back)
        try link.run(frames: 0..<20)
        XCTAssertEqual(link.decodedCounters, Array(0..<20))
        XCTAssertEqual(out.calls, 20); XCTAssertEqual(back.calls, 20)
        XCTAssertEqual(link.receiver.stats.decodeErrors, 0)
        // The decoded frames' `encoded` bytes are the frames with the transform undone: they decode on their own.
        let decoder = try VP8Decoder()
        var picture = VideoFrame(width: 2, height: 2)
        let again = try link.encodedFrames.map { f -> UInt32? in
            _ = try decoder.decode(f[...], into: &picture)
            return TestPatternReader.read(picture)?.frameNumber
        }
        XCTAssertEqual(again, (0..<20).map { UInt32?($0) })

        // What travels is the transformed frame: the plain pipeline's first keyframe differs past the clear header.
        let plain = try VideoLink(path: SeededLossyPath(seed: 4, lossProbability: 0))
        try plain.run(frames: 0..<1, drain: .zero)
        let a = try VP8PayloadDescriptor.parse(link.sentPackets[0].payload).1
        let b = try VP8PayloadDescriptor.parse(plain.sentPackets[0].payload).1
        XCTAssertEqual(Array(a.prefix(10)), Array(b.prefix(10)), "the VP8 header stays readable")
        XCTAssertEqual(Array(a.dropFirst(10).prefix(32)), b.dropFirst(10).prefix(32).map { $0 ^ 0xA5 })
    }

    /// A frame the transform rejects is dropped and a keyframe requested; when every frame is rejected (a wrong E2EE
    /// secret) only the first of the run asks, since keyframes would not help.
    func testFramesTheTransformRejectsAreDroppedWithOneKeyframeRequestPerRun() throws {
        let link = try VideoLink(path: SeededLossyPath(seed: 4, lossProbability: 0),
                                 sendTransform: XORTransform(key: 1, clearBytes: 10), receiveTransform: RejectingTransform())
        try link.run(frames: 0..<30)
        XCTAssertEqual(link.decodedCounters, [])
        let s = link.receiver.stats
        // The first frame fails and asks for a keyframe; the receiver then waits for it, and it fails too.
        XCTAssertGreaterThanOrEqual(s.transformErrors, 2)
        XCTAssertEqual(s.framesDropped, s.transformErrors)
        XCTAssertEqual(link.keyframeRequests.count, 1, "one keyframe request for the whole run of failures")
    }

    func testRandomAndTruncatedPacketsNeverCrashTheReceivePipelines() throws {
        let video = try VideoReceivePipeline(config: VideoReceiveConfig(payloadType: nil))
        let audio = try AudioReceivePipeline(config: AudioReceiveConfig(payloadType: nil))
        var random = SeededRandom(seed: 99)
        var pcm: [Int16] = []
        var parsed = 0
        for i in 0..<3000 {
            let n = Int(random.next() % 200)
            var bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            if n > 0 { bytes[0] = 0x80 | (bytes[0] & 0x3F) }  // version 2 so most packets parse
            guard let packet = try? RTPPacket(parsing: bytes) else { continue }
            parsed += 1
            let now = Instant(micros: Int64(i) * 5_000)
            _ = video.receive(packet, now: now)
            _ = video.poll(now: now)
            audio.receive(packet, now: now)
            if i % 4 == 0 { audio.pull(now: now, into: &pcm) }
        }
        XCTAssertGreaterThan(parsed, 700)
        XCTAssertGreaterThanOrEqual(video.stats.packetsReceived + video.stats.packetsDiscarded, parsed, "every packet is counted")
        XCTAssertGreaterThan(video.stats.packetsDiscarded, 0, "malformed VP8 payloads are discarded")
        XCTAssertGreaterThan(audio.stats.packetsDiscarded, 0, "garbage is counted, not played")
    }
}

/// A test-pattern sender and a receive pipeline on a virtual clock (frame k is captured at 33.3·k ms): the frame
/// numbers decoded, and when keyframes were asked for.
private final class PatternStream {
    let sender: VideoSendPipeline
    let receiver: VideoReceivePipeline
    let source: TestPatternSource
    let t0 = Instant(micros: 1_000_000)
    var decoded: [UInt32] = []
    var keyframeRequests: [Instant] = []

    init(width: Int, height: Int, kbps: Int, mtu: Int = 1200, firstSequence: UInt16, reorderWindow: Int) throws {
        sender = try VideoSendPipeline(config: VideoSendConfig(ssrc: 0xBEEF, encoder: VideoEncoderConfig(width: width, height: height,
                                                               bitrateKbps: kbps, frameDropThreshold: 0),
                                                               mtu: mtu, initialSequenceNumber: firstSequence))
        receiver = try VideoReceivePipeline(config: VideoReceiveConfig(reorderWindowPackets: reorderWindow))
        source = try TestPatternSource(width: width, height: height)
    }

    func sentAt(_ k: Int) -> Instant { t0 + .microseconds(Int64(k) * 33_333) }

    /// The packets of frame `k`.
    func frame(_ k: Int) throws -> [RTPPacket] {
        var out: [RTPPacket] = []
        let at = sentAt(k)
        try sender.send(source.render(frameNumber: UInt32(k), timestampMicros: at.micros), now: at) { out.append(try RTPPacket(parsing: $0)) }
        return out
    }

    func handle(_ events: [VideoReceiveEvent], at now: Instant) {
        for e in events {
            switch e {
            case .frame(let f): if let n = TestPatternReader.read(f.frame)?.frameNumber { decoded.append(n) }
            case .requestKeyframe: keyframeRequests.append(now)
            }
        }
    }

    /// Delivers `packets` at `now`, after running the receiver's timer at its deadline if that came before.
    func receive(_ packets: [RTPPacket], at now: Instant) {
        if let d = receiver.nextDeadline, d < now { handle(receiver.poll(now: d), at: d) }
        for p in packets { handle(receiver.receive(p, now: now), at: now) }
        handle(receiver.poll(now: now), at: now)
    }
}
