import COTShims
import CSRTP
import OTBase

/// SRTP protection profiles (RFC 5764 §4.1.2, RFC 7714), with their DTLS-SRTP ids.
public enum SRTPProfile: UInt16, Sendable, CaseIterable {
    /// AES-CM-128 with HMAC-SHA1 80-bit tag (0x0001).
    case aes128CmHmacSha1_80 = 0x0001
    /// AEAD_AES_128_GCM (0x0007): preferred.
    case aeadAes128Gcm = 0x0007

    /// Master key length in bytes.
    public var keyLength: Int { 16 }
    /// Master salt length in bytes.
    public var saltLength: Int { self == .aeadAes128Gcm ? 12 : 14 }
    /// Bytes SRTP adds to an RTP packet (the tag).
    public var rtpOverhead: Int { self == .aeadAes128Gcm ? 16 : 10 }
    /// Bytes SRTCP adds to an RTCP packet (tag plus the 4-byte index).
    public var rtcpOverhead: Int { rtpOverhead + 4 }
    /// Bytes of keying material to export from DTLS: client and server key and salt.
    public var keyingMaterialLength: Int { 2 * (keyLength + saltLength) }

    /// The profile's name in OpenSSL's `SSL_CTX_set_tlsext_use_srtp` list (DTLS-SRTP negotiation, RFC 5764 / RFC 7714).
    public var opensslName: String {
        switch self {
        case .aes128CmHmacSha1_80: "SRTP_AES128_CM_SHA1_80"
        case .aeadAes128Gcm: "SRTP_AEAD_AES_128_GCM"
        }
    }

    /// The profile for an OpenSSL name (as `SSL_get_selected_srtp_profile` reports it).
    public init?(opensslName: String) {
        guard let p = Self.allCases.first(where: { $0.opensslName == opensslName }) else { return nil }
        self = p
    }

    /// Profiles in order of preference, for offering in DTLS: GCM first.
    public static let preferred: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmHmacSha1_80]

    var libsrtpProfile: srtp_profile_t {
        self == .aeadAes128Gcm ? srtp_profile_aead_aes_128_gcm : srtp_profile_aes128_cm_sha1_80
    }
}

/// Why SRTP refused a packet.
public enum SRTPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The authentication tag did not verify: tampered, corrupt, or under the wrong key.
    case authenticationFailed
    /// The packet index was seen before or is older than the replay window.
    case replayed
    /// Too short or not RTP/RTCP.
    case malformed(String)
    /// Keys of the wrong length for the profile.
    case badKey(String)
    /// Any other libsrtp status.
    case failed(operation: String, status: Int32)

    public var description: String {
        switch self {
        case .authenticationFailed: "SRTP authentication failed"
        case .replayed: "SRTP replay detected"
        case .malformed(let m): "malformed SRTP input: \(m)"
        case .badKey(let m): "bad SRTP key: \(m)"
        case .failed(let op, let s): "libsrtp \(op) failed with status \(s)"
        }
    }

    init(_ status: srtp_err_status_t, _ operation: String) {
        switch status {
        case srtp_err_status_auth_fail: self = .authenticationFailed
        case srtp_err_status_replay_fail, srtp_err_status_replay_old: self = .replayed
        case srtp_err_status_bad_param: self = .malformed(operation)
        default: self = .failed(operation: operation, status: Int32(status.rawValue))
        }
    }
}

/// The master keys each side uses, split from DTLS-SRTP keying material (RFC 5764 §4.2).
public struct SRTPKeys: Sendable, Equatable {
    /// Key then salt, for what this side sends.
    public var local: [UInt8]
    /// Key then salt, for what the peer sends.
    public var remote: [UInt8]

    public init(local: [UInt8], remote: [UInt8]) { self.local = local; self.remote = remote }

    /// Splits exported keying material laid out as client key | server key | client salt | server salt.
    /// The DTLS client sends with the client key and salt.
    public init(keyingMaterial m: [UInt8], profile: SRTPProfile, isDTLSClient: Bool) throws {
        let k = profile.keyLength, s = profile.saltLength
        guard m.count == profile.keyingMaterialLength else {
            throw SRTPError.badKey("keying material is \(m.count) bytes, profile needs \(profile.keyingMaterialLength)")
        }
        let client = Array(m[0..<k]) + m[2 * k..<2 * k + s]
        let server = Array(m[k..<2 * k]) + m[2 * k + s..<2 * k + 2 * s]
        self.init(local: isDTLSClient ? client : server, remote: isDTLSClient ? server : client)
    }
}

/// libsrtp's process-wide initialisation, run once (Swift globals initialise lazily and thread-safely): `srtp_init`,
/// then OpenSSL's AES-ICM, AES-GCM and HMAC-SHA1 in place of libsrtp's own (Debian's: NSS, which sets up a context,
/// takes a lock and allocates 5 to 14 times per packet). If libsrtp refuses them, SRTP stays on NSS (a warning says so).
private let srtpLibrary: (status: srtp_err_status_t, openSSL: Bool) = {
    let status = srtp_init()
    guard status == srtp_err_status_ok else { return (status, false) }
    let openSSL = otshim_srtp_use_openssl()
    if openSSL != srtp_err_status_ok {
        Log.warn("srtp", "OpenSSL's ciphers were refused by libsrtp (status \(openSSL.rawValue)): SRTP stays on libsrtp's own crypto (NSS)")
        _ = residentSRTPSession
    }
    return (status, openSSL == srtp_err_status_ok)
}()

/// One SRTP session that lives as long as the process, made only when SRTP still runs on NSS. NSS starts up when its
/// first context opens and shuts down when the last one closes: without a session that stays, each call's first SRTP
/// context would start NSS again (loading its crypto module each time, and keeping 72 bytes per start-up:
/// `ot-bench cycles` counted one more live block per cycle before this).
private let residentSRTPSession = ResidentSRTPSession()

private final class ResidentSRTPSession: @unchecked Sendable {
    let session: srtp_t?
    init() {
        let profile = SRTPProfile.aes128CmHmacSha1_80
        var policy = srtp_policy_t()
        _ = srtp_crypto_policy_set_from_profile_for_rtp(&policy.rtp, profile.libsrtpProfile)
        _ = srtp_crypto_policy_set_from_profile_for_rtcp(&policy.rtcp, profile.libsrtpProfile)
        policy.ssrc = srtp_ssrc_t(type: ssrc_any_inbound, value: 0)
        policy.window_size = 1024
        var key = [UInt8](repeating: 0, count: profile.keyLength + profile.saltLength)
        var session: srtp_t?
        let status = key.withUnsafeMutableBufferPointer { kb in
            policy.key = kb.baseAddress
            return srtp_create(&session, &policy)
        }
        self.session = status == srtp_err_status_ok ? session : nil
    }
}

/// An SRTP/SRTCP context for one transport: protects what this side sends and unprotects what it receives,
/// for any SSRC, with replay protection (window of 1024 packets). Packets are processed in place in the
/// caller's array, whose capacity is reused, so a steady stream allocates nothing per packet.
/// Not thread-safe: use one context per thread or serialise calls.
public final class SRTPContext {
    public let profile: SRTPProfile
    /// Whether libsrtp does its ciphers and HMAC with OpenSSL (else with its own backend, NSS on Debian).
    public static var usesOpenSSL: Bool { srtpLibrary.openSSL }
    private var outbound: srtp_t?
    private var inbound: srtp_t?

    /// Creates the inbound and outbound sessions from master key+salt for each direction.
    public init(profile: SRTPProfile, keys: SRTPKeys) throws {
        self.profile = profile
        guard srtpLibrary.status == srtp_err_status_ok else { throw SRTPError(srtpLibrary.status, "srtp_init") }
        let need = profile.keyLength + profile.saltLength
        guard keys.local.count == need, keys.remote.count == need else {
            throw SRTPError.badKey("key+salt must be \(need) bytes for \(profile)")
        }
        outbound = try Self.makeSession(profile: profile, key: keys.local, direction: ssrc_any_outbound)
        do {
            inbound = try Self.makeSession(profile: profile, key: keys.remote, direction: ssrc_any_inbound)
        } catch {
            if let o = outbound { srtp_dealloc(o) }
            throw error
        }
    }

    deinit {
        if let o = outbound { srtp_dealloc(o) }
        if let i = inbound { srtp_dealloc(i) }
    }

    private static func makeSession(profile: SRTPProfile, key: [UInt8], direction: srtp_ssrc_type_t) throws -> srtp_t {
        var policy = srtp_policy_t()
        var st = srtp_crypto_policy_set_from_profile_for_rtp(&policy.rtp, profile.libsrtpProfile)
        guard st == srtp_err_status_ok else { throw SRTPError(st, "policy rtp") }
        st = srtp_crypto_policy_set_from_profile_for_rtcp(&policy.rtcp, profile.libsrtpProfile)
        guard st == srtp_err_status_ok else { throw SRTPError(st, "policy rtcp") }
        policy.ssrc = srtp_ssrc_t(type: direction, value: 0)
        policy.window_size = 1024
        // NACK answers resend a packet with the same SSRC and sequence number (no RTX), as libwebrtc allows.
        policy.allow_repeat_tx = 1
        policy.next = nil
        var keyCopy = key
        var session: srtp_t?
        st = keyCopy.withUnsafeMutableBufferPointer { kb in
            policy.key = kb.baseAddress
            return srtp_create(&session, &policy)
        }
        // srtp_create expands the key; wipe our copy.
        for i in keyCopy.indices { keyCopy[i] = 0 }
        guard st == srtp_err_status_ok, let session else { throw SRTPError(st, "srtp_create") }
        return session
    }

    /// Zeros to grow a packet by the trailer libsrtp writes (the tag, and SRTCP's index; no MKI).
    private static let trailerRoom = [UInt8](repeating: 0, count: SRTPProfile.allCases.map(\.rtcpOverhead).max() ?? 0)

    private typealias Op = (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t

    private func run(_ packet: inout [UInt8], room: Int, minLength: Int, _ what: String,
                     session: srtp_t?, _ op: Op) throws {
        guard packet.count >= minLength else { throw SRTPError.malformed("\(what): \(packet.count) bytes") }
        let length = packet.count
        // libsrtp writes the trailer past the end: make room inside the array's storage.
        if room > 0 { packet.append(contentsOf: Self.trailerRoom[..<room]) }
        var len = Int32(length)
        let st = packet.withUnsafeMutableBytes { op(session, $0.baseAddress, &len) }
        guard st == srtp_err_status_ok, len >= 0, Int(len) <= packet.count else {
            if room > 0 { packet.removeLast(room) }
            throw SRTPError(st, what)
        }
        packet.removeLast(packet.count - Int(len))
    }

    /// Encrypts and authenticates an RTP packet in place (it grows by `profile.rtpOverhead`).
    public func protectRTP(_ packet: inout [UInt8]) throws {
        try run(&packet, room: profile.rtpOverhead, minLength: 12, "protect RTP", session: outbound) { srtp_protect($0, $1, $2) }
    }

    /// Verifies and decrypts an SRTP packet in place. Throws `.authenticationFailed` or `.replayed`.
    public func unprotectRTP(_ packet: inout [UInt8]) throws {
        try run(&packet, room: 0, minLength: 12 + profile.rtpOverhead, "unprotect RTP", session: inbound) { srtp_unprotect($0, $1, $2) }
    }

    /// Encrypts and authenticates an RTCP compound packet in place (grows by `profile.rtcpOverhead`).
    public func protectRTCP(_ packet: inout [UInt8]) throws {
        try run(&packet, room: profile.rtcpOverhead, minLength: 8, "protect RTCP", session: outbound) { srtp_protect_rtcp($0, $1, $2) }
    }

    /// Verifies and decrypts an SRTCP packet in place. Throws `.authenticationFailed` or `.replayed`.
    public func unprotectRTCP(_ packet: inout [UInt8]) throws {
        try run(&packet, room: 0, minLength: 8 + profile.rtcpOverhead, "unprotect RTCP", session: inbound) { srtp_unprotect_rtcp($0, $1, $2) }
    }
}
