import OTBase
import OTRTP

// MARK: - Audio

/// Settings of the audio jitter buffer.
public struct AudioJitterConfig: Sendable, Equatable {
    /// RTP clock rate of the stream (48 000 for Opus).
    public var clockRate: Int
    /// Bounds of the adaptive target delay, in milliseconds.
    public var minDelayMillis: Int
    public var maxDelayMillis: Int
    /// Packets held at most; the oldest is dropped beyond this.
    public var capacity: Int
    /// Arrivals remembered for the delay estimate.
    public var historyPackets: Int
    /// The share of packets that should arrive in time (NetEq: 0.95).
    public var percentile: Double

    public init(clockRate: Int = 48_000, minDelayMillis: Int = 20, maxDelayMillis: Int = 500, capacity: Int = 100,
                historyPackets: Int = 250, percentile: Double = 0.95) {
        self.clockRate = clockRate; self.minDelayMillis = minDelayMillis; self.maxDelayMillis = maxDelayMillis
        self.capacity = capacity; self.historyPackets = historyPackets; self.percentile = percentile
    }
}

/// One received audio packet.
public struct AudioJitterPacket<Payload> {
    public var sequence: UInt16
    public var timestamp: UInt32
    /// Samples per channel the packet decodes to, in RTP clock units (960 for 20 ms of Opus).
    public var duration: Int
    public var payload: Payload
    public init(sequence: UInt16, timestamp: UInt32, duration: Int, payload: Payload) {
        self.sequence = sequence; self.timestamp = timestamp; self.duration = duration; self.payload = payload
    }
}
extension AudioJitterPacket: Sendable where Payload: Sendable {}

/// What became of an inserted packet.
public enum AudioJitterInsertResult: Sendable, Equatable {
    case accepted
    /// Already held or already played.
    case duplicate
    /// Arrived after its playout time had passed (it was concealed); discarded.
    case late
    /// Rejected: its duration is not within 1 sample … 1 second.
    case invalid
}

/// Why the caller must conceal (decoder PLC, or silence) instead of decoding a packet.
public enum AudioConcealReason: Sendable, Equatable {
    /// Filling up to the target delay before playout starts (or restarts after the stream moved).
    case buffering
    /// The packet due now is missing while later ones are here: it is lost (or late).
    case lost
    /// Nothing is held: the packet due now has not arrived.
    case underrun
    /// The buffer holds less than the target delay: one extra frame is concealed to add delay.
    case stretch
}

/// The answer to one playout pull.
public enum AudioJitterOutput<Payload> {
    /// Decode this packet next.
    case packet(AudioJitterPacket<Payload>)
    /// Conceal `duration` samples per channel (RTP clock units).
    case conceal(duration: Int, reason: AudioConcealReason)
}
extension AudioJitterOutput: Sendable where Payload: Sendable {}

/// Counters of the audio jitter buffer.
public struct AudioJitterStats: Sendable, Equatable {
    public var received = 0
    public var duplicates = 0
    /// Arrived after their playout time (they were concealed) and were discarded.
    public var late = 0
    /// Dropped because the buffer was full.
    public var overflowDropped = 0
    /// Dropped on purpose to bring the delay down to the target.
    public var accelerated = 0
    /// Frames concealed on purpose to raise the delay to the target.
    public var stretched = 0
    public var played = 0
    public var concealedLost = 0
    public var concealedUnderrun = 0
    /// Samples per channel concealed after playout began, for any reason.
    public var concealedSamples = 0
    /// Playout restarts: after a run of late packets (the path got slower) or a timestamp jump of over 10 s.
    public var resyncs = 0
    /// Current adaptive target delay and RFC 3550 interarrival jitter, in milliseconds.
    public var targetDelayMillis = 0
    public var jitterMillis = 0.0
    public init() {}
}

/// An adaptive audio jitter buffer (sans-IO: every call takes the current `Instant`).
///
/// Packets are kept in timestamp order. The target delay follows the `percentile` (95th) of the
/// packets' relative arrival delay over the recent history, plus one packet, as NetEq does.
/// Playout starts once the buffered audio spans the target; each `pull` then hands out the packet
/// due next, or tells the caller to conceal one that is lost or not here yet (the playout clock
/// keeps running, so a packet arriving after its turn is discarded as late). A smoothed buffer
/// level steers the delay toward the target: a frame is dropped when it stays well above, an
/// extra frame concealed when it stays below. A run of late packets with nothing held means the
/// path got slower: playout restarts at the new target.
public struct AudioJitterBuffer<Payload> {
    public let config: AudioJitterConfig
    public private(set) var stats = AudioJitterStats()

    private var packets: [(ts: Int64, seq: Int64, packet: AudioJitterPacket<Payload>)] = []
    private var seqUnwrapper = CounterUnwrapper(bits: 16)
    private var tsUnwrapper = CounterUnwrapper(bits: 32)
    /// Timestamp of the packet due next; nil until playout starts.
    private var nextTimestamp: Int64?
    private var everPlayed = false
    private var lastDuration: Int
    /// Relative arrival delays (µs), a ring of the last `historyPackets`.
    private var delays: [Int64] = []
    private var delayIndex = 0
    private var sortedScratch: [Int64] = []
    private var lastTransit: Int64?
    private var jitterMicros = 0.0
    private var targetMicros: Int64
    private var filteredLevel: Int64 = 0
    private var pullsSinceAdjust = 0
    private var consecutiveLate = 0
    /// The highest sequence number seen, and when a gap in the numbering was last seen.
    private var highestSeq: Int64?
    private var lastLossAt: Instant?
    /// Extra delay kept while packets are being lost (a gap in the numbering within the last 10 s, and the first 10 s of
    /// a stream, before the path has shown what it does), so a retransmission
    /// asked for by NACK can still arrive before its turn. The caller sets it from the path: one packet interval to
    /// notice the gap, and a repair round trip or two. With an allowance set, packets that arrive out of order
    /// (retransmissions; reordering, which shows as a gap first) do not feed the arrival-delay estimate: the allowance
    /// covers them instead of the delay's tail, which repairs would otherwise stretch for seconds.
    public var repairAllowance: Duration = .zero
    static var lossMemory: Duration { .seconds(10) }

    /// The config's clock rate, delays, capacity and history are raised to sane minimums.
    public init(config: AudioJitterConfig = AudioJitterConfig()) {
        var config = config
        config.clockRate = max(config.clockRate, 1000)
        config.minDelayMillis = max(config.minDelayMillis, 0)
        config.maxDelayMillis = max(config.maxDelayMillis, config.minDelayMillis)
        config.capacity = max(config.capacity, 2)
        config.historyPackets = max(config.historyPackets, 1)
        config.percentile = min(max(config.percentile, 0), 1)
        self.config = config
        lastDuration = config.clockRate / 50
        targetMicros = Int64(config.minDelayMillis) * 1000
        stats.targetDelayMillis = config.minDelayMillis
    }

    /// Current adaptive target delay.
    public var targetDelay: Duration { .microseconds(targetMicros) }
    /// Audio held, from the next due timestamp to the end of the last held packet.
    public var bufferedDuration: Duration { .microseconds(micros(ticks: spanTicks())) }
    /// Packets held.
    public var count: Int { packets.count }

    /// Adds a packet that arrived at `now`.
    @discardableResult
    public mutating func insert(_ packet: AudioJitterPacket<Payload>, now: Instant) -> AudioJitterInsertResult {
        guard packet.duration > 0, packet.duration <= config.clockRate else { return .invalid }
        var ts = tsUnwrapper.unwrap(packet.timestamp)
        var seq = seqUnwrapper.unwrap(UInt32(packet.sequence))
        if let next = nextTimestamp, abs(ts - next) > Int64(config.clockRate) * 10 {
            resync(clearHistory: true)
            ts = tsUnwrapper.unwrap(packet.timestamp)
            seq = seqUnwrapper.unwrap(UInt32(packet.sequence))
        }
        let inOrder = highestSeq.map { seq > $0 } ?? true
        // The allowance holds from the first packet until the path has shown no loss for a while.
        if highestSeq == nil || highestSeq.map({ seq > $0 + 1 }) == true { lastLossAt = now }
        if inOrder { highestSeq = seq }
        noteArrival(ts: ts, now: now, inOrder: inOrder)
        if let next = nextTimestamp, ts < next {
            consecutiveLate += 1
            // Three late in a row and nothing held: the path got slower; restart at the new target.
            guard consecutiveLate >= 3, packets.isEmpty else {
                stats.late += 1
                return .late
            }
            resync(clearHistory: false)
        }
        consecutiveLate = 0
        // Binary search for the insertion point by timestamp.
        var lo = 0, hi = packets.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if packets[mid].ts < ts { lo = mid + 1 } else { hi = mid }
        }
        if lo < packets.count && (packets[lo].ts == ts || packets[lo].seq == seq) {
            stats.duplicates += 1
            return .duplicate
        }
        packets.insert((ts, seq, packet), at: lo)
        stats.received += 1
        if packets.count > config.capacity {
            let dropped = packets.removeFirst()
            stats.overflowDropped += 1
            if let next = nextTimestamp { nextTimestamp = max(next, dropped.ts + Int64(dropped.packet.duration)) }
        }
        return .accepted
    }

    /// Takes what to play next; call it once per playout frame at `now`.
    public mutating func pull(now: Instant) -> AudioJitterOutput<Payload> {
        guard let next = nextTimestamp else {
            guard let first = packets.first, micros(ticks: spanTicks(from: first.ts)) >= targetMicros else {
                return conceal(lastDuration, .buffering)
            }
            nextTimestamp = first.ts
            filteredLevel = micros(ticks: spanTicks(from: first.ts))
            pullsSinceAdjust = 0
            return pull(now: now)
        }
        let durationMicros = micros(ticks: Int64(lastDuration))
        filteredLevel += (micros(ticks: spanTicks()) - filteredLevel) / 8
        pullsSinceAdjust += 1
        guard let head = packets.first else {
            nextTimestamp = next + Int64(lastDuration)
            return conceal(lastDuration, .underrun)
        }
        if head.ts > next {
            let gap = Int(min(head.ts - next, Int64(lastDuration)))
            nextTimestamp = next + Int64(gap)
            return conceal(gap, .lost)
        }
        // Steer the delay, at most once per 10 pulls.
        if pullsSinceAdjust >= 10 {
            if filteredLevel + durationMicros < targetMicros {
                pullsSinceAdjust = 0
                filteredLevel += durationMicros
                stats.stretched += 1
                return conceal(lastDuration, .stretch)
            }
            let margin = max(2 * durationMicros, targetMicros / 2)
            if filteredLevel > targetMicros + margin, packets.count >= 2,
               packets[1].ts == head.ts + Int64(head.packet.duration) {
                pullsSinceAdjust = 0
                filteredLevel -= durationMicros
                stats.accelerated += 1
                packets.removeFirst()
            }
        }
        let entry = packets.removeFirst()
        nextTimestamp = entry.ts + Int64(entry.packet.duration)
        lastDuration = entry.packet.duration
        everPlayed = true
        stats.played += 1
        return .packet(entry.packet)
    }

    /// Forgets every packet and the playout position, for example when the stream's SSRC changes;
    /// counters are kept.
    public mutating func restart() { resync(clearHistory: true) }

    private mutating func resync(clearHistory: Bool) {
        stats.resyncs += 1
        nextTimestamp = nil
        consecutiveLate = 0
        guard clearHistory else { return }
        packets.removeAll(keepingCapacity: true)
        seqUnwrapper.reset()
        tsUnwrapper.reset()
        lastTransit = nil
        delays.removeAll(keepingCapacity: true)
        delayIndex = 0
        highestSeq = nil
        lastLossAt = nil
    }

    private mutating func conceal(_ duration: Int, _ reason: AudioConcealReason) -> AudioJitterOutput<Payload> {
        switch reason {
        case .lost: stats.concealedLost += 1
        case .underrun: stats.concealedUnderrun += 1
        case .buffering, .stretch: break
        }
        if everPlayed { stats.concealedSamples += duration }
        return .conceal(duration: duration, reason: reason)
    }

    private func spanTicks(from start: Int64? = nil) -> Int64 {
        guard let last = packets.last, let begin = start ?? nextTimestamp ?? packets.first?.ts else { return 0 }
        return max(0, last.ts + Int64(last.packet.duration) - begin)
    }

    private func micros(ticks: Int64) -> Int64 { ticks * 1_000_000 / Int64(config.clockRate) }

    private mutating func noteArrival(ts: Int64, now: Instant, inOrder: Bool) {
        let transit = now.micros - micros(ticks: ts)
        if let last = lastTransit {
            jitterMicros += (Double(abs(transit - last)) - jitterMicros) / 16
            stats.jitterMillis = jitterMicros / 1000
        }
        lastTransit = transit
        if inOrder || repairAllowance == .zero {
            if delays.count < config.historyPackets { delays.append(transit) } else {
                delays[delayIndex] = transit
                delayIndex = (delayIndex + 1) % config.historyPackets
            }
        }
        sortedScratch.removeAll(keepingCapacity: true)
        sortedScratch.append(contentsOf: delays)
        sortedScratch.sort()
        guard let minimum = sortedScratch.first else { return }
        let rank = min(sortedScratch.count - 1, Int((Double(sortedScratch.count - 1) * config.percentile).rounded(.up)))
        var wanted = sortedScratch[rank] - minimum + micros(ticks: Int64(lastDuration))
        if let lost = lastLossAt, now - lost < Self.lossMemory { wanted += repairAllowance.microseconds }
        targetMicros = min(max(wanted, Int64(config.minDelayMillis) * 1000), Int64(config.maxDelayMillis) * 1000)
        stats.targetDelayMillis = Int(targetMicros / 1000)
    }
}
extension AudioJitterBuffer: Sendable where Payload: Sendable {}

// MARK: - Video

/// Settings of the video frame buffer.
public struct VideoJitterConfig: Sendable, Equatable {
    /// How long a gap may wait for its missing frame (retransmission) before it counts as loss.
    public var maxWaitMillis: Int
    /// While waiting for a keyframe, how often to ask again.
    public var keyframeRequestIntervalMillis: Int
    /// A gap between delivered frames longer than this is a freeze (500 ms).
    public var freezeThresholdMillis: Int
    /// Frames held at most.
    public var capacity: Int

    public init(maxWaitMillis: Int = 150, keyframeRequestIntervalMillis: Int = 500, freezeThresholdMillis: Int = 500,
                capacity: Int = 120) {
        self.maxWaitMillis = maxWaitMillis; self.keyframeRequestIntervalMillis = keyframeRequestIntervalMillis
        self.freezeThresholdMillis = freezeThresholdMillis; self.capacity = capacity
    }
}

/// One complete encoded frame, as the depacketizer assembled it.
public struct VideoJitterFrame<Payload> {
    /// RTP sequence numbers of the frame's first and last packets.
    public var firstSequence: UInt16
    public var lastSequence: UInt16
    public var timestamp: UInt32
    public var isKeyframe: Bool
    /// The VP8 picture ID (15 bits) when the payload carries one; preferred over sequence numbers
    /// for telling whether a frame follows the previous one.
    public var pictureId: UInt16?
    public var payload: Payload

    public init(firstSequence: UInt16, lastSequence: UInt16, timestamp: UInt32, isKeyframe: Bool,
                pictureId: UInt16? = nil, payload: Payload) {
        self.firstSequence = firstSequence; self.lastSequence = lastSequence; self.timestamp = timestamp
        self.isKeyframe = isKeyframe; self.pictureId = pictureId; self.payload = payload
    }
}
extension VideoJitterFrame: Sendable where Payload: Sendable {}

/// What the video buffer asks of its caller.
public enum VideoJitterEvent<Payload> {
    /// Decode this frame now (frames come in order, each decodable after the previous one).
    case decode(VideoJitterFrame<Payload>)
    /// Frames were lost beyond repair: send a PLI (picture loss indication).
    case requestKeyframe
}
extension VideoJitterEvent: Sendable where Payload: Sendable {}

/// Counters of the video frame buffer.
public struct VideoJitterStats: Sendable, Equatable {
    public var framesReceived = 0
    public var framesDelivered = 0
    public var keyframesDelivered = 0
    /// Frames dropped because they could not be decoded (a reference was lost) or came too late.
    public var framesDropped = 0
    public var duplicates = 0
    /// Gaps given up on after `maxWaitMillis`.
    public var lossEvents = 0
    public var keyframeRequests = 0
    /// Gaps between delivered frames longer than the freeze threshold, and their total length.
    public var freezeCount = 0
    public var totalFreezeDuration: Duration = .zero
    public init() {}
}

/// Orders complete video frames and hands them out when decodable (sans-IO).
///
/// A frame is decodable when it is a keyframe or directly follows the last delivered frame (by
/// VP8 picture ID, else by RTP sequence number). When a frame is missing, later frames wait up to
/// `maxWaitMillis` for it (NACK may still repair it); then the buffer gives up, drops what depends
/// on the missing frame, and asks for a keyframe, repeating the request while none arrives.
/// Delivery gaps over the freeze threshold are counted as freezes.
public struct VideoJitterBuffer<Payload> {
    public let config: VideoJitterConfig
    public private(set) var stats = VideoJitterStats()

    private var pending: [(seq: Int64, lastSeq: Int64, frame: VideoJitterFrame<Payload>)] = []
    private var unwrapper = CounterUnwrapper(bits: 16)
    private var lastSeq: Int64?
    private var lastPictureId: UInt16?
    private var needKeyframe = true
    private var gapSince: Instant?
    private var lastKeyframeRequest: Instant?
    private var lastDelivery: Instant?

    public init(config: VideoJitterConfig = VideoJitterConfig()) { self.config = config }

    /// Frames held.
    public var count: Int { pending.count }
    /// True until a keyframe restores decodability (at start and after a loss).
    public var waitingForKeyframe: Bool { needKeyframe }

    /// Adds a complete frame that arrived at `now`, and returns what is ready.
    public mutating func insert(_ frame: VideoJitterFrame<Payload>, now: Instant) -> [VideoJitterEvent<Payload>] {
        let first = unwrapper.unwrap(UInt32(frame.firstSequence))
        let span = Int64((Int(frame.lastSequence) - Int(frame.firstSequence) + 65_536) % 65_536)
        let last = first + span
        stats.framesReceived += 1
        if let lastSeq, last <= lastSeq {
            stats.framesDropped += 1  // older than what was already delivered
            return poll(now: now)
        }
        var lo = 0, hi = pending.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if pending[mid].seq < first { lo = mid + 1 } else { hi = mid }
        }
        if lo < pending.count && pending[lo].seq == first {
            stats.duplicates += 1
            return poll(now: now)
        }
        pending.insert((first, last, frame), at: lo)
        if pending.count > config.capacity {
            pending.removeFirst()
            stats.framesDropped += 1
            needKeyframe = true
        }
        return poll(now: now)
    }

    /// Returns what is ready at `now`; call it at `nextDeadline`, too.
    public mutating func poll(now: Instant) -> [VideoJitterEvent<Payload>] {
        var events: [VideoJitterEvent<Payload>] = []
        while true {
            if needKeyframe {
                if let k = pending.firstIndex(where: { $0.frame.isKeyframe }) {
                    stats.framesDropped += k
                    pending.removeFirst(k)
                    deliver(now: now, into: &events)
                    continue
                }
                if keyframeRequestDue(now: now) { requestKeyframe(now: now, into: &events) }
                break
            }
            guard let head = pending.first else { break }
            if head.frame.isKeyframe || follows(head) {
                deliver(now: now, into: &events)
                continue
            }
            // A frame is missing before `head`.
            let since = gapSince ?? now
            gapSince = since
            if now - since >= .milliseconds(config.maxWaitMillis) {
                stats.lossEvents += 1
                needKeyframe = true
                lastKeyframeRequest = nil  // ask at once
                continue
            }
            break
        }
        return events
    }

    /// When `poll` should be called next if nothing arrives, or nil when no timer is needed.
    public var nextDeadline: Instant? {
        if needKeyframe {
            if let last = lastKeyframeRequest { return last + .milliseconds(config.keyframeRequestIntervalMillis) }
            guard lastSeq == nil, let since = gapSince else { return nil }
            return since + .milliseconds(config.maxWaitMillis)
        }
        guard let since = gapSince, !pending.isEmpty else { return nil }
        return since + .milliseconds(config.maxWaitMillis)
    }

    /// While waiting for a keyframe: at start, ask once frames have waited `maxWaitMillis` without
    /// one (it may just be late); after a loss, ask at once; then repeat every request interval.
    private mutating func keyframeRequestDue(now: Instant) -> Bool {
        if let last = lastKeyframeRequest { return now - last >= .milliseconds(config.keyframeRequestIntervalMillis) }
        guard lastSeq == nil else { return true }
        guard !pending.isEmpty else { return false }
        let since = gapSince ?? now
        gapSince = since
        return now - since >= .milliseconds(config.maxWaitMillis)
    }

    /// Forgets all frames and waits for a keyframe, without counting the pause as a freeze
    /// (for video disabled by the publisher or the subscriber, or an SSRC change).
    public mutating func reset() {
        pending.removeAll(keepingCapacity: true)
        unwrapper.reset()
        lastSeq = nil; lastPictureId = nil
        needKeyframe = true
        gapSince = nil; lastKeyframeRequest = nil; lastDelivery = nil
    }

    private func follows(_ entry: (seq: Int64, lastSeq: Int64, frame: VideoJitterFrame<Payload>)) -> Bool {
        if let p = entry.frame.pictureId, let lp = lastPictureId {
            return p & 0x7FFF == (lp &+ 1) & 0x7FFF
        }
        guard let lastSeq else { return false }
        return entry.seq == lastSeq + 1
    }

    private mutating func deliver(now: Instant, into events: inout [VideoJitterEvent<Payload>]) {
        let entry = pending.removeFirst()
        lastSeq = entry.lastSeq
        lastPictureId = entry.frame.pictureId
        gapSince = nil
        if entry.frame.isKeyframe {
            needKeyframe = false
            stats.keyframesDelivered += 1
        }
        if let prev = lastDelivery {
            let gap = now - prev
            if gap > .milliseconds(config.freezeThresholdMillis) {
                stats.freezeCount += 1
                stats.totalFreezeDuration += gap
            }
        }
        lastDelivery = now
        stats.framesDelivered += 1
        events.append(.decode(entry.frame))
    }

    private mutating func requestKeyframe(now: Instant, into events: inout [VideoJitterEvent<Payload>]) {
        lastKeyframeRequest = now
        stats.keyframeRequests += 1
        events.append(.requestKeyframe)
    }
}
extension VideoJitterBuffer: Sendable where Payload: Sendable {}
