import OTBase

/// The lock of a publisher or subscriber, and where it is between `Session.publish`/`subscribe` and its end:
/// idle → starting → live → stopping → idle. A stop that comes while the start is still running cancels it
/// (`cancelled`): the start undoes everything it made and throws, so nothing it starts outlives the stop. A start is
/// refused until the object is idle again, so an ended publish's or subscription's media has stopped (its capture,
/// frames and callbacks) before the object can start anywhere else.
///
/// The methods other than `withLock` and `throwIfCancelled` are called with the lock held.
final class StartStopLock: @unchecked Sendable {
    private enum Phase { case idle, starting, cancelled, live, stopping }
    private let condition = Condition()
    private var phase = Phase.idle
    /// What a cancelled start throws (1015, saying what was ended).
    let cancelled: OTError

    init(cancelled message: String) { cancelled = OTError(.illegalState, message) }

    /// Runs `body` holding the lock.
    func withLock<T>(_ body: () throws -> T) rethrows -> T { try condition.withLock(body) }

    /// idle → starting, running `onAccepted` first (what it throws refuses the start); `refusal` when not idle.
    func start(refusal: @autoclosure () -> OTError, onAccepted: () throws -> Void) throws {
        guard phase == .idle else { throw refusal() }
        try onAccepted()
        phase = .starting
    }

    /// The start made everything: starting → live (true); or a stop cancelled it: → stopping (false: the start undoes
    /// itself, then `ended()`).
    func started() -> Bool {
        if phase == .cancelled {
            phase = .stopping
            return false
        }
        phase = .live
        return true
    }

    /// A stop: live → stopping (true: the caller ends it, then `ended()`). False when there is nothing for this caller to
    /// end: idle; a start in progress, which this cancels; or another stop ending it. Then, when `wait`, waits
    /// (releasing the lock) until that start or stop is over. A caller that the start may be waiting for (the session's
    /// executor, the object's media queue) passes false.
    func stop(wait: Bool) -> Bool {
        switch phase {
        case .live:
            phase = .stopping
            return true
        case .idle:
            return false
        case .starting:
            phase = .cancelled
        case .cancelled, .stopping:
            break
        }
        while wait && (phase == .cancelled || phase == .stopping) { condition.wait() }
        return false
    }

    /// Back to idle after a stop, a failed start or a cancelled one; wakes the stops waiting for it.
    func ended() {
        phase = .idle
        condition.broadcast()
    }

    /// Starting or live, not cancelled or ending (a publish's answer is still wanted).
    var isActive: Bool { phase == .starting || phase == .live }

    /// Takes the lock: throws `cancelled` when a stop cancelled the start in progress (a start checks before each step
    /// that others would see: a capture, an offer or a request to the server).
    func throwIfCancelled() throws {
        try withLock { if phase == .cancelled { throw cancelled } }
    }
}
