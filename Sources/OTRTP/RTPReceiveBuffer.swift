import OTBase

/// Holds received packets of one SSRC, hands them out in sequence order, and knows which are missing.
/// Generic over what a packet is (raw bytes, a parsed RTP packet, ...).
public struct RTPReceiveBuffer<Packet> {
    public enum InsertResult: Equatable, Sendable { case inserted, duplicate, tooOld }

    /// Packets are kept until popped, at most `capacity` sequence numbers ahead of the next expected one.
    public let capacity: Int
    private var slots: [(seq: Int64, packet: Packet)?]
    private var unwrapper = SequenceUnwrapper()
    /// Extended sequence number `pop` returns next.
    private var next: Int64?
    private var highest: Int64?

    public init(capacity: Int = 1024) {
        self.capacity = max(16, capacity)
        slots = Array(repeating: nil, count: self.capacity)
    }

    private func slot(_ ext: Int64) -> Int { Int(ext % Int64(capacity)) }

    /// Stores a packet. Packets older than what was already popped, or duplicates, are refused.
    @discardableResult
    public mutating func insert(sequence: UInt16, packet: Packet) -> InsertResult {
        let ext = unwrapper.unwrap(sequence) + (1 << 20)  // keep it positive for the slot index
        if next == nil { next = ext }
        guard let n = next, ext >= n else { return .tooOld }
        if ext - n >= Int64(capacity) {
            // Too far ahead: give up on what is missing before it so the window can move.
            let newNext = ext - Int64(capacity) + 1
            var e = n
            while e < newNext { slots[slot(e)] = nil; e += 1 }
            next = newNext
        }
        if let existing = slots[slot(ext)], existing.seq == ext { return .duplicate }
        slots[slot(ext)] = (ext, packet)
        highest = max(highest ?? ext, ext)
        return .inserted
    }

    /// The next packet in order, if it has arrived.
    public mutating func pop() -> (sequence: UInt16, packet: Packet)? {
        guard let n = next, let entry = slots[slot(n)], entry.seq == n else { return nil }
        slots[slot(n)] = nil
        next = n + 1
        return (UInt16(truncatingIfNeeded: n - (1 << 20)), entry.packet)
    }

    /// Sequence numbers between the next expected and the highest received that have not arrived.
    public var missing: [UInt16] {
        guard let n = next, let h = highest, h > n else { return [] }
        var out: [UInt16] = []
        var e = n
        while e < h {
            if slots[slot(e)]?.seq != e { out.append(UInt16(truncatingIfNeeded: e - (1 << 20))) }
            e += 1
        }
        return out
    }

    /// Gives up on the packet `pop` is waiting for (it will not come): moves on to the next one that arrived.
    /// Returns the sequence numbers skipped.
    @discardableResult
    public mutating func skipToNextAvailable() -> [UInt16] {
        guard var n = next, let h = highest else { return [] }
        var skipped: [UInt16] = []
        while n <= h, slots[slot(n)]?.seq != n {
            skipped.append(UInt16(truncatingIfNeeded: n - (1 << 20)))
            n += 1
        }
        next = n
        return skipped
    }

    /// Packets stored and not yet popped.
    public var count: Int { slots.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
}
