import FoundationEssentials
import OTBase

/// JSON Web Tokens signed with HS256 (RFC 7519 / 7515).
public enum JWT {
    /// Signs `claims` (a JSON object) with HMAC-SHA256.
    public static func sign(claims: [String: JSONValue], secret: String) throws -> String {
        let header = #"{"alg":"HS256","typ":"JWT"}"#
        let body = JSONValue.object(claims).serialized()
        let input = TokenCrypto.base64url(Array(header.utf8)) + "." + TokenCrypto.base64url(body)
        let sig = TokenCrypto.hmacSHA256(key: Array(secret.utf8), Array(input.utf8))
        return input + "." + TokenCrypto.base64url(sig)
    }

    /// The claims of a token without checking anything (to find which key should verify it).
    public static func unverifiedClaims(_ token: String) throws -> [String: JSONValue] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw WireError("JWT must have 3 parts") }
        guard let raw = TokenCrypto.base64Decode(String(parts[1])),
              let claims = (try? JSONValue.parse(raw))?.objectValue else {
            throw WireError("JWT claims are not a JSON object")
        }
        return claims
    }

    /// Verifies the HS256 signature and returns the claims.
    public static func verify(_ token: String, secret: String) throws -> [String: JSONValue] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw WireError("JWT must have 3 parts") }
        guard let hraw = TokenCrypto.base64Decode(String(parts[0])),
              let header = (try? JSONValue.parse(hraw))?.objectValue else {
            throw WireError("JWT header is not a JSON object")
        }
        guard header["alg"]?.stringValue == "HS256" else { throw WireError("JWT alg must be HS256") }
        guard let sig = TokenCrypto.base64Decode(String(parts[2])) else { throw WireError("JWT signature is not base64url") }
        let input = Array((parts[0] + "." + parts[1]).utf8)
        guard TokenCrypto.equal(sig, TokenCrypto.hmacSHA256(key: Array(secret.utf8), input)) else {
            throw WireError("JWT signature does not match")
        }
        return try unverifiedClaims(token)
    }

    /// A time claim (`exp`, `iat`, ...) as whole seconds since 1970 (see `TokenTime`); nil when absent, not a number
    /// or out of range.
    public static func seconds(_ v: JSONValue?) -> Int64? { TokenTime.seconds(v) }

    /// A claim as a string (a number is printed as an integer when whole).
    public static func string(_ v: JSONValue?) -> String? {
        switch v {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        default: return nil
        }
    }
}
