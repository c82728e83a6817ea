import CSRTP
import OTTransport

/// A minimal libsrtp2 session for the interop tests only (the product's SRTP context lives in the codec layer).
final class InteropSRTP {
    private var session: srtp_t?
    private(set) var lastError = srtp_err_status_ok
    private static let initialized: Bool = srtp_init() == srtp_err_status_ok

    /// - Parameter outbound: protect with the local key (true) or unprotect with the remote key (false).
    init?(_ k: SRTPKeyingMaterial, outbound: Bool) {
        guard Self.initialized else { return nil }
        var policy = srtp_policy_t()
        switch k.profile {
        case .aeadAes128Gcm:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        case .aes128CmHmacSha1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        default:
            return nil
        }
        policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = 1024
        policy.allow_repeat_tx = 1
        var key = outbound ? k.localKey + k.localSalt : k.remoteKey + k.remoteSalt
        let status = key.withUnsafeMutableBufferPointer { buf -> srtp_err_status_t in
            policy.key = buf.baseAddress
            return srtp_create(&session, &policy)
        }
        guard status == srtp_err_status_ok else { return nil }
    }

    deinit { if let session { srtp_dealloc(session) } }

    func protect(_ rtp: [UInt8]) -> [UInt8]? {
        var buf = rtp + [UInt8](repeating: 0, count: 32)
        var len = Int32(rtp.count)
        let s = buf.withUnsafeMutableBytes { srtp_protect(session, $0.baseAddress, &len) }
        return s == srtp_err_status_ok ? Array(buf[0..<Int(len)]) : nil
    }

    func protectRTCP(_ rtcp: [UInt8]) -> [UInt8]? {
        var buf = rtcp + [UInt8](repeating: 0, count: 48)
        var len = Int32(rtcp.count)
        let s = buf.withUnsafeMutableBytes { srtp_protect_rtcp(session, $0.baseAddress, &len) }
        return s == srtp_err_status_ok ? Array(buf[0..<Int(len)]) : nil
    }

    func unprotect(_ srtp: [UInt8], rtcp: Bool) -> [UInt8]? {
        var buf = srtp
        var len = Int32(srtp.count)
        let s = buf.withUnsafeMutableBytes { rtcp ? srtp_unprotect_rtcp(session, $0.baseAddress, &len) : srtp_unprotect(session, $0.baseAddress, &len) }
        lastError = s
        return s == srtp_err_status_ok ? Array(buf[0..<Int(len)]) : nil
    }
}
