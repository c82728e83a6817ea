import XCTest
import OTWire
@testable import OTTransport

final class SRTPContextTests: XCTestCase {
    /// A client/server pair keyed from the same exported keying material, as after a DTLS-SRTP handshake.
    func pair(_ profile: SRTPProfile) throws -> (client: SRTPContext, server: SRTPContext) {
        let material = (0..<profile.keyingMaterialLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let c = try SRTPKeys(keyingMaterial: material, profile: profile, isDTLSClient: true)
        let s = try SRTPKeys(keyingMaterial: material, profile: profile, isDTLSClient: false)
        XCTAssertEqual(c.local, s.remote); XCTAssertEqual(c.remote, s.local)
        XCTAssertEqual(c.local.count, profile.keyLength + profile.saltLength)
        return (try SRTPContext(profile: profile, keys: c), try SRTPContext(profile: profile, keys: s))
    }

    func rtp(seq: UInt16, payload: [UInt8] = Array(0..<100)) -> [UInt8] {
        RTPPacket(marker: true, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(seq) * 3000, ssrc: 0xCAFE,
                  payload: payload[...]).serialized()
    }

    func testRTPAndRTCPRoundTripBothProfiles() throws {
        for profile in SRTPProfile.allCases {
            let (client, server) = try pair(profile)
            for seq in UInt16(1)...20 {
                let plain = rtp(seq: seq)
                var p = plain
                try client.protectRTP(&p)
                XCTAssertEqual(p.count, plain.count + profile.rtpOverhead)
                XCTAssertEqual(Array(p.prefix(12)), Array(plain.prefix(12)), "header stays clear")
                XCTAssertNotEqual(Array(p[12..<112]), Array(plain[12...]), "payload is encrypted")
                try server.unprotectRTP(&p)
                XCTAssertEqual(p, plain)
                // And the other direction.
                var q = plain
                try server.protectRTP(&q); try client.unprotectRTP(&q)
                XCTAssertEqual(q, plain)
            }
            // A minimal RTCP receiver report (RFC 3550 §6.4.2, no report blocks).
            let rr: [UInt8] = [0x80, 201, 0, 1, 0, 0, 0xCA, 0xFE]
            var r = rr
            try client.protectRTCP(&r)
            XCTAssertEqual(r.count, rr.count + profile.rtcpOverhead)
            try server.unprotectRTCP(&r)
            XCTAssertEqual(r, rr)
        }
    }

    func testTamperedPacketIsRejectedAsAuthenticationFailure() throws {
        for profile in SRTPProfile.allCases {
            let (client, server) = try pair(profile)
            for index in [1, 20, 60] {  // header, payload, tag
                var p = rtp(seq: UInt16(index))
                try client.protectRTP(&p)
                p[min(index, p.count - 1)] ^= 0x01
                XCTAssertThrowsError(try server.unprotectRTP(&p)) { XCTAssertEqual($0 as? SRTPError, .authenticationFailed, "\(profile)") }
            }
            var r: [UInt8] = [0x80, 201, 0, 1, 0, 0, 0xCA, 0xFE]
            try client.protectRTCP(&r)
            r[r.count - 1] ^= 0x80
            XCTAssertThrowsError(try server.unprotectRTCP(&r)) { XCTAssertEqual($0 as? SRTPError, .authenticationFailed) }
        }
    }

    func testReplayedPacketIsRejected() throws {
        for profile in SRTPProfile.allCases {
            let (client, server) = try pair(profile)
            var p = rtp(seq: 500)
            try client.protectRTP(&p)
            let wire = p
            var first = wire
            try server.unprotectRTP(&first)
            var again = wire
            XCTAssertThrowsError(try server.unprotectRTP(&again)) { XCTAssertEqual($0 as? SRTPError, .replayed, "\(profile)") }
            XCTAssertEqual(again, wire, "a rejected packet is left as it was")
            // A packet far older than the replay window is rejected too.
            var old = rtp(seq: 10)
            var newer = rtp(seq: 2000)
            try client.protectRTP(&old); try client.protectRTP(&newer)
            try server.unprotectRTP(&newer)
            XCTAssertThrowsError(try server.unprotectRTP(&old)) { XCTAssertEqual($0 as? SRTPError, .replayed) }
        }
    }

    func testKeyingMaterialLayoutFollowsRFC5764() throws {
        // client_write_key | server_write_key | client_write_salt | server_write_salt
        let m = (0..<60).map { UInt8($0) }
        let client = try SRTPKeys(keyingMaterial: m, profile: .aes128CmHmacSha1_80, isDTLSClient: true)
        XCTAssertEqual(client.local, Array(0..<16) + Array(32..<46))
        XCTAssertEqual(client.remote, Array(16..<32) + Array(46..<60))
        XCTAssertEqual(SRTPProfile(opensslName: "SRTP_AEAD_AES_128_GCM"), .aeadAes128Gcm)
        XCTAssertEqual(SRTPProfile(rawValue: 0x0001), .aes128CmHmacSha1_80)
        XCTAssertEqual(SRTPProfile.preferred.map(\.opensslName).joined(separator: ":"), "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80")
        let g = (0..<56).map { UInt8($0) }
        let server = try SRTPKeys(keyingMaterial: g, profile: .aeadAes128Gcm, isDTLSClient: false)
        XCTAssertEqual(server.local, Array(16..<32) + Array(44..<56))
        XCTAssertEqual(server.remote, Array(0..<16) + Array(32..<44))
    }

    func testWrongKeysAndBadInputs() throws {
        let (client, _) = try pair(.aeadAes128Gcm)
        let other = try SRTPContext(profile: .aeadAes128Gcm,
                                    keys: SRTPKeys(local: [UInt8](repeating: 1, count: 28), remote: [UInt8](repeating: 2, count: 28)))
        var p = rtp(seq: 1)
        try client.protectRTP(&p)
        XCTAssertThrowsError(try other.unprotectRTP(&p)) { XCTAssertEqual($0 as? SRTPError, .authenticationFailed) }
        var short: [UInt8] = [0x80, 96, 0, 1]
        XCTAssertThrowsError(try other.unprotectRTP(&short)) { guard case .malformed = $0 as? SRTPError else { return XCTFail("\($0)") } }
        XCTAssertThrowsError(try client.protectRTP(&short))
        XCTAssertThrowsError(try SRTPKeys(keyingMaterial: [1, 2, 3], profile: .aes128CmHmacSha1_80, isDTLSClient: true))
        XCTAssertThrowsError(try SRTPContext(profile: .aes128CmHmacSha1_80, keys: SRTPKeys(local: [1], remote: [2])))
    }
}
