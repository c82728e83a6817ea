import OTBase
import OTWire

/// An api key and its secret.
public struct Project: Sendable, Equatable {
    public var apiKey: String
    public var secret: String
    public init(apiKey: String, secret: String) { self.apiKey = apiKey; self.secret = secret }

    /// A new random project: numeric api key, 40 hex digit secret (never ends in `.word`).
    public static func generate() -> Project {
        let key = String(10_000_000 + Int.random(in: 0..<90_000_000))
        return Project(apiKey: key, secret: TokenCrypto.hex(TokenCrypto.randomBytes(20)))
    }

    /// Parses `KEY:SECRET` (see `init(apiKey:validatingSecret:)`).
    public static func parse(_ s: String) throws -> Project {
        guard let colon = s.firstIndex(of: ":") else { throw OTError(.invalidParameter, "project must be KEY:SECRET") }
        return try Project(apiKey: String(s[..<colon]), validatingSecret: String(s[s.index(after: colon)...]))
    }

    /// A project whose key is 1 to 64 of `[A-Za-z0-9_-]` and whose secret is 1 to 256 bytes without control
    /// characters; refuses secrets the SDKs would treat as Vonage keys (ending in `.word`). Throws 1011.
    public init(apiKey key: String, validatingSecret secret: String) throws {
        guard (1...64).contains(key.utf8.count), key.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A)
                || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }),
              (1...256).contains(secret.utf8.count), secret.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
            throw OTError(.invalidParameter, "project must be KEY:SECRET with a key of 1 to 64 of [A-Za-z0-9_-] and a secret of 1 to 256 bytes")
        }
        if let dot = secret.lastIndex(of: "."), secret[secret.index(after: dot)...].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
            throw OTError(.invalidParameter, "a secret ending in .word makes the SDKs switch to Vonage mode; use hex")
        }
        self.init(apiKey: key, secret: secret)
    }
}
