import OTBase
import OTWire

/// One parsed ICE server URL (RFC 7064 `stun:`, RFC 7065 `turn:`/`turns:`): `stun:HOST[:PORT]`,
/// `turn:HOST[:PORT][?transport=udp|tcp]`, `turns:HOST[:PORT][?transport=tcp]` (TURN over TLS). HOST is a DNS
/// name (resolved when used, off the IO threads), an IPv4 address or a bracketed IPv6 address. The port defaults to
/// 3478, 5349 for `turns:`.
public struct ICEServerURL: Sendable, Equatable {
    public enum Scheme: String, Sendable { case stun, turn, turns }
    public var scheme: Scheme
    /// The host as written (brackets of an IPv6 address removed).
    public var host: String
    public var port: UInt16
    /// How a TURN server is reached (`?transport=`; UDP by default, TLS for `turns:`). Always UDP for STUN.
    public var transport: TURNClient.ServerTransport

    /// The server's address when the host is an IP literal (nil for a name: resolve it).
    public var address: TransportAddress? { IPAddress(host).map { TransportAddress(ip: $0, port: port) } }
    public var isTURN: Bool { scheme != .stun }

    /// Parses a URL; throws `.invalidParameter` naming what is wrong (never traps).
    public init(parsing url: String) throws {
        func bad(_ why: String) -> OTError { OTError(.invalidParameter, "ICE server URL \"\(url.prefix(200))\": \(why)") }
        guard let colon = url.firstIndex(of: ":") else { throw bad("expected stun:, turn: or turns:") }
        let schemeText = url[..<colon].lowercased()
        guard let scheme = Scheme(rawValue: schemeText) else {
            throw bad(schemeText == "stuns" ? "STUN over TLS (stuns:) is not supported" : "expected stun:, turn: or turns:")
        }
        var rest = url[url.index(after: colon)...]
        var transport: TURNClient.ServerTransport = scheme == .turns ? .tls : .udp
        if let q = rest.firstIndex(of: "?") {
            guard scheme != .stun else { throw bad("stun: URLs take no query") }
            switch (scheme, rest[rest.index(after: q)...].lowercased()) {
            case (.turn, "transport=udp"): transport = .udp
            case (.turn, "transport=tcp"): transport = .tcp
            case (.turns, "transport=tcp"): transport = .tls
            case (.turns, _): throw bad("the query of a turns: URL can only be ?transport=tcp")
            default: throw bad("the query must be ?transport=udp or ?transport=tcp")
            }
            rest = rest[..<q]
        }
        if rest.hasPrefix("//") { throw bad("no // after the scheme (stun:host:port)") }
        let (host, port) = try HostPort.parse(rest, defaultPort: scheme == .turns ? 5349 : 3478, context: bad)
        self.scheme = scheme
        self.host = host.lowercased() == "localhost" ? "localhost" : host
        self.port = port
        self.transport = transport
    }
}

/// STUN and TURN servers with their names resolved: what one media connection uses.
public struct ResolvedICEServers: Sendable {
    /// Servers to gather server-reflexive candidates from (`stun:` and UDP `turn:` servers).
    public var stun: [TransportAddress] = []
    /// TURN servers with their credentials.
    public var turn: [TURNClient.Config] = []
    /// Names that could not be resolved, with the reason (their servers are left out).
    public var failures: [String] = []
    public init() {}

    /// The servers of `urls` (each with the given credentials), with host names looked up in `addresses` (names
    /// missing there are left out; IP literals need no lookup).
    public mutating func add(urls: [String], username: String?, credential: String?, addresses: [String: [IPAddress]]) {
        for u in urls {
            guard let p = try? ICEServerURL(parsing: u) else { continue }
            let ips = p.address.map { [$0.ip] } ?? addresses[p.host.lowercased()] ?? []
            for ip in ips where p.transport == .udp {
                let a = TransportAddress(ip: ip, port: p.port)
                if !stun.contains(a) { stun.append(a) }
            }
            // One allocation per TURN server, at its first IPv4 address if it has one (host sockets are IPv4).
            guard p.isTURN, let ip = ips.first(where: { !$0.isIPv6 }) ?? ips.first else { continue }
            var c = TURNClient.Config(server: TransportAddress(ip: ip, port: p.port), username: username ?? "", password: credential ?? "")
            c.transport = p.transport
            c.serverName = p.host
            turn.append(c)
        }
    }
}
