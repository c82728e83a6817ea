import FoundationEssentials
import OTBase
import OTTransport
import OTWire

/// The STUN/TURN servers a session server hands each client in `connected` (`ot-server --ice-server URL`,
/// `--turn-secret SECRET`), so that clients behind NATs need no configuration, as OpenTok gives its clients TURN
/// credentials. TURN credentials follow the shared-secret scheme coturn implements (`use-auth-secret`,
/// draft-uberti-behave-turn-rest-00): username `<expiry>:<connectionId>` (expiry in seconds since 1970),
/// password base64(HMAC-SHA1(secret, username)); each connection gets its own, valid for `credentialLifetime`.
public struct ICEServerPolicy: Sendable, Equatable {
    /// `stun:`, `turn:` and `turns:` URLs (names are resolved by the clients).
    public var urls: [String]
    /// coturn's `static-auth-secret`; needed when `urls` has a TURN server.
    public var turnSecret: String?
    /// How long a connection's TURN credentials are valid (coturn refuses allocations and refreshes after that; a
    /// client that reconnects gets new ones).
    public var credentialLifetime: Duration

    public init(urls: [String] = [], turnSecret: String? = nil, credentialLifetime: Duration = .seconds(86_400)) {
        self.urls = urls; self.turnSecret = turnSecret; self.credentialLifetime = credentialLifetime
    }

    /// The range of `credentialLifetime`, in seconds: 1 minute to 30 days.
    public static let credentialLifetimeSeconds: ClosedRange<Int64> = 60...(30 * 86_400)

    /// Throws `.invalidParameter` for a URL clients would refuse, a TURN URL without a secret, an empty secret or
    /// a lifetime outside `credentialLifetimeSeconds`; messages name the settings as `name` calls them (a C member,
    /// an `ot-server` flag).
    public func validate(naming name: (String) -> String = { $0 }) throws {
        var turn = false
        for u in urls { turn = try ICEServerURL(parsing: u).isTURN || turn }
        if turn && (turnSecret ?? "").isEmpty {
            throw OTError(.invalidParameter, "TURN servers need the shared secret of their use-auth-secret (\(name("turnSecret")))")
        }
        if let s = turnSecret, s.isEmpty || s.utf8.count > 1024 { throw OTError(.invalidParameter, "\(name("turnSecret")) must be 1 to 1024 bytes") }
        try SettingsRange.seconds(credentialLifetime, Self.credentialLifetimeSeconds, name("credentialLifetime"))
    }

    /// What one connection gets: the STUN URLs, then the TURN URLs with credentials for it (none when no URL is set).
    public func servers(connectionId: String, nowMillis: Int64) -> [ICEServerInfo] {
        let parsed = urls.compactMap { u in (try? ICEServerURL(parsing: u)).map { (u, $0) } }
        var out: [ICEServerInfo] = []
        let stun = parsed.filter { !$0.1.isTURN }.map(\.0)
        if !stun.isEmpty { out.append(ICEServerInfo(urls: stun)) }
        let turn = parsed.filter { $0.1.isTURN }.map(\.0)
        if !turn.isEmpty, let secret = turnSecret {
            let c = Self.credentials(secret: secret, connectionId: connectionId,
                                     expiry: nowMillis / 1000 + Int64(credentialLifetime.components.seconds))
            out.append(ICEServerInfo(urls: turn, username: c.username, credential: c.password))
        }
        return out
    }

    /// coturn's use-auth-secret credentials: username `<expiry>:<user>`, password base64(HMAC-SHA1(secret, username)).
    public static func credentials(secret: String, connectionId: String, expiry: Int64) -> (username: String, password: String) {
        let username = "\(expiry):\(connectionId)"
        return (username, Data(TokenCrypto.hmacSHA1(key: Array(secret.utf8), Array(username.utf8))).base64EncodedString())
    }
}
