import OTBase
import OTRTP
import OTWire

/// One judgement of a media link over an interval: how much was lost, and the delays measured.
public struct LinkQualitySample: Sendable, Equatable {
    /// Fraction (0…1) of the packets of the interval that stayed lost (after retransmissions repaired what they could).
    public var loss: Double
    /// Fraction (0…1) of the packets on the wire that were lost, repaired or not (nil when not measured): what repair
    /// has to carry.
    public var rawLoss: Double?
    public var roundTripTime: Duration?
    /// Interarrival jitter (RFC 3550 §6.4.1).
    public var jitter: Duration?
    public init(loss: Double, rawLoss: Double? = nil, roundTripTime: Duration? = nil, jitter: Duration? = nil) {
        self.loss = loss; self.rawLoss = rawLoss; self.roundTripTime = roundTripTime; self.jitter = jitter
    }
}

/// Thresholds and hold times of the audio fallback (`QualityFallbackMonitor`). The default hold times are the media
/// router's and the relayed subscriber's alike, for once-a-second samples of a `LinkQualityWindow`: a warning after two
/// poor windows in a row (one unlucky window at 20 % loss does not warn), video dropped after three, back after three
/// good ones (the 100 ms slack absorbs the timer's drift).
public struct QualityFallbackConfig: Sendable, Equatable {
    /// A sample is poor above this loss fraction (loss that stayed after repair), good below half of it.
    public var lossThreshold: Double
    /// A sample is poor when more than this fraction of the packets on the wire is lost, repaired or not: beyond what
    /// repair can carry (retransmissions then cost over a third of the media rate, and are lost as often), and good
    /// below 60 % of it. Loss below it is left to NACK, RTX and FEC, and video stays.
    public var repairableLoss: Double
    /// A sample is poor above this round-trip time, good below 70% of it (nil: RTT is not judged).
    public var rttThreshold: Duration?
    /// A sample is poor above this jitter, good below 70% of it (nil: jitter is not judged).
    public var jitterThreshold: Duration?
    /// Poor conditions this long raise the warning; good conditions this long lift it.
    public var warnAfter: Duration
    /// Poor conditions this long (after the warning) drop video.
    public var disableAfter: Duration
    /// Good conditions this long after video was dropped bring it back.
    public var recoverAfter: Duration

    public init(lossThreshold: Double = 0.15, repairableLoss: Double = 0.25, rttThreshold: Duration? = .milliseconds(1500),
                jitterThreshold: Duration? = .milliseconds(250),
                warnAfter: Duration = .milliseconds(1900), disableAfter: Duration = .milliseconds(2900),
                recoverAfter: Duration = .milliseconds(2900)) {
        self.lossThreshold = lossThreshold; self.repairableLoss = repairableLoss
        self.rttThreshold = rttThreshold; self.jitterThreshold = jitterThreshold
        self.warnAfter = warnAfter; self.disableAfter = max(disableAfter, warnAfter); self.recoverAfter = recoverAfter
    }
}

/// The audio-fallback decision (sans-IO): from link samples and their times, warns after `warnAfter` of poor
/// conditions, drops video after `disableAfter`, lifts a warning after `warnAfter` without a poor sample and brings
/// video back after `recoverAfter` of good conditions. A sample in between poor and good (fair: the hysteresis band)
/// breaks a poor run and a good one, but counts towards lifting a warning: the warning says video is about to go, and
/// only poor samples take it there, so once none came for as long as it took to warn, video is as far from going as it
/// was before (a link at 20 % loss on the wire, fair, that one unlucky streak warned is not left warned for good).
/// Video comes back only on good samples: dropping it again would cost a visible switch and a keyframe.
/// A run starts where the interval of its first sample began (the previous sample's time). Used by the media
/// router for each subscriber of a routed session, and by relayed subscribers for themselves.
public struct QualityFallbackMonitor: Sendable, Equatable {
    public enum Action: Sendable, Equatable { case warn, liftWarning, disableVideo, enableVideo }
    public enum Judgement: Sendable, Equatable { case poor, fair, good }
    /// What the subscriber sees now.
    public enum State: String, Sendable, Equatable { case good, warning, videoDisabled }

    public let config: QualityFallbackConfig
    public private(set) var videoDisabled = false
    public private(set) var warned = false
    /// The last sample given.
    public private(set) var lastSample: LinkQualitySample?
    private var lastSampleAt: Instant?
    private var poorSince: Instant?
    private var goodSince: Instant?
    /// The start of the current run of fair or good samples (for lifting a warning).
    private var notPoorSince: Instant?

    public init(config: QualityFallbackConfig = QualityFallbackConfig()) { self.config = config }

    public var state: State { videoDisabled ? .videoDisabled : warned ? .warning : .good }

    /// How a sample compares with the thresholds.
    public func judge(_ s: LinkQualitySample) -> Judgement {
        let c = config
        let loss = s.loss.isFinite ? s.loss : 1
        let raw = s.rawLoss.map { $0.isFinite ? $0 : 1 }
        let rtt = s.roundTripTime.map(\.seconds), jitter = s.jitter.map(\.seconds)
        let rttLimit = c.rttThreshold.map(\.seconds), jitterLimit = c.jitterThreshold.map(\.seconds)
        if loss > c.lossThreshold { return .poor }
        if let raw, raw > c.repairableLoss { return .poor }
        if let rtt, let rttLimit, rtt > rttLimit { return .poor }
        if let jitter, let jitterLimit, jitter > jitterLimit { return .poor }
        if loss >= c.lossThreshold / 2 { return .fair }
        if let raw, raw >= c.repairableLoss * 0.6 { return .fair }
        if let rtt, let rttLimit, rtt >= rttLimit * 0.7 { return .fair }
        if let jitter, let jitterLimit, jitter >= jitterLimit * 0.7 { return .fair }
        return .good
    }

    /// One sample covering the time since the previous one; returns what to do.
    public mutating func observe(_ sample: LinkQualitySample, now: Instant) -> Action? {
        let start = lastSampleAt.map { min($0, now) } ?? now
        lastSampleAt = now
        lastSample = sample
        let judgement = judge(sample)
        switch judgement {
        case .poor:
            goodSince = nil
            notPoorSince = nil
            let since = poorSince ?? start
            poorSince = since
            guard !videoDisabled else { return nil }
            let d = now - since
            if !warned {
                if d >= config.warnAfter { warned = true; return .warn }
            } else if d >= config.disableAfter {
                videoDisabled = true; warned = false
                return .disableVideo
            }
        case .good, .fair:
            poorSince = nil
            let notPoor = notPoorSince ?? start
            notPoorSince = notPoor
            goodSince = judgement == .good ? goodSince ?? start : nil
            if videoDisabled {
                if let good = goodSince, now - good >= config.recoverAfter { videoDisabled = false; return .enableVideo }
            } else if warned && now - notPoor >= config.warnAfter {
                warned = false
                return .liftWarning
            }
        }
        return nil
    }
}

/// Collects what a sender learns about one receiver's downlink between two samples: the receiver's RTCP receiver
/// report blocks (loss that stayed after retransmissions, and jitter), its transport-wide feedback (every packet on the
/// wire, retransmissions included: the loss repair has to carry) and the RTT.
public struct LinkQualitySampler: Sendable, Equatable {
    private var reportedLost = 0.0
    private var reportedExpected = 0.0
    private var wire = TransportFeedbackLoss()
    private var window: LinkQualityWindow
    private var jitterSeconds: Double?
    /// Highest extended sequence per SSRC from the previous report, to size each report's interval.
    private var highest: [UInt32: UInt32] = [:]
    /// The latest round-trip time (kept across samples).
    public var roundTripTime: Duration?

    /// Each sample covers the last `windowIntervals` calls of `sample()` (`LinkQualityWindow`).
    public init(windowIntervals: Int = LinkQualityWindow.defaultIntervals) {
        window = LinkQualityWindow(intervals: windowIntervals)
    }

    /// A receiver report block about one of the SSRCs sent; `clockRate` converts its jitter.
    public mutating func report(_ b: RTCPReportBlock, clockRate: Int) {
        let prev = highest[b.ssrc]
        highest[b.ssrc] = b.extendedHighestSequence
        if let prev {
            let expected = Double(Int32(bitPattern: b.extendedHighestSequence &- prev))
            if expected > 0 {
                reportedExpected += expected
                reportedLost += expected * Double(b.fractionLost) / 256
            }
        }
        let j = Double(b.jitter) / Double(max(1, clockRate))
        jitterSeconds = max(jitterSeconds ?? 0, j)
    }

    /// Transport-wide feedback from the receiver: each packet it covers for the first time counts as received or lost.
    public mutating func transportFeedback(_ fb: TransportCCFeedback) { wire.add(fb) }

    /// Forgets what a report said about an SSRC no longer sent (so a later resume does not count the pause).
    public mutating func forget(ssrc: UInt32) { highest[ssrc] = nil }

    /// Closes the interval since the previous call and returns the sample of the window that ends with it (nil when
    /// nothing was reported in this interval, or the window is not full yet); jitter is this interval's.
    public mutating func sample() -> LinkQualitySample? {
        defer { reportedLost = 0; reportedExpected = 0; jitterSeconds = nil }
        let w = wire.takeCounts()
        let loss = window.add(LinkQualityWindow.Counts(lost: reportedLost, expected: reportedExpected,
                                                       wireLost: Double(w.lost), wireTotal: Double(w.received + w.lost)))
        guard reportedExpected > 0 || w.received + w.lost > 0, let loss else { return nil }
        return LinkQualitySample(loss: loss.loss, rawLoss: loss.rawLoss, roundTripTime: roundTripTime,
                                 jitter: jitterSeconds.map { .microseconds(Int64($0 * 1_000_000)) })
    }
}

/// The loss of a link over its last few intervals, each weighted by its packet count, so one lucky or unlucky
/// interval does not decide alone: at 30 % loss on the wire a one-second sample of ~150 packets reads below the
/// 25 % `repairableLoss` about one second in ten (binomial spread ≈ 3.7 points), which would restart the
/// monitor's poor run; over 5 s (≈750 packets, spread ≈ 1.7 points at 30 %, 1.5 at 20 %) that becomes rare, and
/// 20 % reads above 25 % in about one window in 2 400 (binomial, 150 packets a second; a 3 s window: one in 200;
/// two poor windows in a row warn). Judges only a full window (the first `intervals − 1` intervals give nothing). Sans-IO; a fixed ring, no
/// allocation after `init`.
public struct LinkQualityWindow: Sendable, Equatable {
    /// The packet counts of one interval: lost after repair of those expected (receiver reports: fractions of
    /// packets, hence `Double`), and lost on the wire of those sent (transport-wide feedback).
    public struct Counts: Sendable, Equatable {
        public var lost, expected, wireLost, wireTotal: Double
        public init(lost: Double, expected: Double, wireLost: Double, wireTotal: Double) {
            self.lost = lost; self.expected = expected; self.wireLost = wireLost; self.wireTotal = wireTotal
        }
    }
    /// The window of the media router and of relayed subscribers: 5 intervals of 1 s.
    public static let defaultIntervals = 5

    private var ring: [Counts]
    private var next = 0, filled = 0

    /// `intervals` is clamped to 1…60.
    public init(intervals: Int) {
        ring = Array(repeating: Counts(lost: 0, expected: 0, wireLost: 0, wireTotal: 0), count: min(max(intervals, 1), 60))
    }

    /// Adds an interval (replacing the oldest) and returns the window's loss: `loss` after repair (0 when nothing
    /// was expected) and `rawLoss` on the wire (nil when nothing was sent); nil while the window is not full or
    /// holds no packet at all.
    public mutating func add(_ c: Counts) -> (loss: Double, rawLoss: Double?)? {
        ring[next] = c
        next = (next + 1) % ring.count
        filled = min(filled + 1, ring.count)
        guard filled == ring.count else { return nil }
        var sum = Counts(lost: 0, expected: 0, wireLost: 0, wireTotal: 0)
        for i in ring {
            sum.lost += i.lost; sum.expected += i.expected; sum.wireLost += i.wireLost; sum.wireTotal += i.wireTotal
        }
        guard sum.expected > 0 || sum.wireTotal > 0 else { return nil }
        return (sum.expected > 0 ? sum.lost / sum.expected : 0, sum.wireTotal > 0 ? sum.wireLost / sum.wireTotal : nil)
    }
}

/// The loss on the wire a receiver's transport-wide feedback shows: each packet it covers counts once, as received or
/// lost (a later feedback may cover it again after a late arrival), until `take()`.
public struct TransportFeedbackLoss: Sendable, Equatable {
    private var unwrapper = SequenceUnwrapper()
    private var highest: Int64?
    public private(set) var received = 0, lost = 0

    public init() {}

    public mutating func add(_ fb: TransportCCFeedback) {
        for (i, d) in fb.deltas.enumerated() {
            let ext = unwrapper.unwrap(fb.baseSequence &+ UInt16(truncatingIfNeeded: i))
            if let h = highest, ext <= h { continue }
            highest = ext
            if d == nil { lost += 1 } else { received += 1 }
        }
    }

    /// The lost share since the last call (nil when no packet was covered), and a new count.
    public mutating func take() -> Double? {
        let c = takeCounts()
        return c.received + c.lost > 0 ? Double(c.lost) / Double(c.received + c.lost) : nil
    }

    /// The packets covered since the last call, and a new count.
    public mutating func takeCounts() -> (received: Int, lost: Int) {
        defer { received = 0; lost = 0 }
        return (received, lost)
    }
}
