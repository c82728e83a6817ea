import OTBase

/// REST API authentication: the `X-OPENTOK-AUTH` JWT of the server SDKs.
public enum ProjectAuth {
    /// Mints a project JWT as the server SDKs do.
    public static func mint(apiKey: String, secret: String, now: Int64, lifetime: Int64 = 180) throws -> String {
        try JWT.sign(claims: ["ist": "project", "iss": .string(apiKey), "iat": .int(now), "exp": .int(now + lifetime),
                              "jti": .string(TokenCrypto.hex(TokenCrypto.randomBytes(8)))], secret: secret)
    }

    /// Checks signature, `ist == "project"`, `iss == apiKey` and `exp` (with `leeway` seconds).
    public static func verify(_ token: String, apiKey: String, secret: String, now: Int64, leeway: Int64 = 30) throws {
        let claims = try JWT.verify(token, secret: secret)
        guard claims["ist"]?.stringValue == "project" else { throw WireError("ist must be project") }
        guard JWT.string(claims["iss"]) == apiKey else { throw WireError("iss is not this project") }
        guard claims["session_id"] == nil, claims["scope"]?.stringValue != "session.connect" else {
            throw WireError("a client token is not a project token")
        }
        for name in ["exp", "iat", "nbf"] where claims[name] != nil {
            guard JWT.seconds(claims[name]) != nil else { throw WireError("\(name) is not a time") }
        }
        guard let exp = JWT.seconds(claims["exp"]) else { throw WireError("no exp") }
        guard exp > now - leeway else { throw WireError("expired") }
    }
}
