import OTBase

/// One block of a RED payload (RFC 2198): data of another payload type, sent `timestampOffset` RTP ticks before the
/// packet's timestamp (0 for the primary block).
public struct REDBlock: Sendable, Equatable {
    public var payloadType: UInt8
    public var timestampOffset: UInt16
    public var data: ArraySlice<UInt8>
    public init(payloadType: UInt8, timestampOffset: UInt16 = 0, data: ArraySlice<UInt8>) {
        self.payloadType = payloadType & 0x7F; self.timestampOffset = timestampOffset & 0x3FFF; self.data = data
    }
}

/// The RED payload format (RFC 2198): redundant blocks, each with a 4-byte header (F=1, payload type, 14-bit timestamp
/// offset, 10-bit length), then the primary block after a 1-byte header (F=0, payload type). Video with ULPFEC
/// (RFC 5109 §10) sends every packet as RED with the primary block only: the media, or an FEC packet.
public enum REDPayload {
    /// The redundant blocks (oldest first) and the primary block. Throws `WireError` on anything malformed.
    public static func parse(_ payload: ArraySlice<UInt8>) throws -> (redundant: [REDBlock], primary: REDBlock) {
        var r = ByteReader(payload)
        var headers: [(pt: UInt8, offset: UInt16, length: Int)] = []
        while true {
            let b0 = try r.u8("RED block header")
            guard b0 & 0x80 != 0 else {
                var redundant: [REDBlock] = []
                for h in headers { redundant.append(REDBlock(payloadType: h.pt, timestampOffset: h.offset, data: try r.take(h.length, "RED block"))) }
                return (redundant, REDBlock(payloadType: b0 & 0x7F, data: r.rest()))
            }
            let rest = try r.u24("RED block header")
            headers.append((b0 & 0x7F, UInt16(rest >> 10), Int(rest & 0x3FF)))
            guard headers.count <= 16 else { throw WireError("RED: more than 16 redundant blocks") }
        }
    }

    /// Appends a RED payload holding only `primary` of `payloadType` to `out`.
    public static func writePrimary(payloadType: UInt8, _ primary: ArraySlice<UInt8>, into out: inout [UInt8]) {
        out.append(payloadType & 0x7F)
        out.append(contentsOf: primary)
    }
}
