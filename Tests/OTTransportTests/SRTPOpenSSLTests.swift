import COTShims
import CSRTP
import OTTestSupport
import XCTest
@testable import OTTransport

/// SRTP's primitives from OpenSSL (Sources/COTShims/srtp_openssl.c) in place of libsrtp's NSS backend: the types
/// against published vectors at the level libsrtp calls them, whole packets through `SRTPContext` against bytes
/// Debian's NSS-backed libsrtp2 produced, and no allocation per packet.
final class SRTPOpenSSLTests: XCTestCase {
    private func hex(_ s: String) -> [UInt8] {
        let digits = Array(s.utf8.filter { $0 != 0x20 })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    func testLibsrtpTookOpenSSLsTypes() throws {
        _ = try SRTPContext(profile: .aeadAes128Gcm, keys: SRTPKeys(local: [UInt8](repeating: 1, count: 28), remote: [UInt8](repeating: 2, count: 28)))
        XCTAssertTrue(SRTPContext.usesOpenSSL, "libsrtp refused a type (see the srtp warning)")
    }

    /// Each type passes its own known answers (RFC 3711 B.2 and B.3, RFC 6188 7.1 and 7.3, RFC 7714 16.1.1, 16.2.1
    /// and 17.1, RFC 2202), and libsrtp's random encrypt/decrypt round trips.
    func testTypesPassTheirSelfTests() throws {
        for id in [SRTP_AES_ICM_128, SRTP_AES_ICM_192, SRTP_AES_ICM_256, SRTP_AES_GCM_128, SRTP_AES_GCM_256] {
            let type = try XCTUnwrap(otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t(id)), "cipher \(id)")
            XCTAssertEqual(srtp_cipher_type_self_test(type), srtp_err_status_ok, "cipher \(id)")
        }
        XCTAssertNil(otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t(SRTP_NULL_CIPHER)))
        XCTAssertEqual(srtp_auth_type_self_test(otshim_srtp_openssl_hmac_sha1()), srtp_err_status_ok)
    }

    /// A self-test fails when one byte of an expected answer is wrong: the vectors are checked, not just run.
    func testSelfTestRefusesAWrongAnswer() throws {
        let type = try XCTUnwrap(otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t(SRTP_AES_ICM_128)))
        // RFC 3711 B.2: the first 16 octets of keystream, one octet off.
        let key = hex("2B7E151628AED2A6ABF7158809CF4F3C F0F1F2F3F4F5F6F7F8F9FAFBFCFD")
        var iv = [UInt8](repeating: 0, count: 16)
        let zeros = [UInt8](repeating: 0, count: 16)
        for (keystream, expected) in [(hex("E03EAD0935C95E80E166B16DD92B4EB4"), srtp_err_status_ok),
                                      (hex("E03EAD0935C95E80E166B16DD92B4EB5"), srtp_err_status_algo_fail)] {
            let status = key.withUnsafeBufferPointer { k in zeros.withUnsafeBufferPointer { z in keystream.withUnsafeBufferPointer { c in
                iv.withUnsafeMutableBufferPointer { v in
                    var test = srtp_cipher_test_case_t(key_length_octets: 30, key: k.baseAddress, idx: v.baseAddress,
                                                       plaintext_length_octets: 16, plaintext: z.baseAddress,
                                                       ciphertext_length_octets: 16, ciphertext: c.baseAddress,
                                                       aad_length_octets: 0, aad: nil, tag_length_octets: 0, next_test_case: nil)
                    return srtp_cipher_type_test(type, &test)
                }
            } } }
            XCTAssertEqual(status, expected)
        }
    }

    /// RFC 7714 16.1.1 and 16.1.2 at the cipher level, in libsrtp's order of calls: IV, AAD (the RTP header), encrypt,
    /// tag; then decrypt with the tag at the end, and a flipped bit anywhere refused.
    func testGCMReproducesRFC7714AndRefusesTampering() throws {
        let type = try XCTUnwrap(otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t(SRTP_AES_GCM_128)))
        let key = Array(0..<16) + Array("Quid pro quo".utf8)
        var iv = hex("51753c6580c2726f20718414 00000000")
        let header = hex("8040f17b8041f8d35501a0b2")
        let payload = Array("Gallia est omnis divisa in partes tres".utf8)
        let expected = hex("f24de3a3fb34de6cacba861c9d7e4bcabe633bd50d294e6f42a5f47a51c7d19b36de3adf8833 899d7f27beb16a9152cf765ee4390cce")
        var cipher: UnsafeMutablePointer<srtp_cipher_t>?
        XCTAssertEqual(srtp_cipher_type_alloc(type, &cipher, 28, 16), srtp_err_status_ok)
        defer { srtp_cipher_dealloc(cipher) }
        XCTAssertEqual(srtp_cipher_init(cipher, key), srtp_err_status_ok)

        var buffer = payload + [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(srtp_cipher_set_iv(cipher, &iv, Int32(srtp_direction_encrypt.rawValue)), srtp_err_status_ok)
        XCTAssertEqual(srtp_cipher_set_aad(cipher, header, UInt32(header.count)), srtp_err_status_ok)
        var length = UInt32(payload.count), tagLength: UInt32 = 0
        XCTAssertEqual(srtp_cipher_encrypt(cipher, &buffer, &length), srtp_err_status_ok)
        XCTAssertEqual(buffer.withUnsafeMutableBufferPointer { srtp_cipher_get_tag(cipher, $0.baseAddress! + Int(length), &tagLength) }, srtp_err_status_ok)
        XCTAssertEqual(Int(length + tagLength), expected.count)
        XCTAssertEqual(buffer, expected)

        func decrypt(_ packet: [UInt8], aad: [UInt8]) -> (srtp_err_status_t, [UInt8]) {
            var p = packet, n = UInt32(packet.count)
            _ = srtp_cipher_set_iv(cipher, &iv, Int32(srtp_direction_decrypt.rawValue))
            _ = srtp_cipher_set_aad(cipher, aad, UInt32(aad.count))
            let status = srtp_cipher_decrypt(cipher, &p, &n)
            return (status, Array(p.prefix(Int(n))))
        }
        XCTAssertEqual(decrypt(expected, aad: header).0, srtp_err_status_ok)
        XCTAssertEqual(decrypt(expected, aad: header).1, payload)
        for index in [0, 20, expected.count - 1] {
            var tampered = expected
            tampered[index] ^= 0x01
            XCTAssertEqual(decrypt(tampered, aad: header).0, srtp_err_status_auth_fail, "ciphertext/tag octet \(index)")
        }
        var header2 = header
        header2[3] ^= 0x01
        XCTAssertEqual(decrypt(expected, aad: header2).0, srtp_err_status_auth_fail, "header (AAD)")
        XCTAssertEqual(decrypt(Array(expected.prefix(15)), aad: header).0, srtp_err_status_auth_fail, "shorter than the tag")
        // A decrypt without set_iv's direction (an encrypt IV) is refused, not run.
        var p = expected, n = UInt32(expected.count)
        _ = srtp_cipher_set_iv(cipher, &iv, Int32(srtp_direction_encrypt.rawValue))
        XCTAssertEqual(srtp_cipher_decrypt(cipher, &p, &n), srtp_err_status_bad_param)
    }

    /// AES-ICM's block counter is 16 bits (RFC 3711 4.1.1): keystream that would carry past it into the packet index
    /// (OpenSSL's CTR counts all 128 bits) is refused, as libsrtp's own AES-ICM refuses it.
    func testICMStopsAtTheEndOfItsBlockCounter() throws {
        let type = try XCTUnwrap(otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t(SRTP_AES_ICM_128)))
        var cipher: UnsafeMutablePointer<srtp_cipher_t>?
        XCTAssertEqual(srtp_cipher_type_alloc(type, &cipher, 30, 0), srtp_err_status_ok)
        defer { srtp_cipher_dealloc(cipher) }
        XCTAssertEqual(srtp_cipher_init(cipher, [UInt8](repeating: 0x5A, count: 30)), srtp_err_status_ok)
        var iv = [UInt8](repeating: 0, count: 14) + [0xFF, 0xFF]  // the last block before the counter wraps
        var buffer = [UInt8](repeating: 0, count: 17)
        for (count, expected) in [(16, srtp_err_status_ok), (17, srtp_err_status_terminus)] {
            XCTAssertEqual(srtp_cipher_set_iv(cipher, &iv, Int32(srtp_direction_encrypt.rawValue)), srtp_err_status_ok)
            var length = UInt32(count)
            XCTAssertEqual(srtp_cipher_encrypt(cipher, &buffer, &length), expected, "\(count) octets")
        }
        XCTAssertEqual(srtp_cipher_type_alloc(type, &cipher, 29, 0), srtp_err_status_bad_param, "a key length libsrtp does not use")
    }

    /// Whole packets through libsrtp and our types: the bytes Debian's NSS-backed libsrtp2 2.5.0 produced for the same
    /// master keys and packets (a C program linked against it, without the replacement, in its own process; the same
    /// bytes come out of Python's `cryptography` following RFC 3711 4.3 key derivation and RFC 7714 / RFC 3711
    /// packet layout). AES_CM_128_HMAC_SHA1_80 is keyed with RFC 3711 B.3's master key and salt, AEAD_AES_128_GCM
    /// with RFC 7714 16's key and salt as master key and salt; the packets are RFC 7714 16's RTP packet (sequence
    /// numbers f17b, f17c) and 17's RTCP packet.
    func testPacketsMatchTheNSSBuildByteForByte() throws {
        let rtp = hex("8040f17b8041f8d35501a0b2") + Array("Gallia est omnis divisa in partes tres".utf8)
        let rtcp = hex("81c8000d4d6172734e5450314e545032525450200000042a0000e9304c756e61deadbeefdeadbeefdeadbeefdeadbeefdeadbeef")
        let cases: [(SRTPProfile, [UInt8], [String], String)] = [
            (.aes128CmHmacSha1_80, hex("E1F97A0D3E018BE0D64FA32C06DE4139 0EC675AD498AFEEBB6960B3AABE6"),
             ["8040f17b8041f8d35501a0b246be74509aaa5ce4310b26d95e135249979cd7bc38109ee071f7bf3aa8495d6dd41778d02641cbe126523e4fe97e1d91",
              "8040f17c8041f8d35501a0b2a2b063bc7d8158c4eaab9ff8abc92adba4df00278b9eac005e629103b443bcd1bd75a71d6edacd661564a7af0f095086"],
             "81c8000d4d617273f2bb7b81f9b988034c297110352c53781268f3d76040350f49086b0a2297239aeebaf47f1a17638ae7a25bc880000001432cfe93cba0c4783d44"),
            (.aeadAes128Gcm, Array(0..<16) + Array("Quid pro quo".utf8),
             ["8040f17b8041f8d35501a0b292cb0ecff0a0db188f7bff6b523933aacef8ae9585ed378a627836cb2d6a731d6c3490d925387db18c0661762d59e50ad553d241535a",
              "8040f17c8041f8d35501a0b2fbc70520d7d26c567f4d92d916ca9bfd6e7a4a43e37d4633db0545354d037aa09e2225598e5c22ae1540a95ffd2aa27a80fd8fbdee61"],
             "81c8000d4d6172736e525f96a03f0774056b3c595dc5fc69f9f17ef57a412beed41b52140f81a7b04c2c30f3a32afc8021dfbd46339c88a7f76cae84d03f3da7e4e1053a80000001"),
        ]
        for (profile, master, rtpExpected, rtcpExpected) in cases {
            let other = [UInt8](repeating: 9, count: master.count)
            let sender = try SRTPContext(profile: profile, keys: SRTPKeys(local: master, remote: other))
            let receiver = try SRTPContext(profile: profile, keys: SRTPKeys(local: other, remote: master))
            for (k, expected) in rtpExpected.enumerated() {
                var p = rtp
                p[3] &+= UInt8(k)
                let plain = p
                try sender.protectRTP(&p)
                XCTAssertEqual(p, hex(expected), "\(profile) RTP \(k)")
                var tampered = p
                tampered[p.count - 1] ^= 0x01
                XCTAssertThrowsError(try receiver.unprotectRTP(&tampered)) { XCTAssertEqual($0 as? SRTPError, .authenticationFailed) }
                try receiver.unprotectRTP(&p)
                XCTAssertEqual(p, plain, "\(profile) RTP \(k) back")
            }
            var r = rtcp
            try sender.protectRTCP(&r)
            XCTAssertEqual(r, hex(rtcpExpected), "\(profile) RTCP")
            var tampered = r
            tampered[12] ^= 0x01
            XCTAssertThrowsError(try receiver.unprotectRTCP(&tampered)) { XCTAssertEqual($0 as? SRTPError, .authenticationFailed) }
            try receiver.unprotectRTCP(&r)
            XCTAssertEqual(r, rtcp, "\(profile) RTCP back")
        }
    }

    /// Per packet, AES-GCM allocates nothing (the context is keyed once and only its IV is reset); AES-CM with
    /// HMAC-SHA1 allocates what OpenSSL 3.0's EVP_MAC does when it starts again and when it finishes (it duplicates
    /// its digest state: 2 per protect or unprotect). NSS made 5 per AES-GCM call and 14 per AES-CM/HMAC call.
    func testProtectAndUnprotectAllocations() throws {
        for (profile, allowance) in [(SRTPProfile.aeadAes128Gcm, UInt64(0)), (.aes128CmHmacSha1_80, UInt64(2))] {
            let a = [UInt8](repeating: 3, count: profile.keyLength + profile.saltLength), b = [UInt8](repeating: 4, count: a.count)
            let sender = try SRTPContext(profile: profile, keys: SRTPKeys(local: a, remote: b))
            let receiver = try SRTPContext(profile: profile, keys: SRTPKeys(local: b, remote: a))
            let n = 1000
            var packets: [[UInt8]] = (0..<(n + 10)).map { i in
                var p = testRTP(ssrc: 0xC3, seq: UInt16(i), ts: UInt32(i) * 3000, payload: Array(repeating: 7, count: 1100))
                p.reserveCapacity(p.count + Int(SRTP_MAX_TRAILER_LEN))
                return p
            }
            var i = 0
            while i < 10 { try sender.protectRTP(&packets[i]); try receiver.unprotectRTP(&packets[i]); i += 1 }
            let protects = try ThreadAllocations.during { var k = 10; while k < packets.count { try sender.protectRTP(&packets[k]); k += 1 } }
            let unprotects = try ThreadAllocations.during { var k = 10; while k < packets.count { try receiver.unprotectRTP(&packets[k]); k += 1 } }
            XCTAssertLessThanOrEqual(protects, allowance * UInt64(n), "\(profile): allocations in \(n) protects")
            XCTAssertLessThanOrEqual(unprotects, allowance * UInt64(n), "\(profile): allocations in \(n) unprotects")
            XCTAssertEqual(packets[n + 9].count, 12 + 1100, "the last packet came back")
        }
    }
}
