import OTBase
import OTWire

/// RTP retransmission payload format (RFC 4588) in SSRC-multiplexed mode: a resent packet travels on its own
/// SSRC and payload type, its payload prefixed by the original sequence number (OSN).
public struct RTXSender: Sendable {
    public let rtxSSRC: UInt32
    /// Original payload type -> RTX payload type (the `apt` of `a=fmtp:<rtx> apt=<pt>`).
    public let payloadTypes: [UInt8: UInt8]
    private var nextSequence: UInt16

    public init(rtxSSRC: UInt32, payloadTypes: [UInt8: UInt8], initialSequence: UInt16 = 0) {
        self.rtxSSRC = rtxSSRC; self.payloadTypes = payloadTypes; nextSequence = initialSequence
    }

    /// The RTX packet that resends `original` (unprotected), or nil when its payload type has no RTX mapping.
    public mutating func wrap(_ original: RTPPacket) -> RTPPacket? {
        guard let pt = payloadTypes[original.payloadType] else { return nil }
        var payload = [UInt8]()
        payload.reserveCapacity(original.payload.count + 2)
        payload.append(UInt8(original.sequenceNumber >> 8))
        payload.append(UInt8(truncatingIfNeeded: original.sequenceNumber))
        payload.append(contentsOf: original.payload)
        defer { nextSequence &+= 1 }
        return RTPPacket(marker: original.marker, payloadType: pt, sequenceNumber: nextSequence, timestamp: original.timestamp,
                         ssrc: rtxSSRC, csrcs: original.csrcs, extensions: original.extensions, payload: payload[...])
    }
}

/// Receiver side of RFC 4588: turns RTX packets back into the packets they resend.
public struct RTXReceiver: Sendable {
    /// RTX SSRC -> media SSRC (from `a=ssrc-group:FID <media> <rtx>`).
    public let ssrcs: [UInt32: UInt32]
    /// RTX payload type -> original payload type.
    public let payloadTypes: [UInt8: UInt8]

    public init(ssrcs: [UInt32: UInt32], payloadTypes: [UInt8: UInt8]) { self.ssrcs = ssrcs; self.payloadTypes = payloadTypes }

    /// The original packet, or nil when `packet` is not RTX for a known stream (pass it on unchanged then).
    /// Throws when an RTX packet is too short to hold the original sequence number.
    public func unwrap(_ packet: RTPPacket) throws -> RTPPacket? {
        guard let media = ssrcs[packet.ssrc], let pt = payloadTypes[packet.payloadType] else { return nil }
        guard packet.payload.count >= 2 else { throw WireError("RTX: payload of \(packet.payload.count) bytes has no original sequence number") }
        let s = packet.payload.startIndex
        let osn = UInt16(packet.payload[s]) << 8 | UInt16(packet.payload[s + 1])
        return RTPPacket(marker: packet.marker, payloadType: pt, sequenceNumber: osn, timestamp: packet.timestamp, ssrc: media,
                         csrcs: packet.csrcs, extensions: packet.extensions, payload: packet.payload.dropFirst(2))
    }
}
