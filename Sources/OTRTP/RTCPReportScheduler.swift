import OTBase

/// When the next regular RTCP report is due (RFC 3550 §6.2 with a fixed interval instead of the bandwidth-based
/// one): the first 500 ms after the start, then every `interval` randomized to 0.5–1.5 × of it, so that peers
/// started together do not report in step. Sans-IO; the seed makes it deterministic.
public struct RTCPReportScheduler: Sendable {
    public var interval: Duration
    /// When the next report is due.
    public private(set) var nextReportAt: Instant
    private var rng: SeededRandom

    public init(interval: Duration, seed: UInt64, start: Instant) {
        self.interval = interval
        rng = SeededRandom(seed: seed)
        nextReportAt = start + .milliseconds(500)
    }

    /// True when a report is due at `now` (the caller sends one); the next is then scheduled from `now`.
    public mutating func due(now: Instant) -> Bool {
        guard nextReportAt <= now else { return false }
        let micros = Double(interval.microseconds) * (0.5 + rng.unit())
        nextReportAt = now + .microseconds(Int64(micros))
        return true
    }
}
