import OTBase

/// STUN/TURN methods (RFC 8489, RFC 8656).
public enum STUNMethod: UInt16, Sendable {
    case binding = 0x001, allocate = 0x003, refresh = 0x004, send = 0x006, data = 0x007
    case createPermission = 0x008, channelBind = 0x009
}

/// The class bits of a STUN message type.
public enum STUNClass: UInt16, Sendable {
    case request = 0, indication = 1, success = 2, error = 3
}

/// The 96-bit transaction ID.
public struct STUNTransactionID: Hashable, Sendable, CustomStringConvertible {
    public var hi: UInt32
    public var lo: UInt64
    public init(hi: UInt32, lo: UInt64) { self.hi = hi; self.lo = lo }
    /// A random ID from the given generator.
    public static func random<G: RandomNumberGenerator>(using g: inout G) -> STUNTransactionID {
        STUNTransactionID(hi: UInt32.random(in: .min ... .max, using: &g), lo: UInt64.random(in: .min ... .max, using: &g))
    }
    public static func random() -> STUNTransactionID { var g = SystemRandomNumberGenerator(); return random(using: &g) }
    public var bytes: [UInt8] { var w = ByteWriter(capacity: 12); w.u32(hi); w.u64(lo); return w.bytes }
    public var description: String { bytes.map { String($0, radix: 16) }.joined() }
}

/// Attribute type numbers.
public enum STUNAttributeType {
    public static let mappedAddress: UInt16 = 0x0001
    public static let username: UInt16 = 0x0006
    public static let messageIntegrity: UInt16 = 0x0008
    public static let errorCode: UInt16 = 0x0009
    public static let unknownAttributes: UInt16 = 0x000A
    public static let channelNumber: UInt16 = 0x000C
    public static let lifetime: UInt16 = 0x000D
    public static let xorPeerAddress: UInt16 = 0x0012
    public static let data: UInt16 = 0x0013
    public static let realm: UInt16 = 0x0014
    public static let nonce: UInt16 = 0x0015
    public static let xorRelayedAddress: UInt16 = 0x0016
    public static let requestedTransport: UInt16 = 0x0019
    public static let xorMappedAddress: UInt16 = 0x0020
    public static let priority: UInt16 = 0x0024
    public static let useCandidate: UInt16 = 0x0025
    public static let software: UInt16 = 0x8022
    public static let fingerprint: UInt16 = 0x8028
    public static let iceControlled: UInt16 = 0x8029
    public static let iceControlling: UInt16 = 0x802A
}

/// Well-known ERROR-CODE values.
public enum STUNErrorCode {
    public static let tryAlternate: UInt16 = 300
    public static let badRequest: UInt16 = 400
    public static let unauthorized: UInt16 = 401
    public static let forbidden: UInt16 = 403
    public static let unknownAttribute: UInt16 = 420
    public static let allocationMismatch: UInt16 = 437
    public static let staleNonce: UInt16 = 438
    public static let wrongCredentials: UInt16 = 441
    public static let unsupportedTransport: UInt16 = 442
    public static let allocationQuotaReached: UInt16 = 486
    public static let roleConflict: UInt16 = 487
    public static let serverError: UInt16 = 500
    public static let insufficientCapacity: UInt16 = 508
}

/// One decoded attribute. Unknown types are kept as `.other`.
public enum STUNAttribute: Equatable, Sendable {
    case mappedAddress(TransportAddress)
    case xorMappedAddress(TransportAddress)
    case xorPeerAddress(TransportAddress)
    case xorRelayedAddress(TransportAddress)
    case username(String)
    case realm(String)
    case nonce(String)
    case software(String)
    case errorCode(code: UInt16, reason: String)
    case unknownAttributes([UInt16])
    case priority(UInt32)
    case useCandidate
    case iceControlled(UInt64)
    case iceControlling(UInt64)
    case lifetime(UInt32)
    case channelNumber(UInt16)
    case requestedTransport(UInt8)
    case data([UInt8])
    case other(type: UInt16, value: [UInt8])

    public var type: UInt16 {
        typealias T = STUNAttributeType
        switch self {
        case .mappedAddress: return T.mappedAddress
        case .xorMappedAddress: return T.xorMappedAddress
        case .xorPeerAddress: return T.xorPeerAddress
        case .xorRelayedAddress: return T.xorRelayedAddress
        case .username: return T.username
        case .realm: return T.realm
        case .nonce: return T.nonce
        case .software: return T.software
        case .errorCode: return T.errorCode
        case .unknownAttributes: return T.unknownAttributes
        case .priority: return T.priority
        case .useCandidate: return T.useCandidate
        case .iceControlled: return T.iceControlled
        case .iceControlling: return T.iceControlling
        case .lifetime: return T.lifetime
        case .channelNumber: return T.channelNumber
        case .requestedTransport: return T.requestedTransport
        case .data: return T.data
        case .other(let t, _): return t
        }
    }
}

/// A STUN message (RFC 8489): header fields and attributes. MESSAGE-INTEGRITY and FINGERPRINT are
/// not attributes here: `encode` appends them, and `parse` records where they were so they can be checked.
public struct STUNMessage: Sendable {
    public static let magicCookie: UInt32 = 0x2112_A442
    public static let headerSize = 20

    public var method: UInt16
    public var messageClass: STUNClass
    public var transactionID: STUNTransactionID
    public var attributes: [STUNAttribute]

    /// The raw bytes this message was parsed from (empty when built locally).
    public private(set) var raw: [UInt8] = []
    /// Offset of the MESSAGE-INTEGRITY attribute header in `raw`, when present.
    public private(set) var integrityOffset: Int?
    /// True when `raw` carried a FINGERPRINT attribute and it matched.
    public private(set) var hasValidFingerprint = false

    public init(method: STUNMethod, messageClass: STUNClass, transactionID: STUNTransactionID = .random(), attributes: [STUNAttribute] = []) {
        self.method = method.rawValue
        self.messageClass = messageClass
        self.transactionID = transactionID
        self.attributes = attributes
    }

    /// True if the bytes look like a STUN message: top two bits zero, magic cookie, length multiple of 4.
    public static func isSTUN(_ b: ArraySlice<UInt8>) -> Bool {
        guard b.count >= headerSize else { return false }
        let s = b.startIndex
        guard b[s] & 0xC0 == 0, b[s + 4] == 0x21, b[s + 5] == 0x12, b[s + 6] == 0xA4, b[s + 7] == 0x42 else { return false }
        let len = Int(b[s + 2]) << 8 | Int(b[s + 3])
        return len % 4 == 0 && len + headerSize == b.count
    }

    /// The first attribute with the given type.
    public func attribute(_ type: UInt16) -> STUNAttribute? { attributes.first { $0.type == type } }

    public var username: String? { if case .username(let u)? = attribute(STUNAttributeType.username) { u } else { nil } }
    public var errorCode: (code: UInt16, reason: String)? {
        if case .errorCode(let c, let r)? = attribute(STUNAttributeType.errorCode) { (c, r) } else { nil }
    }
    public var xorMappedAddress: TransportAddress? {
        if case .xorMappedAddress(let a)? = attribute(STUNAttributeType.xorMappedAddress) { a } else { nil }
    }
    public var priority: UInt32? { if case .priority(let p)? = attribute(STUNAttributeType.priority) { p } else { nil } }
    public var realm: String? { if case .realm(let r)? = attribute(STUNAttributeType.realm) { r } else { nil } }
    public var nonce: String? { if case .nonce(let n)? = attribute(STUNAttributeType.nonce) { n } else { nil } }

    // MARK: encoding

    /// Encodes the message, appending MESSAGE-INTEGRITY (HMAC-SHA1 with `integrityKey`) and FINGERPRINT when asked.
    public func encode(integrityKey: [UInt8]? = nil, fingerprint: Bool = true) -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        let m = method & 0x0FFF, c = messageClass.rawValue
        let type = (m & 0x000F) | ((c & 1) << 4) | ((m & 0x0070) << 1) | ((c & 2) << 7) | ((m & 0x0F80) << 2)
        w.u16(type)
        w.u16(0)
        w.u32(Self.magicCookie)
        w.append(transactionID.bytes)
        for a in attributes { encodeAttribute(a, into: &w) }
        if let key = integrityKey {
            w.set16(at: 2, UInt16(truncatingIfNeeded: w.count - Self.headerSize + 24))
            let mac = STUNCrypto.hmacSHA1(key: key, w.bytes[...])
            w.u16(STUNAttributeType.messageIntegrity); w.u16(20); w.append(mac)
        }
        if fingerprint {
            w.set16(at: 2, UInt16(truncatingIfNeeded: w.count - Self.headerSize + 8))
            let crc = STUNCrypto.crc32(w.bytes[...]) ^ 0x5354_554E
            w.u16(STUNAttributeType.fingerprint); w.u16(4); w.u32(crc)
        }
        w.set16(at: 2, UInt16(truncatingIfNeeded: w.count - Self.headerSize))
        return w.bytes
    }

    private func encodeAttribute(_ a: STUNAttribute, into w: inout ByteWriter) {
        var v = ByteWriter(capacity: 32)
        switch a {
        case .mappedAddress(let addr): encodeAddress(addr, xor: false, into: &v)
        case .xorMappedAddress(let addr), .xorPeerAddress(let addr), .xorRelayedAddress(let addr):
            encodeAddress(addr, xor: true, into: &v)
        case .username(let s), .realm(let s), .nonce(let s), .software(let s): v.append(Array(s.utf8))
        case .errorCode(let code, let reason):
            v.u16(0); v.u8(UInt8(truncatingIfNeeded: code / 100) & 0x07); v.u8(UInt8(code % 100)); v.append(Array(reason.utf8))
        case .unknownAttributes(let types): for t in types { v.u16(t) }
        case .priority(let p): v.u32(p)
        case .useCandidate: break
        case .iceControlled(let t), .iceControlling(let t): v.u64(t)
        case .lifetime(let l): v.u32(l)
        case .channelNumber(let n): v.u16(n); v.u16(0)
        case .requestedTransport(let p): v.u8(p); v.zeros(3)
        case .data(let d): v.append(d)
        case .other(_, let value): v.append(value)
        }
        w.u16(a.type)
        w.u16(UInt16(truncatingIfNeeded: v.count))
        w.append(v.bytes)
        let pad = (4 - v.count % 4) % 4
        w.zeros(pad)
    }

    private func encodeAddress(_ a: TransportAddress, xor: Bool, into v: inout ByteWriter) {
        v.u8(0)
        v.u8(a.ip.isIPv6 ? 2 : 1)
        v.u16(xor ? a.port ^ 0x2112 : a.port)
        var ip = a.ip.bytes
        if xor {
            let mask = Self.xorMask(transactionID)
            for i in ip.indices { ip[i] ^= mask[i] }
        }
        v.append(ip)
    }

    private static func xorMask(_ id: STUNTransactionID) -> [UInt8] {
        var w = ByteWriter(capacity: 16); w.u32(magicCookie); w.append(id.bytes); return w.bytes
    }

    // MARK: parsing

    /// Parses a STUN message. Throws `WireError` on anything malformed, including a FINGERPRINT that does not match.
    /// MESSAGE-INTEGRITY is located but not checked: call `verifyIntegrity(key:)`.
    public static func parse(_ bytes: [UInt8]) throws -> STUNMessage {
        var r = ByteReader(bytes)
        let type = try r.u16("STUN message type")
        guard type & 0xC000 == 0 else { throw WireError("STUN: first two bits must be zero") }
        let length = Int(try r.u16("STUN length"))
        guard try r.u32("STUN magic cookie") == magicCookie else { throw WireError("STUN: bad magic cookie") }
        guard length % 4 == 0 else { throw WireError("STUN: length \(length) is not a multiple of 4") }
        guard length == r.remaining - 12 else { throw WireError("STUN: length \(length) does not match \(r.remaining - 12) bytes of attributes") }
        let hi = try r.u32("transaction id"), lo = try r.u64("transaction id")
        let method = (type & 0x000F) | ((type & 0x00E0) >> 1) | ((type & 0x3E00) >> 2)
        let cls = STUNClass(rawValue: ((type >> 4) & 1) | ((type >> 7) & 2)) ?? .request
        var msg = STUNMessage(method: .binding, messageClass: cls, transactionID: STUNTransactionID(hi: hi, lo: lo))
        msg.method = method
        msg.raw = bytes
        while r.remaining > 0 {
            let start = r.offset
            let t = try r.u16("attribute type")
            let len = Int(try r.u16("attribute length"))
            let value = try r.take(len, "attribute value")
            try r.skip(min((4 - len % 4) % 4, r.remaining), "attribute padding")
            if msg.hasValidFingerprint { throw WireError("STUN: attribute after FINGERPRINT") }
            switch t {
            case STUNAttributeType.messageIntegrity:
                guard len == 20 else { throw WireError("STUN: MESSAGE-INTEGRITY length \(len), expected 20") }
                if msg.integrityOffset == nil { msg.integrityOffset = start }
            case STUNAttributeType.fingerprint:
                guard len == 4 else { throw WireError("STUN: FINGERPRINT length \(len), expected 4") }
                var h = Array(bytes[0..<start])
                let adj = UInt16(start + 8 - headerSize)
                h[2] = UInt8(adj >> 8); h[3] = UInt8(truncatingIfNeeded: adj)
                var vr = ByteReader(value)
                let crc = try vr.u32()
                guard crc == STUNCrypto.crc32(h[...]) ^ 0x5354_554E else { throw WireError("STUN: FINGERPRINT mismatch") }
                msg.hasValidFingerprint = true
            default:
                if msg.integrityOffset != nil { continue }  // attributes after MESSAGE-INTEGRITY are ignored
                msg.attributes.append(try parseAttribute(type: t, value: value, id: msg.transactionID))
            }
        }
        return msg
    }

    /// Checks MESSAGE-INTEGRITY against `key` (short-term: the password bytes; long-term: `STUNCrypto.longTermKey`).
    public func verifyIntegrity(key: [UInt8]) -> Bool {
        guard let off = integrityOffset, raw.count >= off + 24 else { return false }
        var h = Array(raw[0..<off])
        let adj = UInt16(off + 24 - Self.headerSize)
        h[2] = UInt8(adj >> 8); h[3] = UInt8(truncatingIfNeeded: adj)
        let mac = STUNCrypto.hmacSHA1(key: key, h[...])
        return mac.count == 20 && mac.elementsEqual(raw[(off + 4)..<(off + 24)])
    }

    private static func parseAttribute(type t: UInt16, value: ArraySlice<UInt8>, id: STUNTransactionID) throws -> STUNAttribute {
        typealias T = STUNAttributeType
        var r = ByteReader(value)
        func text(_ what: String, max: Int) throws -> String {
            guard value.count <= max else { throw WireError("STUN: \(what) longer than \(max) bytes") }
            guard let s = String(validating: value, as: UTF8.self) else { throw WireError("STUN: \(what) is not UTF-8") }
            return s
        }
        func fixed(_ n: Int, _ what: String) throws {
            guard value.count == n else { throw WireError("STUN: \(what) length \(value.count), expected \(n)") }
        }
        switch t {
        case T.mappedAddress: return .mappedAddress(try parseAddress(value, xor: nil))
        case T.xorMappedAddress: return .xorMappedAddress(try parseAddress(value, xor: id))
        case T.xorPeerAddress: return .xorPeerAddress(try parseAddress(value, xor: id))
        case T.xorRelayedAddress: return .xorRelayedAddress(try parseAddress(value, xor: id))
        case T.username: return .username(try text("USERNAME", max: 513))
        case T.realm: return .realm(try text("REALM", max: 763))
        case T.nonce: return .nonce(try text("NONCE", max: 763))
        case T.software: return .software(try text("SOFTWARE", max: 763))
        case T.errorCode:
            guard value.count >= 4 else { throw WireError("STUN: ERROR-CODE shorter than 4 bytes") }
            _ = try r.u16()
            let cls = try r.u8() & 0x07, num = try r.u8()
            guard (3...6).contains(cls), num < 100 else { throw WireError("STUN: ERROR-CODE class \(cls) number \(num) out of range") }
            let reason = String(validating: r.rest(), as: UTF8.self) ?? ""
            return .errorCode(code: UInt16(cls) * 100 + UInt16(num), reason: reason)
        case T.unknownAttributes:
            guard value.count % 2 == 0 else { throw WireError("STUN: UNKNOWN-ATTRIBUTES length is odd") }
            var types: [UInt16] = []
            while r.remaining > 0 { types.append(try r.u16()) }
            return .unknownAttributes(types)
        case T.priority: try fixed(4, "PRIORITY"); return .priority(try r.u32())
        case T.useCandidate: try fixed(0, "USE-CANDIDATE"); return .useCandidate
        case T.iceControlled: try fixed(8, "ICE-CONTROLLED"); return .iceControlled(try r.u64())
        case T.iceControlling: try fixed(8, "ICE-CONTROLLING"); return .iceControlling(try r.u64())
        case T.lifetime: try fixed(4, "LIFETIME"); return .lifetime(try r.u32())
        case T.channelNumber: try fixed(4, "CHANNEL-NUMBER"); return .channelNumber(try r.u16())
        case T.requestedTransport: try fixed(4, "REQUESTED-TRANSPORT"); return .requestedTransport(try r.u8())
        case T.data: return .data(Array(value))
        default: return .other(type: t, value: Array(value))
        }
    }

    private static func parseAddress(_ value: ArraySlice<UInt8>, xor id: STUNTransactionID?) throws -> TransportAddress {
        var r = ByteReader(value)
        _ = try r.u8("address reserved")
        let family = try r.u8("address family")
        var port = try r.u16("address port")
        let n: Int
        switch family {
        case 1: n = 4
        case 2: n = 16
        default: throw WireError("STUN: unknown address family \(family)")
        }
        guard r.remaining == n else { throw WireError("STUN: address length \(value.count) does not match family \(family)") }
        var ip = Array(try r.take(n, "address"))
        if let id {
            port ^= 0x2112
            let mask = xorMask(id)
            for i in ip.indices { ip[i] ^= mask[i] }
        }
        guard let addr = IPAddress(bytes: ip[...]) else { throw WireError("STUN: bad address") }
        return TransportAddress(ip: addr, port: port)
    }
}
