import OTWire

/// Writes a connection's transport-wide sequence numbers (draft-holmer-rmcat-transport-wide-cc-extensions) into the
/// RTP packets it sends, in place, over whatever number a packet carried (a router forwards packets numbered for the
/// publisher's uplink). Retransmissions get numbers of their own: the estimator counts them in what the link carries.
public struct TransportSequenceStamper: Sendable {
    /// The negotiated extension id; nil: not negotiated, nothing is stamped.
    public var extensionId: UInt8?
    /// The number the next stamped packet gets.
    public private(set) var next: UInt16

    public init(extensionId: UInt8? = nil, first: UInt16 = 1) { self.extensionId = extensionId; next = first }

    /// Stamps a plain RTP packet that carries the extension; returns the number written (nil: no extension).
    public mutating func stamp(_ packet: inout [UInt8]) -> UInt16? {
        guard let id = extensionId, let at = TransportWideSequenceNumber.valueOffset(in: packet, id: id) else { return nil }
        let seq = next
        next &+= 1
        packet[at] = UInt8(seq >> 8); packet[at + 1] = UInt8(truncatingIfNeeded: seq)
        return seq
    }
}
