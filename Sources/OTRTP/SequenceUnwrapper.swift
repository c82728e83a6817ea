import OTBase

/// Extends wrapping RTP counters (16-bit sequence numbers, 32-bit timestamps) to a monotonic 64-bit count
/// (RFC 3550 A.1 style): each value is placed at the wrap closest to the highest seen.
public struct CounterUnwrapper: Sendable, Equatable {
    private let modulus: Int64
    private var last: Int64?

    /// An unwrapper for a counter of `bits` bits (16 or 32).
    public init(bits: Int) { modulus = Int64(1) << Int64(min(max(bits, 8), 32)) }

    /// The extended value of `value`, choosing the wrap that is closest to the highest value so far.
    public mutating func unwrap(_ value: UInt32) -> Int64 {
        let v = Int64(value) & (modulus - 1)
        guard let last else { self.last = v; return v }
        var delta = (v - last) % modulus
        if delta < 0 { delta += modulus }
        if delta >= modulus / 2 { delta -= modulus }
        let result = last + delta
        if result > last { self.last = result }
        return result
    }

    /// Forgets the history: the next value starts a new count.
    public mutating func reset() { last = nil }
}

/// Extends 16-bit RTP sequence numbers to a monotonic 64-bit count.
public struct SequenceUnwrapper: Sendable, Equatable {
    private var counter = CounterUnwrapper(bits: 16)
    public init() {}
    /// The extended value of `seq`, choosing the wrap that is closest to the highest value so far.
    public mutating func unwrap(_ seq: UInt16) -> Int64 { counter.unwrap(UInt32(seq)) }
    public mutating func reset() { counter.reset() }
}
