import OTBase
import OTRTP
import OTWire

/// Settings of a `VideoReceivePipeline`.
public struct VideoReceiveConfig: Sendable {
    /// The payload type; packets with another are discarded. nil accepts any.
    public var payloadType: UInt8?
    /// The payload format (and so the codec: `VideoCodecs.makeDecoder`) of the stream.
    public var format: any RTPPayloadFormat
    public var jitter: VideoJitterConfig
    /// Packets past a missing one after which the depacketizer gives up on it (what it holds meanwhile). A hole is
    /// also given up once no repair can come any more (`VideoReceivePipeline.holeWait`): both are backstops to the
    /// RTP session's NACK give-up, which the driver reports through `packetsUnrecoverable`.
    public var reorderWindowPackets: Int
    /// Keyframe requests go at most this often (or every two RTTs when longer); those made meanwhile are dropped
    /// (the RTP session's pacer paces what goes on the wire).
    public var keyframeRequestMinIntervalMillis: Int
    public var decoderThreads: Int

    public init(payloadType: UInt8? = 96, format: any RTPPayloadFormat = PayloadFormats.vp8, jitter: VideoJitterConfig = VideoJitterConfig(), reorderWindowPackets: Int = 64,
                keyframeRequestMinIntervalMillis: Int = 250, decoderThreads: Int = 1) {
        self.payloadType = payloadType; self.format = format; self.jitter = jitter; self.reorderWindowPackets = reorderWindowPackets
        self.keyframeRequestMinIntervalMillis = keyframeRequestMinIntervalMillis
        self.decoderThreads = decoderThreads
    }
}

/// A decoded picture and what the receiver knows about it.
public struct DecodedVideoFrame: Sendable {
    /// The picture; `timestampMicros` is the RTP timestamp in microseconds since the stream's first frame.
    public var frame: VideoFrame
    public var rtpTimestamp: UInt32
    public var isKeyframe: Bool
    /// Bytes of the encoded frame.
    public var encodedBytes: Int
    /// The encoded frame the decoder was given (the frame transform already undone). Shares the pipeline's storage:
    /// holding it past the event costs the pipeline one copy on its next frame.
    public var encoded: [UInt8]
}

/// What a `VideoReceivePipeline` asks of its driver.
public enum VideoReceiveEvent: Sendable {
    /// A decoded frame to render.
    case frame(DecodedVideoFrame)
    /// Send a PLI: the stream cannot be decoded until a keyframe arrives.
    case requestKeyframe
}

/// Counters of a `VideoReceivePipeline` (W3C `inbound-rtp` names where one exists).
public struct VideoReceiveStats: Sendable, Equatable {
    public var ssrc: UInt32 = 0
    public var packetsReceived = 0
    public var bytesReceived = 0
    public var headerBytesReceived = 0
    public var packetsLost = 0
    /// Packets discarded: wrong payload type, duplicates, malformed or too late.
    public var packetsDiscarded = 0
    /// Interarrival jitter in seconds.
    public var jitter = 0.0
    /// Complete frames assembled from packets.
    public var framesReceived = 0
    public var framesDecoded = 0
    public var keyFramesDecoded = 0
    /// Frames not decoded (some of their packets arrived, but a later frame was decoded first, or the decoder
    /// or transform rejected them): undecodable after a loss, or too late.
    public var framesDropped = 0
    public var decodeErrors = 0
    public var transformErrors = 0
    public var freezeCount = 0
    /// Total length of freezes in seconds.
    public var totalFreezesDuration = 0.0
    /// Sequence numbers NACKed (retries included) and packets that arrived after being NACKed: the RTP session's
    /// (`RTPSession.nackCounters`), filled in by the session layer.
    public var nackCount = 0
    public var packetsRepaired = 0
    /// Keyframe requests (PLIs) asked for.
    public var pliCount = 0
    public var frameWidth = 0
    public var frameHeight = 0
    public init() {}
}

/// The subscriber's video path, sans-IO: RTP packets and the time in, decoded frames and keyframe requests out.
///
/// RTP → the format's `RTPDepacketizer` → `VideoJitterBuffer` → `FrameTransform` → `VideoDecoder` (the format's codec). Repair (NACK, RTX, FEC) is the
/// RTP session's, before the pipeline; a packet it gives up on (`packetsUnrecoverable`), a gap the depacketizer gives
/// up on, an undecodable frame or a decoder error leads to a keyframe request (paced). Call `poll(now:)` at
/// `nextDeadline` when no packet arrives. Not thread-safe: drive it from one thread.
public final class VideoReceivePipeline {
    public private(set) var config: VideoReceiveConfig
    private let transform: any FrameTransform
    private var decoder: any VideoDecoder
    private var depacketizer: any RTPDepacketizer
    /// Counters of depacketizers replaced after a loss (malformed + late + duplicate packets; frames delivered, dropped).
    private var retired = (discarded: 0, framesDelivered: 0, framesDropped: 0)
    private var jitterBuffer: VideoJitterBuffer<[UInt8]>
    private var rtpStats: RTPReceiveStatistics
    private var keyframePacer: KeyframeRequestPacer
    private var rtt: Duration = .milliseconds(100)
    private var counters = VideoReceiveStats()
    private var ssrc: UInt32?
    private var picture = VideoFrame(width: 2, height: 2)
    private var transformed: [UInt8] = []
    /// The last frame the transform saw failed (so the next failure asks for no keyframe).
    private var transformFailing = false
    private var firstTimestamp: UInt32?
    private var lastTimestamp: UInt32 = 0
    private var extendedTimestamp: Int64 = 0
    private var received: [(frame: ReceivedEncodedFrame, data: [UInt8])] = []
    private var depacketizerRequests: [KeyframeRequestReason] = []
    /// RTP timestamps of frames with packets here that are newer than the last decoded frame: those a later
    /// decoded frame overtakes were dropped.
    private var undecoded: [UInt32] = []
    private var lastDecodedTimestamp: UInt32?
    /// The depacketizer's hole (`RTPDepacketizer.firstMissing`) and since when it is open.
    private var hole: (sequence: Int64, since: Instant)?

    public init(config: VideoReceiveConfig = VideoReceiveConfig(), transform: any FrameTransform = IdentityFrameTransform()) throws {
        self.config = config
        self.transform = transform
        decoder = try VideoCodecs.makeDecoder(config.format, threads: config.decoderThreads)
        depacketizer = Self.makeDepacketizer(config)
        jitterBuffer = VideoJitterBuffer(config: config.jitter)
        rtpStats = RTPReceiveStatistics(clockRate: 90_000)
        keyframePacer = KeyframeRequestPacer(minInterval: .milliseconds(config.keyframeRequestMinIntervalMillis))
    }

    private static func makeDepacketizer(_ c: VideoReceiveConfig) -> any RTPDepacketizer {
        c.format.makeDepacketizer(reorderWindow: c.reorderWindowPackets)
    }

    /// Switches to `format` (the one the connection agreed): its decoder and depacketizer (counters are kept; the
    /// stream starts at a keyframe). Nothing changes when it is the current format; throws for one without a decoder.
    public func setFormat(_ format: any RTPPayloadFormat) throws {
        guard format.name != config.format.name else { return }
        decoder = try VideoCodecs.makeDecoder(format, threads: config.decoderThreads)
        config.format = format
        retire()
    }

    /// True until a keyframe makes the stream decodable (at start, and after a loss it gave up on).
    public var isWaitingForKeyframe: Bool { depacketizer.isWaitingForKeyframe || jitterBuffer.waitingForKeyframe }

    /// The transport gave up repairing these packets (NACK retries used up): when the stream needs one of them, the
    /// frames after it cannot be decoded, so stop waiting and ask for a keyframe now. While a keyframe is awaited, one
    /// left incomplete by the loss is asked for again (what is held stays: the next complete keyframe replaces it).
    public func packetsUnrecoverable(_ sequences: [UInt16], now: Instant) -> [VideoReceiveEvent] {
        var events: [VideoReceiveEvent] = []
        guard ssrc != nil, sequences.contains(where: { depacketizer.needs($0) }) else { return events }
        if depacketizer.isWaitingForKeyframe {
            requestKeyframe(now: now, &events)
        } else {
            giveUp(now: now, &events)
        }
        return events
    }

    /// How long a hole in the stream is waited for: a NACKed packet is asked for until `NACKGenerator.maxAge` after it
    /// went missing, and its retransmission takes a round trip (one more for slack). Past that no repair can come,
    /// whatever the packet rate (counted in packets, the depacketizer's window lasts seconds at a low bitrate).
    public var holeWait: Duration { NACKGenerator.defaultMaxAge + rtt + rtt }

    /// Sets the round-trip time measured by RTCP, which paces keyframe requests and the wait for a hole.
    public func setRoundTripTime(_ rtt: Duration) { self.rtt = rtt }

    /// Handles one received RTP packet at `now`.
    public func receive(_ packet: RTPPacket, now: Instant) -> [VideoReceiveEvent] {
        var events: [VideoReceiveEvent] = []
        if let pt = config.payloadType, packet.payloadType != pt {
            counters.packetsDiscarded += 1
            return events
        }
        if let s = ssrc, s != packet.ssrc {
            restart()
            rtpStats.rebase()
        }
        ssrc = packet.ssrc
        if rtpStats.record(packet, now: now) == .duplicate {
            counters.packetsDiscarded += 1
            return events
        }
        noteFrame(packet.timestamp)
        received.removeAll(keepingCapacity: true)
        depacketizerRequests.removeAll(keepingCapacity: true)
        depacketizer.insert(packet) { event in
            switch event {
            case .frame(var f):
                let data = Array(f.data)  // the depacketizer reuses its buffer: copy, and hold no reference to it
                f.data = []
                received.append((f, data))
            case .keyframeRequest(let reason): depacketizerRequests.append(reason)
            }
        }
        for _ in depacketizerRequests { requestKeyframe(now: now, &events) }
        for (f, data) in received {
            let frame = VideoJitterFrame(firstSequence: UInt16(truncatingIfNeeded: f.firstSequence),
                                         lastSequence: UInt16(truncatingIfNeeded: f.lastSequence), timestamp: f.rtpTimestamp,
                                         isKeyframe: f.isKeyframe, pictureId: f.pictureId, payload: data)
            handle(jitterBuffer.insert(frame, now: now), now: now, &events)
        }
        checkHole(now: now, &events)
        return events
    }

    /// Runs the jitter buffer's timers and the wait for a hole; call at `nextDeadline`.
    public func poll(now: Instant) -> [VideoReceiveEvent] {
        var events: [VideoReceiveEvent] = []
        handle(jitterBuffer.poll(now: now), now: now, &events)
        checkHole(now: now, &events)
        return events
    }

    /// When `poll` should next be called if no packet arrives, or nil when nothing is pending.
    public var nextDeadline: Instant? {
        guard let hole else { return jitterBuffer.nextDeadline }
        let due = hole.since + holeWait
        return jitterBuffer.nextDeadline.map { min($0, due) } ?? due
    }

    /// Forgets held packets and frames and waits for a keyframe, without counting the pause as a freeze
    /// (video disabled and re-enabled, or a new SSRC). Counters are kept.
    public func restart() {
        retire()
        jitterBuffer.reset()
        firstTimestamp = nil
        undecoded.removeAll(keepingCapacity: true)
        lastDecodedTimestamp = nil
    }

    /// The receive counters now.
    public var stats: VideoReceiveStats {
        var s = counters
        s.ssrc = ssrc ?? 0
        s.packetsReceived = rtpStats.packetsReceived
        s.bytesReceived = rtpStats.bytesReceived
        s.headerBytesReceived = rtpStats.headerBytesReceived
        s.packetsLost = rtpStats.packetsLost
        s.jitter = rtpStats.jitterSeconds
        let d = depacketizer.stats, j = jitterBuffer.stats
        s.packetsDiscarded += d.malformedPackets + d.latePackets + d.duplicatePackets + retired.discarded
        s.framesReceived = d.framesDelivered + d.framesDropped + retired.framesDelivered + retired.framesDropped
        s.freezeCount = j.freezeCount
        s.totalFreezesDuration = j.totalFreezeDuration.seconds
        return s
    }

    // MARK: private

    private func noteFrame(_ ts: UInt32) {
        if let last = lastDecodedTimestamp, Int32(bitPattern: ts &- last) <= 0 { return }
        guard !undecoded.contains(ts) else { return }
        if undecoded.count >= 256 { undecoded.removeFirst(); counters.framesDropped += 1 }
        undecoded.append(ts)
    }

    /// The frame with `ts` was decoded (or failed to): undecoded frames before it were dropped.
    private func frameDone(_ ts: UInt32) {
        lastDecodedTimestamp = ts
        var overtaken = 0
        undecoded.removeAll { e in
            guard Int32(bitPattern: e &- ts) <= 0 else { return false }
            if e != ts { overtaken += 1 }
            return true
        }
        counters.framesDropped += overtaken
    }

    private func retire() {
        let d = depacketizer.stats
        retired.discarded += d.malformedPackets + d.latePackets + d.duplicatePackets
        retired.framesDelivered += d.framesDelivered
        retired.framesDropped += d.framesDropped
        depacketizer = Self.makeDepacketizer(config)
        hole = nil
    }

    /// Notes when the depacketizer's hole opened; one open for `holeWait` is given up.
    private func checkHole(now: Instant, _ events: inout [VideoReceiveEvent]) {
        guard let missing = depacketizer.firstMissing else { hole = nil; return }
        guard let h = hole, h.sequence == missing else { hole = (missing, now); return }
        if now - h.since >= holeWait { giveUp(now: now, &events) }
    }

    /// Gives up on the missing packets: drop what depends on them and ask for a keyframe.
    private func giveUp(now: Instant, _ events: inout [VideoReceiveEvent]) {
        retire()
        requestKeyframe(now: now, &events)
    }

    /// A keyframe request, dropped when one went within the pacer's interval (never held: the pipeline is not polled
    /// for it, and the keyframe asked for may be on its way).
    private func requestKeyframe(now: Instant, _ events: inout [VideoReceiveEvent]) {
        guard keyframePacer.request(now: now, rtt: rtt) else { return }
        counters.pliCount += 1
        events.append(.requestKeyframe)
    }

    private func handle(_ jitterEvents: [VideoJitterEvent<[UInt8]>], now: Instant, _ events: inout [VideoReceiveEvent]) {
        for e in jitterEvents {
            switch e {
            case .decode(let f): decode(f, now: now, &events)
            case .requestKeyframe: requestKeyframe(now: now, &events)
            }
        }
    }

    private func decode(_ f: VideoJitterFrame<[UInt8]>, now: Instant, _ events: inout [VideoReceiveEvent]) {
        if firstTimestamp == nil {
            firstTimestamp = f.timestamp
            extendedTimestamp = 0
        } else {
            extendedTimestamp += Int64(Int32(bitPattern: f.timestamp &- lastTimestamp))
        }
        lastTimestamp = f.timestamp
        frameDone(f.timestamp)
        let micros = extendedTimestamp * 100 / 9
        do {
            let produced: Bool
            let decoderInput: [UInt8]
            if transform.isIdentity {
                decoderInput = f.payload
                produced = try decoder.decode(f.payload[...], timestampMicros: micros, into: &picture)
            } else {
                let info = EncodedFrameInfo(kind: .video, ssrc: ssrc ?? 0, rtpTimestamp: f.timestamp, isKeyframe: f.isKeyframe,
                                            format: config.format)
                do {
                    try f.payload.withUnsafeBytes { try transform.transformIncoming($0, info: info, into: &transformed) }
                    transformFailing = false
                } catch {
                    counters.transformErrors += 1
                    // A keyframe helps after one bad frame, not when every frame fails (a wrong E2EE secret):
                    // only the first failure of a run asks for one.
                    dropAfterError(now: now, requestKeyframe: !transformFailing, &events)
                    transformFailing = true
                    return
                }
                produced = try decoder.decode(transformed[...], timestampMicros: micros, into: &picture)
                decoderInput = transformed
            }
            guard produced else { return }
            counters.framesDecoded += 1
            if f.isKeyframe { counters.keyFramesDecoded += 1 }
            counters.frameWidth = picture.width; counters.frameHeight = picture.height
            events.append(.frame(DecodedVideoFrame(frame: picture, rtpTimestamp: f.timestamp, isKeyframe: f.isKeyframe,
                                                   encodedBytes: f.payload.count, encoded: decoderInput)))
        } catch {
            counters.decodeErrors += 1
            dropAfterError(now: now, &events)
        }
    }

    /// A frame could not be decoded: the following delta frames cannot be either.
    private func dropAfterError(now: Instant, requestKeyframe wanted: Bool = true, _ events: inout [VideoReceiveEvent]) {
        counters.framesDropped += 1
        retire()
        if wanted { requestKeyframe(now: now, &events) }
    }
}
