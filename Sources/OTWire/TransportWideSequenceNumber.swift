import OTBase

/// transport-wide-cc sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01): 16 bits.
public enum TransportWideSequenceNumber {
    public static let uri = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    public static func encode(_ seq: UInt16) -> [UInt8] { [UInt8(seq >> 8), UInt8(truncatingIfNeeded: seq)] }
    public static func decode(_ value: ArraySlice<UInt8>) throws -> UInt16 {
        guard value.count == 2 else { throw WireError("transport-wide sequence number is \(value.count) bytes, expected 2") }
        return UInt16(value[value.startIndex]) << 8 | UInt16(value[value.startIndex + 1])
    }

    /// Where the 2-byte value of extension `id` sits in a serialized RTP packet (RFC 8285 one- or two-byte
    /// form), without parsing or copying: the transport reads or stamps it in place. Nil when absent or malformed.
    public static func valueOffset(in p: [UInt8], id: UInt8) -> Int? {
        guard let r = RTPHeaderExtensions.valueRange(in: p, id: id), r.count == 2 else { return nil }
        return r.lowerBound
    }
}
