import OTBase

/// Extends 16-bit RTP sequence numbers to a monotonic 64-bit count (RFC 3550 A.1 style).
public struct SequenceUnwrapper: Sendable, Equatable {
    private var last: Int64?
    public init() {}
    /// The extended value of `seq`, choosing the wrap that is closest to the previous value.
    public mutating func unwrap(_ seq: UInt16) -> Int64 {
        guard let last else { self.last = Int64(seq); return Int64(seq) }
        let delta = Int64(Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: last)))
        let value = last + delta
        if value > last { self.last = value }
        return value
    }
}
