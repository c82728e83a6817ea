import OTBase

/// The 7- or 15-bit picture id of the VP8 and VP9 payload descriptors: one byte, or two with the M bit (0x80) set.
enum DescriptorPictureID {
    static func write(_ pid: UInt16, fifteenBit: Bool, into out: inout [UInt8]) {
        if fifteenBit {
            out.append(0x80 | UInt8(truncatingIfNeeded: pid >> 8) & 0x7F)
            out.append(UInt8(truncatingIfNeeded: pid))
        } else {
            out.append(UInt8(truncatingIfNeeded: pid) & 0x7F)
        }
    }

    /// Reads it (`what`: how errors name its first and second byte); returns the id and whether it had 15 bits.
    static func read(_ r: inout ByteReader, _ what: StaticString, _ what15: StaticString) throws -> (UInt16, Bool) {
        let p0 = try r.u8(what)
        guard p0 & 0x80 != 0 else { return (UInt16(p0), false) }
        return (UInt16(p0 & 0x7F) << 8 | UInt16(try r.u8(what15)), true)
    }
}
