import OTBase

/// Tracks incoming RTP sequence numbers (with 16-bit wrap) and classifies each packet:
/// in order, after a gap (losses), a late (reordered) arrival, or a duplicate.
public struct RTPSequenceTracker: Sendable {
    /// What a newly arrived sequence number means.
    public enum Arrival: Equatable, Sendable {
        /// The first packet seen.
        case first
        /// The next expected packet.
        case inOrder
        /// Newer than expected: `missing` packets were skipped (lost or still in flight).
        case gap(missing: Int)
        /// Older than the newest seen and not seen before: a reordered packet.
        case late
        /// Seen before (within the tracking window).
        case duplicate
        /// Far outside the window (a stream restart or garbage); tracking was reset to it.
        case reset
    }

    /// The highest extended sequence number seen (cycles << 16 | seq), or nil before the first packet.
    public private(set) var highest: Int64?
    /// Bitmap of received packets at and just below `highest` (bit i = highest - i).
    private var window: UInt64 = 0
    /// Largest jump treated as a gap rather than a restart.
    public var maxJump: Int

    public init(maxJump: Int = 3000) { self.maxJump = maxJump }

    /// The extended sequence number for `seq` nearest the highest seen.
    public func extend(_ seq: UInt16) -> Int64 {
        guard let h = highest else { return Int64(seq) }
        let delta = Int64(Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: h)))
        return h + delta
    }

    /// Records a packet and returns how it arrived.
    public mutating func record(_ seq: UInt16) -> Arrival {
        guard let h = highest else { highest = Int64(seq) + 65536; window = 1; return .first }
        let ext = extend(seq)
        let delta = ext - h
        if delta > maxJump || -delta > maxJump {
            highest = Int64(seq) + 65536; window = 1; return .reset
        }
        if delta > 0 {
            window = delta >= 64 ? 1 : (window << UInt64(delta)) | 1
            highest = ext
            return delta == 1 ? .inOrder : .gap(missing: Int(delta - 1))
        }
        if delta == 0 { return .duplicate }
        let back = -delta
        if back >= 64 { return .late }
        let bit: UInt64 = 1 << UInt64(back)
        if window & bit != 0 { return .duplicate }
        window |= bit
        return .late
    }
}
