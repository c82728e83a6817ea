import OTBase

/// Receive-side NACK bookkeeping (RFC 4585 generic NACK), sans-IO: notes sequence-number gaps as they appear,
/// says which missing packets to NACK now (again after `retryInterval`, at most `maxRetries` times), and when
/// a packet has been missing so long that the receiver should give up on it and ask for a keyframe.
public struct NackTracker: Sendable {
    private struct Entry: Sendable {
        var seq: Int64
        var firstMissing: Instant
        var lastSent: Instant?
        var retries: Int
    }

    public var retryInterval: Duration
    public var maxRetries: Int
    /// A packet missing this long is given up on.
    public var lossTimeout: Duration
    /// Missing packets tracked at most; a larger gap is given up on at once.
    public var maxEntries: Int
    private var entries: [Entry] = []
    private var highest: Int64?
    /// Packets that arrived after being noted missing.
    public private(set) var recovered = 0

    public init(retryInterval: Duration = .milliseconds(100), maxRetries: Int = 10, lossTimeout: Duration = .milliseconds(400),
                maxEntries: Int = 250) {
        self.retryInterval = retryInterval; self.maxRetries = max(1, maxRetries)
        self.lossTimeout = lossTimeout; self.maxEntries = max(1, maxEntries)
    }

    /// Sequence numbers currently missing, oldest first.
    public var missing: [UInt16] { entries.map { UInt16(truncatingIfNeeded: $0.seq) } }

    /// Notes an arrival. Returns false when the gap it reveals is too large to repair (the tracker is then cleared).
    public mutating func packetArrived(_ seq: UInt16, now: Instant) -> Bool {
        guard let h = highest else { highest = Int64(seq) + 65_536; return true }
        let ext = h + Int64(Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: h)))
        if ext > h {
            let gap = ext - h - 1
            highest = ext
            if gap > 0 {
                guard gap + Int64(entries.count) <= Int64(maxEntries) else { entries.removeAll(keepingCapacity: true); return false }
                for s in (h + 1)..<ext { entries.append(Entry(seq: s, firstMissing: now, lastSent: nil, retries: 0)) }
            }
        } else if let i = entries.firstIndex(where: { $0.seq == ext }) {
            entries.remove(at: i)
            recovered += 1
        }
        return true
    }

    /// The missing packets to NACK at `now` (each is marked as requested).
    public mutating func due(now: Instant) -> [UInt16] {
        var out: [UInt16] = []
        for i in entries.indices where entries[i].retries < maxRetries {
            if let last = entries[i].lastSent, now - last < retryInterval { continue }
            entries[i].lastSent = now
            entries[i].retries += 1
            out.append(UInt16(truncatingIfNeeded: entries[i].seq))
        }
        return out
    }

    /// True when some packet has been missing for `lossTimeout` or longer.
    public func hasExpired(now: Instant) -> Bool {
        entries.contains { now - $0.firstMissing >= lossTimeout }
    }

    /// When `due` or `hasExpired` may next change, or nil when nothing is missing.
    public var nextDeadline: Instant? {
        var next: Instant?
        for e in entries {
            var t = e.firstMissing + lossTimeout
            if e.retries < maxRetries, let last = e.lastSent { t = min(t, last + retryInterval) }
            if e.lastSent == nil { t = e.firstMissing }
            next = next.map { min($0, t) } ?? t
        }
        return next
    }

    /// Forgets every missing packet (after giving up on them); keeps the position in the sequence space.
    public mutating func clear() { entries.removeAll(keepingCapacity: true) }

    /// Forgets everything, for a new stream.
    public mutating func reset() { clear(); highest = nil }
}
