import OTBase
import OTWire

/// Impairments applied to datagrams crossing the emulated network.
public struct LinkConditions: Sendable {
    /// One-way base delay.
    public var delay: Duration = .milliseconds(20)
    /// Uniform extra delay in [0, jitter).
    public var jitter: Duration = .zero
    /// Probability a datagram is dropped.
    public var loss: Double = 0
    /// Probability a datagram is delivered twice.
    public var duplicate: Double = 0
    /// Probability a datagram is held back by `reorderDelay` (so later ones overtake it).
    public var reorder: Double = 0
    public var reorderDelay: Duration = .milliseconds(30)
    /// Bottleneck rate in bits per second (nil: unlimited): each direction (source IP) is a rate-limited FIFO whose
    /// backlog delays what follows, dropping at the tail beyond `queueLimit` bytes.
    public var rateBitsPerSecond: Int?
    public var queueLimit = 64 * 1024
    public init() {}
    public init(delay: Duration = .milliseconds(20), jitter: Duration = .zero, loss: Double = 0, duplicate: Double = 0,
                reorder: Double = 0, rateBitsPerSecond: Int? = nil) {
        self.delay = delay; self.jitter = jitter; self.loss = loss; self.duplicate = duplicate
        self.reorder = reorder; self.rateBitsPerSecond = rateBitsPerSecond
    }
}

/// A datagram in flight or delivered.
public struct EmulatedDatagram: Sendable {
    public var from: TransportAddress
    public var to: TransportAddress
    public var bytes: [UInt8]
    public var deliverAt: Instant
}

/// A seeded in-memory network: sans-IO, driven by the caller's clock. Same seed and inputs give the same deliveries.
public struct NetworkEmulator: Sendable {
    public var conditions: LinkConditions
    private var rng: SeededRandom
    private var inFlight: [(order: Int, d: EmulatedDatagram)] = []
    private var order = 0
    /// Per-direction bottleneck: when the link from a source IP is free again, and bytes queued.
    private var linkFreeAt: [IPAddress: Instant] = [:]
    private var blocked: Set<TransportAddress> = []
    private struct Route: Hashable, Sendable { var from: TransportAddress; var to: TransportAddress }
    private var blockedRoutes: Set<Route> = []
    /// Counters for tests.
    public private(set) var sent = 0, dropped = 0, duplicated = 0, delivered = 0

    public init(seed: UInt64, conditions: LinkConditions = LinkConditions()) {
        rng = SeededRandom(seed: seed)
        self.conditions = conditions
    }

    /// Drops every datagram from or to `address` from now on (a path that stopped), until `unblock`.
    public mutating func block(_ address: TransportAddress) { blocked.insert(address) }
    public mutating func unblock(_ address: TransportAddress) { blocked.remove(address) }
    /// Drops datagrams from `from` to `to` only (a path cut one way), until `unblock(from:to:)`.
    public mutating func block(from: TransportAddress, to: TransportAddress) { blockedRoutes.insert(Route(from: from, to: to)) }
    public mutating func unblock(from: TransportAddress, to: TransportAddress) { blockedRoutes.remove(Route(from: from, to: to)) }

    /// Sends a datagram at `now`.
    public mutating func send(_ bytes: [UInt8], from: TransportAddress, to: TransportAddress, now: Instant) {
        sent += 1
        let c = conditions
        if blocked.contains(from) || blocked.contains(to) || blockedRoutes.contains(Route(from: from, to: to)) { dropped += 1; return }
        if c.loss > 0 && rng.unit() < c.loss { dropped += 1; return }
        var departs = now
        if let rate = c.rateBitsPerSecond, rate > 0 {
            let free = max(linkFreeAt[from.ip] ?? now, now)
            let backlogBits = Int64((free - now).microseconds) * Int64(rate) / 1_000_000
            if backlogBits / 8 + Int64(bytes.count) > Int64(c.queueLimit) { dropped += 1; return }
            departs = free + .microseconds(Int64(bytes.count) * 8 * 1_000_000 / Int64(rate))
            linkFreeAt[from.ip] = departs
        }
        let copies = c.duplicate > 0 && rng.unit() < c.duplicate ? 2 : 1
        if copies == 2 { duplicated += 1 }
        for _ in 0..<copies {
            var at = departs + c.delay
            if c.jitter > .zero { at = at + .microseconds(Int64(rng.unit() * Double(c.jitter.microseconds))) }
            if c.reorder > 0 && rng.unit() < c.reorder { at = at + c.reorderDelay }
            order += 1
            inFlight.append((order, EmulatedDatagram(from: from, to: to, bytes: bytes, deliverAt: at)))
        }
    }

    /// How long a datagram from `ip` sent at `now` would wait in the bottleneck queue before its turn on the link
    /// (zero without a rate limit or with the queue empty).
    public func queueDelay(from ip: IPAddress, now: Instant) -> Duration {
        guard conditions.rateBitsPerSecond != nil, let free = linkFreeAt[ip], free > now else { return .zero }
        return free - now
    }

    /// When the next datagram arrives, if any is in flight.
    public var nextDelivery: Instant? { inFlight.lazy.map(\.d.deliverAt).min() }

    /// Removes and returns the earliest datagram due at or before `now` (ties in send order).
    public mutating func poll(now: Instant) -> EmulatedDatagram? {
        var best: Int?
        for (i, e) in inFlight.enumerated() where e.d.deliverAt <= now {
            if let b = best {
                let o = inFlight[b]
                if e.d.deliverAt < o.d.deliverAt || (e.d.deliverAt == o.d.deliverAt && e.order < o.order) { best = i }
            } else { best = i }
        }
        guard let b = best else { return nil }
        let d = inFlight.remove(at: b).d
        if blocked.contains(d.to) || blocked.contains(d.from) || blockedRoutes.contains(Route(from: d.from, to: d.to)) {
            dropped += 1
            return poll(now: now)
        }
        delivered += 1
        return d
    }
}
