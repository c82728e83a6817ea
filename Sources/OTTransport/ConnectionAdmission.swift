#if canImport(Glibc)
import Glibc
#endif

/// Limits a listening socket applies to the connections it accepts (the server's side of docs/protocol.md,
/// "Limits"). Client connections have none.
public struct TCPServerLimits: Sendable, Equatable {
    /// Accepted sockets open at once; nil: `defaultMaxConnections()` (10,000, or the descriptor limit minus a
    /// reserve when that is lower).
    public var maxConnections: Int?
    /// Accepted sockets open at once from one source address (0: no cap).
    public var maxConnectionsPerAddress = 1000
    /// A socket with more than this queued for writing is closed when more output comes (a client that does not
    /// read); what is produced while handling one input is queued as a whole first.
    public var maxPendingBytesPerConnection = 4 << 20
    /// Above this many queued bytes the loop stops reading from the socket (backpressure) until half has drained.
    public var readPauseBytes = 256 << 10
    /// Bytes queued for all of the listener's sockets together; above it, the sockets with the most queued are closed.
    public var outputBudget = 128 << 20

    /// Descriptors kept for everything else the process opens (media sockets, files, epoll).
    public static let reservedDescriptors = 64

    public init() {}

    /// 10,000, or the process's `RLIMIT_NOFILE` soft limit minus `reservedDescriptors` when that is lower (at least 16).
    public static func defaultMaxConnections() -> Int {
        var rl = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl) == 0, rl.rlim_cur != rlim_t.max else { return 10_000 }
        let fromLimit = Int(clamping: rl.rlim_cur) - reservedDescriptors
        return max(16, min(10_000, fromLimit))
    }

    /// The global cap in force.
    public var effectiveMaxConnections: Int { maxConnections ?? Self.defaultMaxConnections() }
}

/// Which accepted sockets a listener admits, and which it gives up when it is full. Sans-IO: ids and addresses
/// in, decisions out; `TCPEventLoop` drives it.
///
/// A socket is *pending* until its owner marks it established (the server does so once a WebSocket client has
/// authenticated). When the global cap is reached (or the process runs out of descriptors), room is made by
/// closing the oldest pending socket of the address that holds the most pending sockets, so a flood from a few
/// addresses evicts its own sockets and a newcomer from elsewhere still gets in. Established sockets are never
/// evicted; when only they remain, newcomers are refused.
public struct ConnectionAdmission: Sendable {
    public enum Decision: Equatable, Sendable {
        case admit
        /// Admit after closing this socket.
        case admitEvicting(Int)
        /// Close the newcomer at once.
        case refuse(Refusal)
    }
    public enum Refusal: Equatable, Sendable { case addressFull, full }

    private struct Entry: Sendable { var address: String; var established: Bool }
    private struct PerAddress: Sendable {
        var open = 0
        var pending = 0
        /// Pending ids in admission order; ids that since closed or became established are skipped lazily.
        var order: [Int] = []
        var head = 0
    }

    public let maxConnections: Int
    public let maxPerAddress: Int
    private var entries: [Int: Entry] = [:]
    private var addresses: [String: PerAddress] = [:]

    public init(maxConnections: Int, maxPerAddress: Int) {
        self.maxConnections = max(1, maxConnections); self.maxPerAddress = max(0, maxPerAddress)
    }

    /// Sockets admitted and not yet removed.
    public var count: Int { entries.count }
    /// Sockets from `address` admitted and not yet removed.
    public func count(from address: String) -> Int { addresses[address]?.open ?? 0 }
    public func isEstablished(_ id: Int) -> Bool { entries[id]?.established ?? false }

    /// What to do with a new socket from `address`.
    public mutating func decide(address: String) -> Decision {
        if maxPerAddress > 0 && count(from: address) >= maxPerAddress { return .refuse(.addressFull) }
        guard entries.count >= maxConnections else { return .admit }
        guard let victim = victim(sparing: address) else { return .refuse(.full) }
        return .admitEvicting(victim)
    }

    /// The socket to close to make room: the oldest pending socket of the address with the most pending sockets
    /// (`sparing`'s count is taken one higher, as if the newcomer were already in). Nil when nothing is pending.
    public mutating func victim(sparing: String? = nil) -> Int? {
        var best: String?
        var bestCount = 0
        for (addr, a) in addresses where a.pending > 0 {
            let n = a.pending + (addr == sparing ? 1 : 0)
            if n > bestCount || (n == bestCount && addr != sparing) { best = addr; bestCount = n }
        }
        guard let best, var a = addresses[best] else { return nil }
        defer { addresses[best] = a }
        while a.head < a.order.count {
            let id = a.order[a.head]
            if let e = entries[id], !e.established, e.address == best { return id }
            a.head += 1
        }
        return nil
    }

    /// Records an admitted socket (pending). Ids must not be reused (the loop numbers its connections).
    public mutating func insert(_ id: Int, address: String) {
        remove(id)
        entries[id] = Entry(address: address, established: false)
        var a = addresses[address] ?? PerAddress()
        a.open += 1; a.pending += 1
        a.order.append(id)
        compact(&a)
        addresses[address] = a
    }

    /// The socket proved itself (e.g. an authenticated client): never evicted from now on.
    public mutating func establish(_ id: Int) {
        guard var e = entries[id], !e.established else { return }
        e.established = true
        entries[id] = e
        addresses[e.address]?.pending -= 1
    }

    /// Forgets a closed socket.
    public mutating func remove(_ id: Int) {
        guard let e = entries.removeValue(forKey: id), var a = addresses[e.address] else { return }
        a.open -= 1
        if !e.established { a.pending -= 1 }
        if a.open == 0 { addresses[e.address] = nil } else { compact(&a); addresses[e.address] = a }
    }

    /// Drops skipped ids once they are most of the order list, so it stays proportional to what is open.
    private func compact(_ a: inout PerAddress) {
        guard a.order.count - a.head > 64, a.order.count > 2 * max(a.pending, 1) else { return }
        a.order = a.order[a.head...].filter { entries[$0].map { !$0.established } ?? false }
        a.head = 0
    }
}
