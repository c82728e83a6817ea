import OTBase
import OTTransport
import OTWire

/// An ICE server (an entry of OTSessionICEConfig's custom servers, or one the session server provides): one or more
/// `stun:` / `turn:` / `turns:` URLs sharing a username and credential (the credential is used by TURN only).
public struct IceServer: Sendable, Equatable {
    public var urls: [String]
    public var username: String?
    public var credential: String?
    public init(urls: [String], username: String? = nil, credential: String? = nil) { self.urls = urls; self.username = username; self.credential = credential }
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
        /// The servers the session server provides in `connected` (`ot-server --ice-server`, with time-limited TURN
        /// credentials) and the custom ones.
        case all
        /// Only the custom servers (the seeds' `useCustomTurnOnly`): the session server's are ignored.
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

    /// The STUN servers to gather server-reflexive candidates from: `stun:` URLs and UDP `turn:` servers (a TURN
    /// server answers Binding requests too, as browsers use it). IP literals only: names are resolved by the session
    /// (`servers(adding:addresses:)`).
    public var stunServers: [TransportAddress] { servers(adding: [], addresses: [:]).stun }

    /// The TURN servers with their credentials, each reached over UDP, TCP or TLS as its URL says (the relayed
    /// addresses are UDP either way). IP literals only, as `stunServers`.
    public var turnServers: [TURNClient.Config] { servers(adding: [], addresses: [:]).turn }

    /// The host names of the custom servers' URLs (lowercased), which need resolving.
    public var hostNames: Set<String> { Self.hostNames(customServers) }

    static func hostNames(_ servers: [IceServer]) -> Set<String> {
        var names = Set<String>()
        for s in servers {
            for u in s.urls { if let p = try? ICEServerURL(parsing: u), p.address == nil { names.insert(p.host.lowercased()) } }
        }
        return names
    }

    /// The servers a media connection uses: `provided` (the session server's) when `includeServers` is `.all`, then
    /// the custom ones, with names looked up in `addresses`.
    public func servers(adding provided: [IceServer], addresses: [String: [IPAddress]]) -> ResolvedICEServers {
        var r = ResolvedICEServers()
        for s in (includeServers == .all ? provided : []) + customServers {
            r.add(urls: s.urls, username: s.username, credential: s.credential, addresses: addresses)
        }
        return r
    }
}
