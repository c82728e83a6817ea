import OTBase
import Synchronization

/// A clock that only moves when told to; tests drive engines and the emulator with it.
public final class VirtualClock: TimeSource {
    private let current: Mutex<Instant>
    public init(start: Instant = Instant(micros: 1_000_000)) { current = Mutex(start) }
    public func now() -> Instant { current.withLock { $0 } }
    /// Moves the clock forward by `d` (never backwards).
    public func advance(by d: Duration) { current.withLock { $0 = $0 + max(d, .zero) } }
    /// Moves the clock to `t` if `t` is later than now.
    public func advance(to t: Instant) { current.withLock { $0 = max($0, t) } }
}
