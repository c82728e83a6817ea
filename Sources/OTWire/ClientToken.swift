import FoundationEssentials
import OTBase

/// What a client token grants, after verification.
public struct ClientToken: Sendable, Equatable {
    public var apiKey: String
    public var sessionId: String
    public var role: SessionRole
    /// Seconds since 1970.
    public var createTime: Int64
    /// Seconds since 1970.
    public var expireTime: Int64
    public var connectionData: String?
    public var initialLayoutClassList: [String]
    public var format: TokenFormat

    /// Largest `connection_data` / `initial_layout_class_list`, in characters.
    public static let maxDataCharacters = 1000
    /// Default lifetime: 24 hours.
    public static let defaultLifetime: Int64 = 24 * 3600
    /// Longest lifetime: 30 days.
    public static let maxLifetime: Int64 = 30 * 24 * 3600
    /// How far past `now + maxLifetime` a token's expiry may be and still be accepted (clock differences between
    /// the backend that minted it and this server).
    public static let expirySlack: Int64 = 3600

    public init(apiKey: String, sessionId: String, role: SessionRole = .publisher, createTime: Int64, expireTime: Int64? = nil,
                connectionData: String? = nil, initialLayoutClassList: [String] = [], format: TokenFormat = .jwt) {
        self.apiKey = apiKey; self.sessionId = sessionId; self.role = role; self.createTime = createTime
        self.expireTime = expireTime ?? createTime.addingReportingOverflow(ClientToken.defaultLifetime).partialValue
        self.connectionData = connectionData; self.initialLayoutClassList = initialLayoutClassList; self.format = format
    }

    /// Mints a token signed with `secret` (the same wire forms as the OpenTok Python SDK).
    /// Throws `invalidParameter` (1011) for oversized data, bad expiry or a session id of another project.
    public func mint(secret: String) throws -> String {
        if let d = connectionData, !ConnectionDataRules.isValid(d) {
            throw OTError(.invalidParameter, "connection data is longer than \(Self.maxDataCharacters) characters")
        }
        let classes = initialLayoutClassList.joined(separator: " ")
        guard ConnectionDataRules.isValid(classes) else {
            throw OTError(.invalidParameter, "initial layout class list is longer than \(Self.maxDataCharacters) characters")
        }
        guard (0...TokenTime.latest).contains(createTime), expireTime > createTime, expireTime - createTime <= Self.maxLifetime else {
            throw OTError(.invalidParameter, "expire time must be after now and at most 30 days ahead")
        }
        guard let sid = try? SessionID.parse(sessionId), sid.apiKey == apiKey else {
            throw OTError(.invalidParameter, "session id \(sessionId) does not belong to api key \(apiKey)")
        }
        let nonce = Int.random(in: 0..<1_000_000)
        switch format {
        case .jwt:
            var claims: [String: JSONValue] = [
                "iss": .string(apiKey), "ist": "project", "iat": .int(createTime), "exp": .int(expireTime),
                "session_id": .string(sessionId), "role": .string(role.rawValue), "scope": "session.connect",
                "nonce": .int(Int64(nonce)),
            ]
            if !classes.isEmpty { claims["initial_layout_class_list"] = .string(classes) }
            if let d = connectionData { claims["connection_data"] = .string(d) }
            return try JWT.sign(claims: claims, secret: secret)
        case .t1:
            var fields: [(String, String)] = [
                ("session_id", sessionId), ("create_time", String(createTime)), ("expire_time", String(expireTime)),
                ("role", role.rawValue), ("nonce", String(nonce)), ("initial_layout_class_list", classes),
            ]
            if let d = connectionData { fields.append(("connection_data", d)) }
            let dataString = FormEncoding.encode(fields)
            let sig = TokenCrypto.hex(TokenCrypto.hmacSHA1(key: Array(secret.utf8), Array(dataString.utf8)))
            return "T1==" + TokenCrypto.base64(Array("partner_id=\(apiKey)&sig=\(sig):\(dataString)".utf8))
        }
    }

    /// The api key a token claims to be signed for, without verifying it.
    public static func claimedAPIKey(_ token: String) -> String? {
        if token.hasPrefix("T1==") {
            guard let raw = TokenCrypto.base64Decode(String(token.dropFirst(4))),
                  let text = String(validating: raw, as: UTF8.self), let colon = text.firstIndex(of: ":") else { return nil }
            return FormEncoding.decode(String(text[..<colon]))["partner_id"]
        }
        return (try? JWT.unverifiedClaims(token)).flatMap { JWT.string($0["iss"]) }
    }

    /// Longest token accepted, in bytes: the longest valid one (1000 characters of connection data, each four
    /// UTF-8 bytes, percent-encoded in a T1 token) with room to spare.
    public static let maxTokenBytes = 32 * 1024

    /// Verifies a JWT or T1 token: signature with `secret`, expiry against `now` (seconds since 1970),
    /// and the fields. Throws `authorizationFailure` (1004) with the reason. Times must be whole seconds in range
    /// (`TokenTime`) and the expiry at most `maxLifetime` (plus `expirySlack`) after `now`.
    public static func verify(_ token: String, apiKey: String, secret: String, now: Int64) throws -> ClientToken {
        func fail(_ why: String) -> OTError { OTError(.authorizationFailure, "token refused: \(why)") }
        guard token.utf8.count <= maxTokenBytes else { throw fail("longer than \(maxTokenBytes) bytes") }
        var fields: [String: String] = [:]
        var format = TokenFormat.jwt
        var expiry: Int64?
        var created: Int64?
        if token.hasPrefix("T1==") {
            format = .t1
            guard let raw = TokenCrypto.base64Decode(String(token.dropFirst(4))),
                  let text = String(validating: raw, as: UTF8.self), let colon = text.firstIndex(of: ":") else {
                throw fail("malformed T1 token")
            }
            let meta = FormEncoding.decode(String(text[..<colon]))
            let dataString = String(text[text.index(after: colon)...])
            guard meta["partner_id"] == apiKey else { throw fail("token is for another api key") }
            guard let sig = meta["sig"] else { throw fail("T1 token has no signature") }
            let expected = TokenCrypto.hex(TokenCrypto.hmacSHA1(key: Array(secret.utf8), Array(dataString.utf8)))
            guard TokenCrypto.equal(Array(sig.lowercased().utf8), Array(expected.utf8)) else { throw fail("bad signature") }
            fields = FormEncoding.decode(dataString)
            guard let e = fields["expire_time"] else { throw fail("no expiry") }
            guard let t = TokenTime.seconds(e) else { throw fail("expire_time is not a time") }
            expiry = t
            if let c = fields["create_time"] {
                guard let t = TokenTime.seconds(c) else { throw fail("create_time is not a time") }
                created = t
            }
        } else {
            let claims: [String: JSONValue]
            do { claims = try JWT.verify(token, secret: secret) } catch { throw fail("\(error)") }
            guard JWT.string(claims["iss"]) == apiKey else { throw fail("token is for another api key") }
            if let ist = claims["ist"]?.stringValue, ist != "project" { throw fail("ist must be project") }
            for (k, v) in claims {
                if let s = JWT.string(v) { fields[k] = s }
            }
            for name in ["exp", "expire_time", "iat", "create_time"] where claims[name] != nil {
                guard JWT.seconds(claims[name]) != nil else { throw fail("\(name) is not a time") }
            }
            guard let e = JWT.seconds(claims["exp"] ?? claims["expire_time"]) else { throw fail("no expiry") }
            expiry = e
            created = JWT.seconds(claims["create_time"] ?? claims["iat"])
        }
        guard let sid = fields["session_id"], !sid.isEmpty else { throw fail("no session_id") }
        guard let exp = expiry else { throw fail("no expiry") }
        guard exp > now else { throw fail("expired") }
        guard exp - now <= maxLifetime + expirySlack else { throw fail("expires more than 30 days ahead") }
        let roleName = fields["role"] ?? "publisher"
        guard let role = SessionRole(rawValue: roleName) else { throw fail("unknown role \(roleName.prefix(40))") }
        let data = fields["connection_data"]
        if let d = data, !ConnectionDataRules.isValid(d) { throw fail("connection data longer than \(maxDataCharacters) characters") }
        let classes = (fields["initial_layout_class_list"] ?? "").split(separator: " ").map(String.init)
        return ClientToken(apiKey: apiKey, sessionId: sid, role: role, createTime: created ?? now, expireTime: exp,
                           connectionData: data, initialLayoutClassList: classes, format: format)
    }
}
