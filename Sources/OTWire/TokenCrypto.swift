import COpenSSL
import Dispatch
import FoundationEssentials
import OTBase

/// The OpenSSL digests, HMACs and randomness the control plane needs, plus base64url.
public enum TokenCrypto {
    /// SHA-1 of `data` (EVP).
    public static func sha1(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let ok = data.withUnsafeBufferPointer { EVP_Digest($0.baseAddress, $0.count, &out, &len, EVP_sha1(), nil) }
        return ok == 1 ? Array(out[0..<Int(len)]) : []
    }

    /// HMAC-SHA256(key, data).
    public static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] { hmac(EVP_sha256(), key, data) }

    /// HMAC-SHA1(key, data).
    public static func hmacSHA1(key: [UInt8], _ data: [UInt8]) -> [UInt8] { hmac(EVP_sha1(), key, data) }

    private static func hmac(_ md: OpaquePointer?, _ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let r = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                HMAC(md, k.baseAddress, Int32(k.count), d.baseAddress, d.count, &out, &len)
            }
        }
        return r == nil ? [] : Array(out[0..<Int(len)])
    }

    /// Cryptographically random bytes (RAND_bytes).
    public static func randomBytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        if n > 0 && RAND_bytes(&out, Int32(n)) != 1 {
            for i in 0..<n { out[i] = UInt8.random(in: 0...255) }
        }
        return out
    }

    /// Lowercase hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](); out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Constant-time comparison.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }

    /// Standard base64 with padding.
    public static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// base64url without padding.
    public static func base64url(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        while s.hasSuffix("=") { s.removeLast() }
        return String(s.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// Decodes base64url or standard base64, padded or not; nil on bad input.
    public static func base64Decode(_ s: String) -> [UInt8]? {
        var t = String(s.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        guard t.utf8.count % 4 != 1 else { return nil }
        while t.utf8.count % 4 != 0 { t += "=" }
        guard let d = Data(base64Encoded: t) else { return nil }
        return [UInt8](d)
    }
}
