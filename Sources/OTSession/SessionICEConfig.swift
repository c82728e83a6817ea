import OTBase
import OTTransport
import OTWire

/// A custom ICE server (as an entry of OTSessionICEConfig's custom servers): one or more `stun:` / `turn:` URLs
/// sharing a username and credential (the credential is used by TURN only).
public struct IceServer: Sendable, Equatable {
    public var urls: [String]
    public var username: String?
    public var credential: String?
    public init(urls: [String], username: String? = nil, credential: String? = nil) { self.urls = urls; self.username = username; self.credential = credential }
}

/// One parsed ICE server URL (RFC 7064 `stun:`, RFC 7065 `turn:`): `stun:HOST[:PORT]`,
/// `turn:HOST[:PORT][?transport=udp|tcp]`. HOST is an IPv4 address, a bracketed IPv6 address or `localhost`
/// (host names are not resolved, as for the session server URL). The port defaults to 3478.
public struct ICEServerURL: Sendable, Equatable {
    public enum Scheme: String, Sendable { case stun, turn }
    public var scheme: Scheme
    public var address: TransportAddress
    /// How a TURN server is reached (`?transport=`; UDP by default). Always UDP for STUN.
    public var transport: TURNClient.ServerTransport

    /// Parses a URL; throws `.invalidParameter` naming what is wrong (never traps).
    public init(parsing url: String) throws {
        func bad(_ why: String) -> OTError { OTError(.invalidParameter, "ICE server URL \"\(url.prefix(200))\": \(why)") }
        guard let colon = url.firstIndex(of: ":") else { throw bad("expected stun: or turn:") }
        let schemeText = url[..<colon].lowercased()
        guard let scheme = Scheme(rawValue: schemeText) else {
            throw bad(schemeText == "stuns" || schemeText == "turns" ? "TLS (stuns:/turns:) is not supported" : "expected stun: or turn:")
        }
        var rest = url[url.index(after: colon)...]
        var transport = TURNClient.ServerTransport.udp
        if let q = rest.firstIndex(of: "?") {
            guard scheme == .turn else { throw bad("stun: URLs take no query") }
            switch rest[rest.index(after: q)...].lowercased() {
            case "transport=udp": transport = .udp
            case "transport=tcp": transport = .tcp
            default: throw bad("the query must be ?transport=udp or ?transport=tcp")
            }
            rest = rest[..<q]
        }
        if rest.hasPrefix("//") { throw bad("no // after the scheme (stun:host:port)") }
        var hostText: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("unclosed [ in the IPv6 address") }
            hostText = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("expected :port after ]") }
                portText = after.dropFirst()
            }
        } else {
            let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw bad("an IPv6 address must be in brackets") }
            hostText = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
        }
        guard !hostText.isEmpty else { throw bad("no host") }
        var port: UInt16 = 3478
        if let portText {
            guard let p = UInt16(portText), p > 0 else { throw bad("bad port") }
            port = p
        }
        let ip: IPAddress
        if hostText.lowercased() == "localhost" { ip = .v4(0x7F00_0001) } else {
            guard let parsed = IPAddress(String(hostText)) else { throw bad("the host must be an IP address or localhost (names are not resolved)") }
            ip = parsed
        }
        self.scheme = scheme
        self.address = TransportAddress(ip: ip, port: port)
        self.transport = transport
    }
}

/// ICE settings of a session (as OTSessionICEConfig): custom STUN/TURN servers, the transport policy, which
/// servers to use, and whether LAN (private) host candidates are signalled.
public struct SessionICEConfig: Sendable, Equatable {
    /// Which candidates are used (OTSessionICETransportPolicy).
    public enum TransportPolicy: Sendable, Equatable {
        /// Host, server-reflexive and relayed candidates.
        case all
        /// Relayed (TURN) candidates only: needs a TURN server.
        case relay
    }

    /// Which ICE servers are used (OTSessionICEIncludeServers).
    public enum IncludeServers: Sendable, Equatable {
        /// The platform's ICE servers and the custom ones. The session server (`ot-server`) provides none, so
        /// today this is the custom servers.
        case all
        /// Only the custom servers (the seeds' `useCustomTurnOnly`).
        case custom
    }

    /// Custom servers, added with `addICEServer` (which validates them).
    public private(set) var customServers: [IceServer] = []
    public var transportPolicy: TransportPolicy
    public var includeServers: IncludeServers
    /// Host candidates with private or link-local addresses (RFC 1918, 169.254/16, fc00::/7, fe80::/10) are not
    /// signalled; their sockets still serve as bases of server-reflexive and relayed candidates.
    public var filterOutLanCandidates: Bool

    public init(transportPolicy: TransportPolicy = .all, includeServers: IncludeServers = .all, filterOutLanCandidates: Bool = false) {
        self.transportPolicy = transportPolicy; self.includeServers = includeServers; self.filterOutLanCandidates = filterOutLanCandidates
    }

    /// A config with these custom servers; throws `.invalidParameter` for a URL `ICEServerURL` does not accept.
    public init(customServers: [IceServer], transportPolicy: TransportPolicy = .all, includeServers: IncludeServers = .all,
                filterOutLanCandidates: Bool = false) throws {
        self.init(transportPolicy: transportPolicy, includeServers: includeServers, filterOutLanCandidates: filterOutLanCandidates)
        for s in customServers { try add(s) }
    }

    /// Adds a custom server (OTSessionICEConfig addICEServerWithURL:userName:credential:error:).
    /// Throws `.invalidParameter` for a URL `ICEServerURL` does not accept.
    public mutating func addICEServer(url: String, username: String? = nil, credential: String? = nil) throws {
        try add(IceServer(urls: [url], username: username, credential: credential))
    }

    private mutating func add(_ s: IceServer) throws {
        guard !s.urls.isEmpty else { throw OTError(.invalidParameter, "an ICE server needs at least one URL") }
        for u in s.urls { _ = try ICEServerURL(parsing: u) }
        customServers.append(s)
    }

    /// The STUN servers to gather server-reflexive candidates from: `stun:` URLs and UDP `turn:` servers
    /// (a TURN server answers Binding requests too, as browsers use it).
    public var stunServers: [TransportAddress] {
        var out: [TransportAddress] = []
        for s in customServers {
            for u in s.urls {
                guard let p = try? ICEServerURL(parsing: u), p.transport == .udp, !out.contains(p.address) else { continue }
                out.append(p.address)
            }
        }
        return out
    }

    /// The TURN servers with their credentials, each reached over UDP or TCP as its URL says (the relayed
    /// addresses are UDP either way).
    public var turnServers: [TURNClient.Config] {
        var out: [TURNClient.Config] = []
        for s in customServers {
            for u in s.urls {
                guard let p = try? ICEServerURL(parsing: u), p.scheme == .turn else { continue }
                var c = TURNClient.Config(server: p.address, username: s.username ?? "", password: s.credential ?? "")
                c.transport = p.transport
                out.append(c)
            }
        }
        return out
    }
}
