import OTBase

/// An ICE candidate as written in SDP (`a=candidate:` / trickled `candidate:` strings, RFC 8839).
public struct SDPCandidate: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable { case host, srflx, prflx, relay }

    public var foundation: String
    public var component: UInt16
    /// "udp" or "tcp" (lower-cased).
    public var transport: String
    public var priority: UInt32
    public var address: TransportAddress
    public var kind: Kind
    public var relatedAddress: TransportAddress?
    /// For TCP candidates: active, passive or so.
    public var tcpType: String?
    /// Other extension attributes in order (e.g. generation, ufrag, network-id).
    public var extensions: [(String, String)]

    public init(foundation: String, component: UInt16 = 1, transport: String = "udp", priority: UInt32,
                address: TransportAddress, kind: Kind, relatedAddress: TransportAddress? = nil,
                tcpType: String? = nil, extensions: [(String, String)] = []) {
        self.foundation = foundation; self.component = component; self.transport = transport
        self.priority = priority; self.address = address; self.kind = kind
        self.relatedAddress = relatedAddress; self.tcpType = tcpType; self.extensions = extensions
    }

    public static func == (a: SDPCandidate, b: SDPCandidate) -> Bool {
        a.foundation == b.foundation && a.component == b.component && a.transport == b.transport
            && a.priority == b.priority && a.address == b.address && a.kind == b.kind
            && a.relatedAddress == b.relatedAddress && a.tcpType == b.tcpType
            && a.extensions.map { $0.0 + " " + $0.1 } == b.extensions.map { $0.0 + " " + $0.1 }
    }
    public func hash(into h: inout Hasher) { h.combine(foundation); h.combine(address); h.combine(priority) }

    /// Whether a `candidate:` line (with or without `a=`) hides its address behind an mDNS name (`<uuid>.local`,
    /// what browsers signal for host candidates). Such candidates are not resolved: they are left out, and the
    /// peer is learnt as peer-reflexive when its checks arrive (RFC 8445 §7.3.1.3).
    public static func isMDNS(_ line: some StringProtocol) -> Bool {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        return fields.count > 4 && fields[4].lowercased().hasSuffix(".local")
    }

    /// Parses `candidate:...` (with or without the `a=` prefix).
    public init(parsing line: String) throws {
        var s = Substring(line)
        if s.hasPrefix("a=") { s = s.dropFirst(2) }
        guard s.hasPrefix("candidate:") else { throw WireError("SDP candidate: must start with \"candidate:\"") }
        let f = s.dropFirst("candidate:".count).split(separator: " ", omittingEmptySubsequences: true)
        guard f.count >= 8 else { throw WireError("SDP candidate: \(f.count) fields, need at least 8") }
        guard !f[0].isEmpty, f[0].count <= 32 else { throw WireError("SDP candidate: bad foundation") }
        guard let comp = UInt16(f[1]), comp >= 1 else { throw WireError("SDP candidate: bad component id \"\(f[1])\"") }
        let transport = f[2].lowercased()
        guard transport == "udp" || transport == "tcp" else { throw WireError("SDP candidate: unsupported transport \"\(f[2])\"") }
        guard let prio = UInt32(f[3]) else { throw WireError("SDP candidate: bad priority \"\(f[3])\"") }
        guard let ip = IPAddress(f[4]) else { throw WireError("SDP candidate: bad address \"\(f[4])\" (mDNS names are not supported)") }
        guard let port = UInt16(f[5]) else { throw WireError("SDP candidate: bad port \"\(f[5])\"") }
        guard f[6] == "typ" else { throw WireError("SDP candidate: expected \"typ\", got \"\(f[6])\"") }
        guard let kind = Kind(rawValue: String(f[7])) else { throw WireError("SDP candidate: unknown type \"\(f[7])\"") }
        var rel: IPAddress?, relPort: UInt16?, tcpType: String?
        var ext: [(String, String)] = []
        var i = 8
        while i < f.count {
            guard i + 1 < f.count else { throw WireError("SDP candidate: extension \"\(f[i])\" has no value") }
            let k = f[i], v = f[i + 1]
            switch k {
            case "raddr": guard let a = IPAddress(v) else { throw WireError("SDP candidate: bad raddr \"\(v)\"") }; rel = a
            case "rport": guard let p = UInt16(v) else { throw WireError("SDP candidate: bad rport \"\(v)\"") }; relPort = p
            case "tcptype": tcpType = String(v)
            default: ext.append((String(k), String(v)))
            }
            i += 2
        }
        self.init(foundation: String(f[0]), component: comp, transport: transport, priority: prio,
                  address: TransportAddress(ip: ip, port: port), kind: kind,
                  relatedAddress: rel.map { TransportAddress(ip: $0, port: relPort ?? 0) }, tcpType: tcpType, extensions: ext)
    }

    /// `candidate:...` without the `a=` prefix.
    public var description: String {
        var s = "candidate:\(foundation) \(component) \(transport) \(priority) \(address.ip) \(address.port) typ \(kind.rawValue)"
        if let r = relatedAddress { s += " raddr \(r.ip) rport \(r.port)" }
        if let t = tcpType { s += " tcptype \(t)" }
        for (k, v) in extensions { s += " \(k) \(v)" }
        return s
    }

    /// RFC 8445 §5.1.2.1 priority: (2^24)·type preference + (2^8)·local preference + (256 − component).
    public static func priority(kind: Kind, localPreference: UInt16, component: UInt16 = 1) -> UInt32 {
        let typePref: UInt32 = switch kind { case .host: 126; case .prflx: 110; case .srflx: 100; case .relay: 0 }
        return typePref << 24 | UInt32(localPreference) << 8 | UInt32(256 - min(component, 256))
    }
}
