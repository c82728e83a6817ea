#if canImport(Glibc)
import Glibc
#endif

/// A point in time, in microseconds of some monotonic clock. Sans-IO engines
/// take it as an argument and never read a clock themselves.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var micros: Int64
    public init(micros: Int64) { self.micros = micros }
    public static let zero = Instant(micros: 0)
    public static func < (a: Instant, b: Instant) -> Bool { a.micros < b.micros }
    public static func + (a: Instant, d: Duration) -> Instant { Instant(micros: a.micros + d.microseconds) }
    public static func - (a: Instant, d: Duration) -> Instant { Instant(micros: a.micros - d.microseconds) }
    public static func - (a: Instant, b: Instant) -> Duration { .microseconds(a.micros - b.micros) }
    public var description: String { "\(Double(micros) / 1_000_000)s" }
}

extension Duration {
    /// Whole microseconds in this duration (truncated).
    public var microseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000 + atto / 1_000_000_000_000
    }
    /// Seconds as a Double.
    public var seconds: Double { Double(microseconds) / 1_000_000 }
    /// This duration in whole microseconds (the resolution of `Instant`), rounded up: a deadline computed from it is
    /// never before the duration has passed.
    public var roundedUpToMicroseconds: Duration {
        let whole = Duration.microseconds(microseconds)
        return whole < self ? whole + .microseconds(1) : whole
    }
}

/// Where drivers read the time: the real monotonic clock, or a virtual one in tests.
public protocol TimeSource: Sendable {
    func now() -> Instant
}

/// CLOCK_MONOTONIC.
public struct MonotonicClock: TimeSource {
    public init() {}
    public func now() -> Instant { MonotonicClock.now() }
    public static func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(micros: Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)
    }
}

/// Wall-clock milliseconds since 1970 (for creation times users see).
public func wallClockMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
