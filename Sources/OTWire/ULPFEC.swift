import OTBase

/// An ULPFEC packet's payload (RFC 5109, one protection level): the FEC header (recovery fields: the XOR of the
/// protected packets' P, X, CC, M, PT, timestamp and length), the level-0 header (protection length, a 16- or 48-bit
/// mask of the protected sequence numbers from `sequenceBase`) and the XOR of the protected packets' bytes after their
/// 12-byte fixed headers. With all but one of the protected packets, the missing one is rebuilt.
public struct ULPFECPayload: Sendable, Equatable {
    public var recoveryPadding: Bool
    public var recoveryExtension: Bool
    public var recoveryCSRCCount: UInt8
    public var recoveryMarker: Bool
    public var recoveryPayloadType: UInt8
    public var sequenceBase: UInt16
    public var timestampRecovery: UInt32
    public var lengthRecovery: UInt16
    /// Bit i (counting from the most significant of 48) set: sequence number `sequenceBase + i` is protected.
    public var mask: UInt64
    /// The XOR of the protected packets' bytes after the fixed header, each zero-padded to the longest.
    public var protectedData: [UInt8]

    /// The most packets one FEC packet protects (the long mask).
    public static let maxProtected = 48

    /// Sequence numbers the mask protects.
    public var protectedSequences: [UInt16] {
        (0..<Self.maxProtected).compactMap { i in mask & (UInt64(1) << UInt64(47 - i)) != 0 ? sequenceBase &+ UInt16(i) : nil }
    }

    /// Parses an FEC payload (the RTP payload of an FEC packet, after any RED header). Throws `WireError`.
    public init(parsing bytes: ArraySlice<UInt8>) throws {
        var r = ByteReader(bytes)
        let b0 = try r.u8("ULPFEC header")
        guard b0 & 0x80 == 0 else { throw WireError("ULPFEC: the E bit (extension) is set") }
        let long = b0 & 0x40 != 0
        recoveryPadding = b0 & 0x20 != 0
        recoveryExtension = b0 & 0x10 != 0
        recoveryCSRCCount = b0 & 0x0F
        let b1 = try r.u8("ULPFEC header")
        recoveryMarker = b1 & 0x80 != 0
        recoveryPayloadType = b1 & 0x7F
        sequenceBase = try r.u16("ULPFEC SN base")
        timestampRecovery = try r.u32("ULPFEC TS recovery")
        lengthRecovery = try r.u16("ULPFEC length recovery")
        let protectionLength = Int(try r.u16("ULPFEC protection length"))
        mask = UInt64(try r.u16("ULPFEC mask")) << 32
        if long { mask |= UInt64(try r.u32("ULPFEC long mask")) }
        guard mask != 0 else { throw WireError("ULPFEC: an empty mask protects nothing") }
        guard r.remaining >= protectionLength else {
            throw WireError("ULPFEC: protection length \(protectionLength) exceeds the \(r.remaining) bytes left")
        }
        protectedData = Array(try r.take(protectionLength, "ULPFEC level 0 payload"))
    }

    /// The FEC payload protecting `packets` (serialized RTP of one SSRC, sequence numbers within 48 of the lowest).
    /// Nil when there is nothing to protect or the numbers span too far.
    public init?(protecting packets: [[UInt8]]) {
        let valid = packets.filter { $0.count >= 12 && $0[0] >> 6 == 2 }
        guard !valid.isEmpty else { return nil }
        let seqs = valid.map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        let base = seqs.min { Int16(bitPattern: $0 &- $1) < 0 } ?? seqs[0]
        var mask: UInt64 = 0
        for s in seqs {
            let d = Int(s &- base)
            guard d < Self.maxProtected else { return nil }
            mask |= UInt64(1) << UInt64(47 - d)
        }
        let longest = valid.map { $0.count - 12 }.max() ?? 0
        var b0: UInt8 = 0, b1: UInt8 = 0, ts: UInt32 = 0, length: UInt16 = 0
        var data = [UInt8](repeating: 0, count: longest)
        for p in valid {
            b0 ^= p[0]; b1 ^= p[1]
            ts ^= UInt32(p[4]) << 24 | UInt32(p[5]) << 16 | UInt32(p[6]) << 8 | UInt32(p[7])
            length ^= UInt16(truncatingIfNeeded: p.count - 12)
            for i in 12..<p.count { data[i - 12] ^= p[i] }
        }
        recoveryPadding = b0 & 0x20 != 0
        recoveryExtension = b0 & 0x10 != 0
        recoveryCSRCCount = b0 & 0x0F
        recoveryMarker = b1 & 0x80 != 0
        recoveryPayloadType = b1 & 0x7F
        sequenceBase = base
        timestampRecovery = ts
        lengthRecovery = length
        self.mask = mask
        protectedData = data
    }

    /// Appends the serialized payload to `out` (the short mask when it suffices).
    public func write(into out: inout [UInt8]) {
        let long = mask & 0xFFFF_FFFF != 0
        out.append((long ? 0x40 : 0) | (recoveryPadding ? 0x20 : 0) | (recoveryExtension ? 0x10 : 0) | (recoveryCSRCCount & 0x0F))
        out.append((recoveryMarker ? 0x80 : 0) | (recoveryPayloadType & 0x7F))
        out.append(UInt8(sequenceBase >> 8)); out.append(UInt8(truncatingIfNeeded: sequenceBase))
        for s in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: timestampRecovery >> UInt32(s))) }
        out.append(UInt8(lengthRecovery >> 8)); out.append(UInt8(truncatingIfNeeded: lengthRecovery))
        let protectionLength = UInt16(clamping: protectedData.count)
        out.append(UInt8(protectionLength >> 8)); out.append(UInt8(truncatingIfNeeded: protectionLength))
        for s in [40, 32] { out.append(UInt8(truncatingIfNeeded: mask >> UInt64(s))) }
        if long { for s in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: mask >> UInt64(s))) } }
        out.append(contentsOf: protectedData.prefix(Int(protectionLength)))
    }

    /// Rebuilds the one protected packet that is missing, given the others (`present`: serialized RTP by sequence
    /// number, nil when missing) and the SSRC of the stream. Nil when not exactly one is missing, or the result would
    /// not be a sound packet.
    public func recover(ssrc: UInt32, present: (UInt16) -> [UInt8]?) -> [UInt8]? {
        var missing: UInt16?
        var others: [[UInt8]] = []
        for s in protectedSequences {
            if let p = present(s) { others.append(p) } else {
                guard missing == nil else { return nil }
                missing = s
            }
        }
        guard let seq = missing else { return nil }
        var b0 = (recoveryPadding ? 0x20 : 0) | (recoveryExtension ? 0x10 : 0) | recoveryCSRCCount
        var b1 = (recoveryMarker ? 0x80 : 0) | recoveryPayloadType
        var ts = timestampRecovery, length = lengthRecovery
        var data = protectedData
        for p in others {
            guard p.count >= 12, p.count - 12 <= data.count else { return nil }
            b0 ^= p[0] & 0x3F; b1 ^= p[1]
            ts ^= UInt32(p[4]) << 24 | UInt32(p[5]) << 16 | UInt32(p[6]) << 8 | UInt32(p[7])
            length ^= UInt16(truncatingIfNeeded: p.count - 12)
            for i in 12..<p.count { data[i - 12] ^= p[i] }
        }
        guard Int(length) <= data.count else { return nil }
        var out: [UInt8] = [0x80 | (b0 & 0x3F), b1, UInt8(seq >> 8), UInt8(truncatingIfNeeded: seq)]
        for s in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: ts >> UInt32(s))) }
        for s in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: ssrc >> UInt32(s))) }
        out.append(contentsOf: data.prefix(Int(length)))
        guard (try? RTPPacket(parsing: out)) != nil else { return nil }
        return out
    }
}
