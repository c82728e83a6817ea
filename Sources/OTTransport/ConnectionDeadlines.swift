import OTBase
import Synchronization

/// Many connections' deadlines multiplexed onto one `UDPDriver` deadline (the earliest of them). Used by the
/// IO objects whose one thread serves several `PeerConnectionDriver`s (`MediaEndpoint`, `SharedUDPIO`).
///
/// Connections are held weakly. The lock is never held while calling into a connection, which calls back
/// into `set` from `timeout`.
final class ConnectionDeadlines: Sendable {
    private struct Entry {
        weak var driver: PeerConnectionDriver?
        let at: Instant
    }
    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var earliest: Instant?
        /// The IO object's owner's own deadline (`MediaEndpoint.setTimerDeadline`).
        var owner: Instant?
    }

    private let udp: UDPDriver
    private let state = Mutex(State())

    init(udp: UDPDriver) { self.udp = udp }

    /// Sets (or with nil clears) when `d` next wants `timeout(now:)`.
    func set(_ at: Instant?, for d: PeerConnectionDriver) {
        // The IO driver's deadline is set under the lock so updates from several threads cannot reorder.
        state.withLock { s in
            s.entries[ObjectIdentifier(d)] = at.map { Entry(driver: d, at: $0) }
            guard let at, s.earliest.map({ at < $0 }) ?? true else { return }
            s.earliest = at
            udp.setDeadline(at)
        }
    }

    /// Sets (or with nil clears) the owner's deadline, multiplexed with the connections'.
    func setOwner(_ at: Instant?) {
        state.withLock { s in
            s.owner = at
            guard let at, s.earliest.map({ at < $0 }) ?? true else { return }
            s.earliest = at
            udp.setDeadline(at)
        }
    }

    /// Forgets `d`'s deadline.
    func remove(_ d: PeerConnectionDriver) { remove(ObjectIdentifier(d)) }

    /// Forgets the deadline of the connection known by `id` (usable from that connection's `deinit`).
    func remove(_ id: ObjectIdentifier) { state.withLock { _ = $0.entries.removeValue(forKey: id) } }

    /// Calls `timeout(now:)` on every connection whose deadline passed (each sets its next one while doing
    /// so), then arms the IO driver for the earliest remaining deadline. Called on the IO thread.
    func fire(now: Instant) {
        let due = state.withLock { s -> [PeerConnectionDriver] in
            s.earliest = nil
            let ids = s.entries.filter { $0.value.at <= now }.map(\.key)
            return ids.compactMap { s.entries.removeValue(forKey: $0)?.driver }
        }
        for d in due { d.timeout(now: now) }
        state.withLock { s in
            s.earliest = [s.entries.values.map(\.at).min(), s.owner].compactMap { $0 }.min()
            udp.setDeadline(s.earliest)
        }
    }
}
