import COpenSSL
import OTBase

/// Why an end-to-end encrypted frame could not be decrypted (the receive pipelines drop such a frame and count it).
public enum FrameDecryptionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The frame is shorter than a clear prefix, header and tag can be (`E2EEFrameTransform.overhead` bytes).
    case truncated(length: Int)
    /// The header's version byte is not one this build reads.
    case unknownVersion(UInt8)
    /// The GCM tag did not verify: another secret, or the frame (or its clear prefix) was altered.
    case authenticationFailed
    /// OpenSSL refused an operation (named).
    case cipherFailure(String)

    public var description: String {
        switch self {
        case .truncated(let n): "encrypted frame too short (\(n) bytes)"
        case .unknownVersion(let v): "unknown encrypted frame version \(v)"
        case .authenticationFailed: "encrypted frame failed authentication (wrong encryption secret or altered frame)"
        case .cipherFailure(let what): "cipher failure: \(what)"
        }
    }
}

/// The media key of an end-to-end encrypted session, derived from the shared encryption secret.
///
/// Key derivation: PBKDF2-HMAC-SHA256 (OpenSSL `PKCS5_PBKDF2_HMAC`) of the secret's UTF-8 bytes with the fixed salt
/// `saltString` and `iterations` rounds, giving a 32-byte AES-256 key. Every client with the same secret derives the
/// same key; the salt is fixed so that clients need not agree on anything else.
public struct E2EEKey: Sendable, Equatable {
    /// The fixed, public PBKDF2 salt (versioned with the frame format).
    public static let saltString = "libotsession e2ee v1 media key"
    /// PBKDF2 rounds (a few tens of milliseconds once per session; slows guessing of weak secrets).
    public static let iterations: Int32 = 100_000
    /// Key length: AES-256.
    public static let byteCount = 32

    let bytes: [UInt8]

    /// Derives the key from a secret. Throws `OTError(.internalError)` only if OpenSSL fails.
    public init(secret: String) throws {
        let passLength = Int32(secret.utf8.count), salt = Array(E2EEKey.saltString.utf8)
        var out = [UInt8](repeating: 0, count: E2EEKey.byteCount)
        let ok = secret.withCString { p in
            salt.withUnsafeBufferPointer { s in
                out.withUnsafeMutableBufferPointer { o in
                    PKCS5_PBKDF2_HMAC(p, passLength, s.baseAddress, Int32(s.count), E2EEKey.iterations,
                                      EVP_sha256(), Int32(o.count), o.baseAddress)
                }
            }
        }
        guard ok == 1 else { throw OTError(.internalError, "PBKDF2 key derivation failed") }
        bytes = out
    }
}

/// Authenticated end-to-end encryption of each encoded frame (AES-256-GCM, OpenSSL), for sessions whose media the
/// router must forward without being able to read it.
///
/// An encrypted frame is `clear prefix || header || ciphertext || tag`:
/// - clear prefix: the bytes receivers and the router read before decryption (the frame's format says how many:
///   `RTPPayloadFormat.clearPrefixLength`): the VP8 payload
///   header (10 bytes of a keyframe, 3 of a delta frame: keyframe flag, version, size) or the Opus TOC byte; shorter
///   frames keep all their bytes as prefix. It is authenticated (GCM additional data) but not encrypted.
/// - header (13 bytes): version `0x01`, then the 12-byte GCM IV; also authenticated.
/// - ciphertext: the rest of the frame, same length.
/// - tag: the 16-byte GCM tag.
///
/// IVs never repeat under one key within a sender: each transform draws a random 96-bit base IV and XORs a 64-bit
/// frame counter (shared by its audio and video) into its low 8 bytes. Senders of one session share the key, so
/// uniqueness across senders rests on the random bases (collision odds about n²/2⁹⁷ for n senders).
/// Thread-safe (one lock around the two OpenSSL contexts); a decryption failure throws and never traps.
public final class E2EEFrameTransform: FrameTransform, @unchecked Sendable {
    /// The frame format version written in the header.
    public static let version: UInt8 = 1
    public static let ivLength = 12
    public static let headerLength = 1 + ivLength
    public static let tagLength = 16
    private static let zeroTag = [UInt8](repeating: 0, count: tagLength)
    /// Bytes an encrypted frame adds to the plain one.
    public static let overhead = headerLength + tagLength

    /// What the transform did so far.
    public struct Counters: Sendable, Equatable {
        public var framesEncrypted = 0
        public var framesDecrypted = 0
        /// Frames that could not be decrypted (wrong secret, altered, truncated).
        public var decryptionFailures = 0
        public init(framesEncrypted: Int = 0, framesDecrypted: Int = 0, decryptionFailures: Int = 0) {
            self.framesEncrypted = framesEncrypted; self.framesDecrypted = framesDecrypted
            self.decryptionFailures = decryptionFailures
        }
    }

    private let lock = Lock()
    private let encryptContext: OpaquePointer
    private let decryptContext: OpaquePointer
    private var baseIV = [UInt8](repeating: 0, count: ivLength)
    private var frameCounter: UInt64 = 0
    private var counts = Counters()
    /// Output target for OpenSSL when a decrypted frame is empty (an empty array may have no storage).
    private let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: 16)

    /// A transform encrypting and decrypting with `key` (one instance per publisher or subscriber).
    public init(key: E2EEKey) throws {
        guard let enc = EVP_CIPHER_CTX_new() else { throw OTError(.internalError, "EVP_CIPHER_CTX_new failed") }
        guard let dec = EVP_CIPHER_CTX_new() else {
            EVP_CIPHER_CTX_free(enc)
            throw OTError(.internalError, "EVP_CIPHER_CTX_new failed")
        }
        encryptContext = enc; decryptContext = dec
        let ok = key.bytes.withUnsafeBufferPointer { k in
            EVP_EncryptInit_ex(enc, EVP_aes_256_gcm(), nil, k.baseAddress, nil) == 1
                && EVP_DecryptInit_ex(dec, EVP_aes_256_gcm(), nil, k.baseAddress, nil) == 1
        }
        let random = baseIV.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) == 1 }
        guard ok && random else { throw OTError(.internalError, "AES-GCM setup failed") }
    }

    /// A transform keyed from a secret (derives the key: prefer `init(key:)` to derive once for many transforms).
    public convenience init(secret: String) throws { try self.init(key: E2EEKey(secret: secret)) }

    deinit {
        EVP_CIPHER_CTX_free(encryptContext)
        EVP_CIPHER_CTX_free(decryptContext)
        scratch.deallocate()
    }

    public var isIdentity: Bool { false }

    /// The counters so far.
    public var counters: Counters { lock.withLock { counts } }

    /// Bytes kept in clear at the start of a frame: its payload format's clear prefix (capped by the frame's length).
    public static func clearPrefixLength(_ info: EncodedFrameInfo) -> Int {
        info.format.clearPrefixLength(isKeyframe: info.isKeyframe)
    }

    public func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        let clear = min(Self.clearPrefixLength(info), frame.count)
        let body = frame.count - clear
        let aadLength = clear + Self.headerLength
        output.removeAll(keepingCapacity: true)
        output.reserveCapacity(frame.count + Self.overhead)
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: frame[0..<clear]))
        output.append(Self.version)
        try lock.withLock {
            frameCounter &+= 1
            output.append(contentsOf: baseIV)
            for i in 0..<8 { output[aadLength - 1 - i] ^= UInt8(truncatingIfNeeded: frameCounter >> (8 * UInt64(i))) }
            // The plaintext body and room for the tag; the body is then encrypted in place.
            output.append(contentsOf: UnsafeRawBufferPointer(rebasing: frame[clear...]))
            output.append(contentsOf: Self.zeroTag)
            let ctx = encryptContext
            let ok = output.withUnsafeMutableBufferPointer { out -> Bool in
                guard let o = out.baseAddress else { return false }
                var n: Int32 = 0
                guard EVP_EncryptInit_ex(ctx, nil, nil, nil, o + clear + 1) == 1,
                      EVP_EncryptUpdate(ctx, nil, &n, o, Int32(aadLength)) == 1 else { return false }
                if body > 0 {
                    guard EVP_EncryptUpdate(ctx, o + aadLength, &n, o + aadLength, Int32(body)) == 1 else { return false }
                }
                guard EVP_EncryptFinal_ex(ctx, o + aadLength + body, &n) == 1 else { return false }
                return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagLength), o + aadLength + body) == 1
            }
            guard ok else { throw OTError(.internalError, "AES-GCM encryption failed") }
            counts.framesEncrypted += 1
        }
    }

    public func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        output.removeAll(keepingCapacity: true)
        do {
            try decrypt(frame, info: info, into: &output)
        } catch {
            output.removeAll(keepingCapacity: true)
            lock.withLock { counts.decryptionFailures += 1 }
            throw error
        }
    }

    private func decrypt(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        guard frame.count >= Self.overhead, let f = frame.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw FrameDecryptionError.truncated(length: frame.count)
        }
        let plainLength = frame.count - Self.overhead
        let clear = min(Self.clearPrefixLength(info), plainLength)
        let body = plainLength - clear
        guard f[clear] == Self.version else { throw FrameDecryptionError.unknownVersion(f[clear]) }
        let aadLength = clear + Self.headerLength
        // The clear prefix and the ciphertext body, then decrypted in place.
        output.reserveCapacity(plainLength)
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: frame[0..<clear]))
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: frame[aadLength..<(aadLength + body)]))
        let result: FrameDecryptionError? = lock.withLock {
            let ctx = decryptContext
            return output.withUnsafeMutableBufferPointer { out -> FrameDecryptionError? in
                let o = out.baseAddress ?? scratch
                var n: Int32 = 0
                guard EVP_DecryptInit_ex(ctx, nil, nil, nil, f + clear + 1) == 1,
                      EVP_DecryptUpdate(ctx, nil, &n, f, Int32(aadLength)) == 1 else { return .cipherFailure("GCM init") }
                if body > 0 {
                    guard EVP_DecryptUpdate(ctx, o + clear, &n, o + clear, Int32(body)) == 1 else {
                        return .cipherFailure("GCM update")
                    }
                }
                let tag = UnsafeMutableRawPointer(mutating: f + aadLength + body)
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagLength), tag) == 1 else {
                    return .cipherFailure("GCM set tag")
                }
                return EVP_DecryptFinal_ex(ctx, o + clear + body, &n) == 1 ? nil : .authenticationFailed
            }
        }
        if let result { throw result }
        lock.withLock { counts.framesDecrypted += 1 }
    }
}
