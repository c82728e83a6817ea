import OTBase

/// An RTP packet (RFC 3550) viewed over a byte buffer: the fixed header, CSRCs,
/// the RFC 8285 header-extension block, payload and padding.
///
/// Parsing does not copy: `payload` and the extension block are slices of the input.
public struct RTPPacket: Sendable {
    public var marker: Bool
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var csrcs: [UInt32]
    /// The header-extension block (RFC 8285 one-byte or two-byte form, or any other profile).
    public var extensions: RTPHeaderExtensions
    public var payload: ArraySlice<UInt8>
    /// Padding bytes after the payload (the last one holds the count); 0 for none.
    public var paddingLength: Int

    public init(marker: Bool = false, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32,
                csrcs: [UInt32] = [], extensions: RTPHeaderExtensions = RTPHeaderExtensions(),
                payload: ArraySlice<UInt8> = [], paddingLength: Int = 0) {
        self.marker = marker; self.payloadType = payloadType & 0x7F; self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp; self.ssrc = ssrc; self.csrcs = csrcs; self.extensions = extensions
        self.payload = payload; self.paddingLength = paddingLength
    }

    /// Size of the fixed header, CSRCs and extension block.
    public var headerLength: Int { 12 + 4 * csrcs.count + extensions.encodedLength }

    /// Parses a packet; throws `WireError` on anything malformed (never traps).
    public init(parsing bytes: ArraySlice<UInt8>) throws {
        var r = ByteReader(bytes)
        let b0 = try r.u8("RTP header")
        guard b0 >> 6 == 2 else { throw WireError("RTP version \(b0 >> 6), expected 2") }
        let b1 = try r.u8("RTP header")
        marker = b1 & 0x80 != 0
        payloadType = b1 & 0x7F
        sequenceNumber = try r.u16("RTP sequence number")
        timestamp = try r.u32("RTP timestamp")
        ssrc = try r.u32("RTP SSRC")
        let csrcCount = Int(b0 & 0x0F)
        var list: [UInt32] = []
        if csrcCount > 0 {
            list.reserveCapacity(csrcCount)
            for _ in 0..<csrcCount { list.append(try r.u32("RTP CSRC")) }
        }
        csrcs = list
        if b0 & 0x10 != 0 {
            let profile = try r.u16("RTP extension profile")
            let words = Int(try r.u16("RTP extension length"))
            let data = try r.take(words * 4, "RTP extension block")
            extensions = try RTPHeaderExtensions(profile: profile, data: data)
        } else {
            extensions = RTPHeaderExtensions()
        }
        var body = r.rest()
        paddingLength = 0
        if b0 & 0x20 != 0 {
            guard let last = body.last else { throw WireError("RTP padding bit set but no padding") }
            let count = Int(last)
            guard count > 0, count <= body.count else { throw WireError("RTP padding count \(count) exceeds \(body.count) bytes") }
            paddingLength = count
            body = body.dropLast(count)
        }
        payload = body
    }

    /// Parses a whole buffer.
    public init(parsing bytes: [UInt8]) throws { try self.init(parsing: bytes[...]) }

    /// Appends the serialized packet to `out` (reuse `out` with `removeAll(keepingCapacity:)` to avoid allocation).
    public func write(into out: inout [UInt8]) {
        writeHeader(into: &out, padded: paddingLength > 0)
        out.append(contentsOf: payload)
        if paddingLength > 0 {
            for _ in 0..<(paddingLength - 1) { out.append(0) }
            out.append(UInt8(truncatingIfNeeded: paddingLength))
        }
    }

    /// The serialized packet as a new array.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(headerLength + payload.count + paddingLength)
        write(into: &out)
        return out
    }

    /// Appends only the header (fixed part, CSRCs, extensions); the caller appends the payload.
    public func writeHeader(into out: inout [UInt8], padded: Bool = false) {
        let csrcCount = min(csrcs.count, 15)
        var b0: UInt8 = 0x80 | UInt8(csrcCount)
        if padded { b0 |= 0x20 }
        if !extensions.isEmpty { b0 |= 0x10 }
        out.append(b0)
        out.append((marker ? 0x80 : 0) | (payloadType & 0x7F))
        out.append(UInt8(sequenceNumber >> 8)); out.append(UInt8(truncatingIfNeeded: sequenceNumber))
        Self.append32(timestamp, to: &out)
        Self.append32(ssrc, to: &out)
        for c in csrcs.prefix(csrcCount) { Self.append32(c, to: &out) }
        if !extensions.isEmpty { extensions.write(into: &out) }
    }

    @inline(__always) static func append32(_ v: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: v >> 24)); out.append(UInt8(truncatingIfNeeded: v >> 16))
        out.append(UInt8(truncatingIfNeeded: v >> 8)); out.append(UInt8(truncatingIfNeeded: v))
    }
}

extension RTPPacket {
    /// Where the payload of a serialized RTP packet lies (after CSRCs and extensions, before padding), without
    /// parsing the rest; nil when `p` is not a well-formed RTP packet.
    public static func payloadRange(in p: [UInt8]) -> Range<Int>? {
        guard p.count >= 12, p[0] >> 6 == 2 else { return nil }
        var start = 12 + 4 * Int(p[0] & 0x0F)
        if p[0] & 0x10 != 0 {
            guard p.count >= start + 4 else { return nil }
            start += 4 + 4 * (Int(p[start + 2]) << 8 | Int(p[start + 3]))
        }
        var end = p.count
        if p[0] & 0x20 != 0 {
            guard let pad = p.last, pad > 0 else { return nil }
            end -= Int(pad)
        }
        guard start <= end else { return nil }
        return start..<end
    }
}
