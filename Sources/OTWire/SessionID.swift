import OTBase

/// Session ids in the observed OpenTok layout:
/// `"1_" + base64url_nopad("1~<apiKey>~<location>~<createTimeMs>~<random>~<flags>~~")`.
/// The api key sits at field 1; flags are `R` (routed) or `P` (relayed), plus `E` with end-to-end encryption.
public struct SessionID: Sendable, Equatable, Hashable {
    public var apiKey: String
    public var location: String
    public var createTimeMillis: Int64
    public var random: String
    public var relayed: Bool
    public var e2ee: Bool

    public init(apiKey: String, location: String = "", createTimeMillis: Int64, random: String? = nil, relayed: Bool = false, e2ee: Bool = false) {
        self.apiKey = apiKey; self.location = location; self.createTimeMillis = createTimeMillis
        self.random = random ?? TokenCrypto.hex(TokenCrypto.randomBytes(12))
        self.relayed = relayed; self.e2ee = e2ee
    }

    /// The id string (only `[A-Za-z0-9_-]`).
    public var string: String {
        let flags = (relayed ? "P" : "R") + (e2ee ? "E" : "")
        let inner = "1~\(apiKey)~\(location)~\(createTimeMillis)~\(random)~\(flags)~~"
        return "1_" + TokenCrypto.base64url(Array(inner.utf8))
    }

    /// Parses an id made by `string`; throws `invalidSession` (1005) otherwise.
    public static func parse(_ s: String) throws -> SessionID {
        func bad(_ why: String) -> OTError { OTError(.invalidSession, "invalid session id: \(why)") }
        guard s.utf8.count <= 255, s.hasPrefix("1_") else { throw bad("must start with 1_") }
        guard let raw = TokenCrypto.base64Decode(String(s.dropFirst(2))), let text = String(validating: raw, as: UTF8.self) else {
            throw bad("not base64url")
        }
        let f = text.split(separator: "~", omittingEmptySubsequences: false).map(String.init)
        guard f.count >= 6, f[0] == "1", !f[1].isEmpty, let t = Int64(f[3]) else { throw bad("wrong fields") }
        return SessionID(apiKey: f[1], location: f[2], createTimeMillis: t, random: f[4], relayed: f[5].hasPrefix("P"), e2ee: f[5].contains("E"))
    }
}
