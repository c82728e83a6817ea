import OTBase
import OTWire

/// Settings of a `SendSideBandwidthEstimator`.
public struct BandwidthEstimatorConfig: Sendable, Equatable {
    public var startBitrateBps: Int
    public var minBitrateBps: Int
    public var maxBitrateBps: Int
    /// Run the delay-based part; false leaves only the loss-based rule (the pre-GCC behaviour, for comparison).
    public var delayBased = true
    /// Loss is evaluated over windows of at least this long and `lossWindowPackets` packets.
    public var lossWindow: Duration = .seconds(1)
    public var lossWindowPackets = 20
    /// Sent packets remembered for matching feedback.
    public var historyCapacity = 8192

    public init(startBitrateBps: Int, minBitrateBps: Int, maxBitrateBps: Int) {
        self.startBitrateBps = startBitrateBps; self.minBitrateBps = minBitrateBps; self.maxBitrateBps = maxBitrateBps
    }
}

/// What the estimator currently says (W3C-like names where the stats have one).
public struct BandwidthEstimate: Sendable, Equatable {
    /// The target: min(delay-based, loss-based), bits per second (`availableOutgoingBitrate`).
    public var targetBitrateBps: Int
    public var delayBasedBitrateBps: Int
    public var lossBasedBitrateBps: Int
    /// Throughput the receiver acknowledged over the last 500 ms, when known.
    public var acknowledgedBitrateBps: Int?
    public var usage: BandwidthUsage
    /// Loss fraction (0…1) of the last complete loss window.
    public var fractionLost: Double
    /// The detector's current trend (delay slope) and adaptive threshold, for stats and tuning.
    public var trend: Double
    public var threshold: Double
}

/// Send-side bandwidth estimation after Google Congestion Control (draft-ietf-rmcat-gcc-02, and libwebrtc's
/// send-side BWE as published), sans-IO:
///
/// packets sent (transport-wide sequence number, size, time) → `TransportFeedbackAdapter` (ring of send times) →
/// feedback (`TransportCCFeedback`) → acknowledged packets by arrival → `InterArrivalGrouper` (5 ms bursts) →
/// `TrendlineDetector` (regression of accumulated delay, adaptive threshold) → `AIMDRateControl`;
/// packets reported lost → `LossBasedBitrate` once per loss window. The target is the minimum of the two; the
/// loss-based state is held at or under the delay-based one so a loss cut starts from what is sent.
///
/// Steady operation allocates nothing per packet (fixed rings, reused buffers). Not thread-safe.
public struct SendSideBandwidthEstimator: Sendable {
    public let config: BandwidthEstimatorConfig
    private var adapter: TransportFeedbackAdapter
    private var acked = AcknowledgedRate()
    private var grouper = InterArrivalGrouper()
    private var detector = TrendlineDetector()
    private var aimd: AIMDRateControl
    private var loss: LossBasedBitrate
    private var lossWindowStart: Instant?
    private var lossWindowLost = 0
    private var lossWindowReported = 0
    private var lastFractionLost = 0.0
    private var rttMicros: Int64 = 100_000
    private var rttFromReports = false
    /// Feedback messages handled.
    public private(set) var feedbackCount = 0

    public init(config: BandwidthEstimatorConfig) {
        self.config = config
        adapter = TransportFeedbackAdapter(capacity: config.historyCapacity)
        let lo = max(1, config.minBitrateBps), hi = max(lo, config.maxBitrateBps)
        aimd = AIMDRateControl(startBps: Double(config.startBitrateBps), minBps: Double(lo), maxBps: Double(hi))
        loss = LossBasedBitrate(minKbps: lo / 1000, startKbps: config.startBitrateBps / 1000, maxKbps: hi / 1000)
    }

    /// Records a packet handed to the network with transport-wide sequence number `sequence` (`size`: bytes on
    /// the wire, or the RTP size; only consistency matters).
    public mutating func packetSent(sequence: UInt16, size: Int, at now: Instant) {
        adapter.sent(sequence: sequence, size: size, at: now)
    }

    /// A round-trip time from RTCP reports (otherwise the estimator uses what feedback shows).
    public mutating func updateRoundTripTime(_ rtt: Duration) {
        rttMicros = max(rtt.microseconds, 1000)
        rttFromReports = true
    }

    /// Handles transport-wide feedback received at `now`; returns the new estimate.
    @discardableResult
    public mutating func handleFeedback(_ fb: TransportCCFeedback, now: Instant) -> BandwidthEstimate {
        adapter.process(fb)
        guard adapter.reported > 0 || !adapter.acked.isEmpty else { return estimate }
        feedbackCount += 1
        if !rttFromReports, let newest = adapter.acked.max(by: { $0.sendMicros < $1.sendMicros }) {
            // Feedback RTT (includes the receiver's feedback interval): smoothed.
            let sample = max(now.micros - newest.sendMicros, 1000)
            rttMicros = (7 * rttMicros + sample) / 8
        }
        for p in adapter.acked {
            acked.add(arrivalMicros: p.arrivalMicros, size: p.size)
            if config.delayBased, let d = grouper.add(send: p.sendMicros, arrival: p.arrivalMicros) {
                detector.update(arrivalDeltaMillis: Double(d.arrivalDelta) / 1000, sendDeltaMillis: Double(d.sendDelta) / 1000,
                                arrivalMillis: Double(d.lastArrival) / 1000)
            }
        }
        let ackedBps = acked.bitsPerSecond
        if config.delayBased {
            let usage = detector.usage
            // Over-use right after a cut waits a response time (the queue needs that long to show the cut).
            let wait = usage == .overusing && ackedBps.map { !aimd.timeToReduceFurther(now: now.micros, ackedBps: $0, rttMicros: rttMicros) } == true
            if !wait { aimd.update(usage, ackedBps: ackedBps, rttMicros: rttMicros, now: now.micros) }
        }
        lossWindowLost += adapter.lost
        lossWindowReported += adapter.reported
        let start = lossWindowStart ?? now
        lossWindowStart = start
        if now - start >= config.lossWindow && lossWindowReported >= config.lossWindowPackets {
            lastFractionLost = min(max(Double(lossWindowLost) / Double(lossWindowReported), 0), 1)
            loss.report(fractionLost: lastFractionLost)
            lossWindowStart = now
            lossWindowLost = 0
            lossWindowReported = 0
        }
        if config.delayBased { loss.cap(atMostKbps: Int(aimd.bitrateBps) / 1000) }
        return estimate
    }

    /// The target bit rate: min(delay-based, loss-based).
    public var targetBitrateBps: Int { estimate.targetBitrateBps }

    public var estimate: BandwidthEstimate {
        let delay = Int(aimd.bitrateBps)
        let lossBps = loss.targetKbps * 1000
        return BandwidthEstimate(targetBitrateBps: config.delayBased ? min(delay, lossBps) : lossBps,
                                 delayBasedBitrateBps: delay, lossBasedBitrateBps: lossBps,
                                 acknowledgedBitrateBps: acked.bitsPerSecond.map { Int($0) },
                                 usage: config.delayBased ? detector.usage : .normal, fractionLost: lastFractionLost,
                                 trend: detector.trend, threshold: detector.threshold)
    }
}
