import COpenSSL

/// The hashes STUN needs, from OpenSSL (HMAC-SHA1, MD5) and the CRC-32 of FINGERPRINT.
public enum STUNCrypto {
    /// HMAC-SHA1(key, data): the 20-byte MESSAGE-INTEGRITY value.
    public static func hmacSHA1(key: [UInt8], _ data: ArraySlice<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        var len: UInt32 = 20
        let ok = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    HMAC(EVP_sha1(), k.baseAddress, Int32(k.count), d.baseAddress, d.count, o.baseAddress, &len) != nil
                }
            }
        }
        return ok ? out : []
    }

    /// MD5 of data (the long-term credential key is MD5(username ":" realm ":" password)).
    public static func md5(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        var len: UInt32 = 16
        _ = data.withUnsafeBufferPointer { d in
            out.withUnsafeMutableBufferPointer { EVP_Digest(d.baseAddress, d.count, $0.baseAddress, &len, EVP_md5(), nil) }
        }
        return out
    }

    /// The long-term credential key for MESSAGE-INTEGRITY (RFC 8489 §9.2.2, MD5 algorithm).
    public static func longTermKey(username: String, realm: String, password: String) -> [UInt8] {
        md5(Array("\(username):\(realm):\(password)".utf8))
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// CRC-32 (ISO 3309 / ITU-T V.42, as in zlib).
    public static func crc32(_ data: ArraySlice<UInt8>) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        crcTable.withUnsafeBufferPointer { t in
            for b in data { c = t[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        }
        return c ^ 0xFFFF_FFFF
    }
}
