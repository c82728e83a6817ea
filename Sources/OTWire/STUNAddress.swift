#if canImport(Glibc)
import Glibc
#endif
import OTBase

/// An IPv4 or IPv6 address, stored in network byte order.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(UInt32)
    case v6(UInt64, UInt64)

    /// Parses dotted-quad IPv4 or textual IPv6 (RFC 4291; an optional `%zone` is ignored).
    public init?(_ text: some StringProtocol) {
        var s = String(text)
        if s.hasPrefix("[") && s.hasSuffix("]") { s = String(s.dropFirst().dropLast()) }
        if let pct = s.firstIndex(of: "%") { s = String(s[..<pct]) }
        if s.contains(":") {
            var a6 = in6_addr()
            guard inet_pton(AF_INET6, s, &a6) == 1 else { return nil }
            let b = withUnsafeBytes(of: a6) { Array($0) }
            self.init(bytes: b[...])
        } else {
            var a4 = in_addr()
            guard inet_pton(AF_INET, s, &a4) == 1 else { return nil }
            self = .v4(UInt32(bigEndian: a4.s_addr))
        }
    }

    /// From 4 or 16 raw bytes.
    public init?(bytes: ArraySlice<UInt8>) {
        let b = Array(bytes)
        switch b.count {
        case 4: self = .v4(b.reduce(0) { $0 << 8 | UInt32($1) })
        case 16:
            let hi = b[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let lo = b[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            self = .v6(hi, lo)
        default: return nil
        }
    }

    /// The raw 4 or 16 bytes.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 16)
        switch self {
        case .v4(let a): w.u32(a)
        case .v6(let hi, let lo): w.u64(hi); w.u64(lo)
        }
        return w.bytes
    }

    public var isIPv6: Bool { if case .v6 = self { true } else { false } }

    public var isLoopback: Bool {
        switch self {
        case .v4(let a): a >> 24 == 127
        case .v6(let hi, let lo): hi == 0 && lo == 1
        }
    }

    /// Private or link-local: RFC 1918, 169.254/16, 100.64/10 (CGN), IPv6 ULA fc00::/7 and link-local fe80::/10.
    /// These are what the "filter out LAN candidates" setting leaves out.
    public var isLAN: Bool {
        switch self {
        case .v4(let a):
            return a >> 24 == 10 || a >> 20 == 0xAC1 || a >> 16 == 0xC0A8 || a >> 16 == 0xA9FE || a >> 22 == (100 << 2 | 1)
        case .v6(let hi, _):
            return hi >> 57 == 0x7E || hi >> 54 == 0x3FA
        }
    }

    public var description: String {
        var buf = [CChar](repeating: 0, count: 64)
        switch self {
        case .v4(let a):
            var a4 = in_addr(s_addr: a.bigEndian)
            _ = inet_ntop(AF_INET, &a4, &buf, 64)
        case .v6:
            var a6 = in6_addr()
            let b = bytes
            withUnsafeMutableBytes(of: &a6) { for i in 0..<16 { $0[i] = b[i] } }
            _ = inet_ntop(AF_INET6, &a6, &buf, 64)
        }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An IP address and UDP/TCP port.
public struct TransportAddress: Hashable, Sendable, CustomStringConvertible {
    public var ip: IPAddress
    public var port: UInt16
    public init(ip: IPAddress, port: UInt16) { self.ip = ip; self.port = port }
    /// Parses "1.2.3.4:5678" or "[::1]:5678".
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]),
              let ip = IPAddress(text[..<colon]) else { return nil }
        self.init(ip: ip, port: port)
    }
    public var description: String { ip.isIPv6 ? "[\(ip)]:\(port)" : "\(ip):\(port)" }
}
