import OTBase
@testable import OTWire
import XCTest

final class STUNMessageTests: XCTestCase {
    static func hex(_ s: String) -> [UInt8] {
        let h = s.filter { $0.isHexDigit }
        var out: [UInt8] = []
        var i = h.startIndex
        while i < h.endIndex { let j = h.index(i, offsetBy: 2); out.append(UInt8(h[i..<j], radix: 16) ?? 0); i = j }
        return out
    }

    // RFC 5769 §2.1 sample request.
    static let rfc5769Request = hex("""
        00 01 00 58 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 10 53 54 55 4e 20 74 65 73 74 20 63 6c 69 65 6e 74
        00 24 00 04 6e 00 01 ff 80 29 00 08 93 2f f9 b1 51 26 3b 36
        00 06 00 09 65 76 74 6a 3a 68 36 76 59 20 20 20
        00 08 00 14 9a ea a7 0c bf d8 cb 56 78 1e f2 b5 b2 d3 f2 49 c1 b5 71 a2
        80 28 00 04 e5 7a 3b cf
        """)
    // RFC 5769 §2.2 sample IPv4 response.
    static let rfc5769Response = hex("""
        01 01 00 3c 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 0b 74 65 73 74 20 76 65 63 74 6f 72 20
        00 20 00 08 00 01 a1 47 e1 12 a6 43
        00 08 00 14 2b 91 f5 99 fd 9e 90 c3 8c 74 89 f9 2a f9 ba 53 f0 6b e7 d7
        80 28 00 04 c0 7d 4c 96
        """)
    static let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)

    func testParsesRFC5769RequestAndChecksIntegrityAndFingerprint() throws {
        let m = try STUNMessage.parse(Self.rfc5769Request)
        XCTAssertEqual(m.method, STUNMethod.binding.rawValue)
        XCTAssertEqual(m.messageClass, .request)
        XCTAssertEqual(m.username, "evtj:h6vY")
        XCTAssertEqual(m.priority, 0x6E00_01FF)
        XCTAssertEqual(m.attribute(STUNAttributeType.iceControlled), .iceControlled(0x932F_F9B1_5126_3B36))
        XCTAssertEqual(m.attribute(STUNAttributeType.software), .software("STUN test client"))
        XCTAssertTrue(m.hasValidFingerprint)
        XCTAssertTrue(m.verifyIntegrity(key: Self.password))
        XCTAssertFalse(m.verifyIntegrity(key: Array("wrong".utf8)))
    }

    func testParsesRFC5769ResponseXorMappedAddress() throws {
        let m = try STUNMessage.parse(Self.rfc5769Response)
        XCTAssertEqual(m.messageClass, .success)
        XCTAssertEqual(m.xorMappedAddress, TransportAddress("192.0.2.1:32853"))
        XCTAssertTrue(m.verifyIntegrity(key: Self.password))
    }

    func testEncodeReproducesRFC5769ResponseLayout() throws {
        let parsed = try STUNMessage.parse(Self.rfc5769Response)
        let m = STUNMessage(method: .binding, messageClass: .success, transactionID: parsed.transactionID,
                            attributes: [.software("test vector"), .xorMappedAddress(TransportAddress("192.0.2.1:32853")!)])
        let bytes = m.encode(integrityKey: Self.password, fingerprint: true)
        XCTAssertEqual(bytes.count, Self.rfc5769Response.count)
        // Identical except SOFTWARE's pad byte (the vector pads with a space, we with zero) and so MAC and CRC.
        XCTAssertEqual(Array(bytes[0..<35]), Array(Self.rfc5769Response[0..<35]))
        XCTAssertEqual(Array(bytes[36..<52]), Array(Self.rfc5769Response[36..<52]))
        XCTAssertTrue(try STUNMessage.parse(bytes).verifyIntegrity(key: Self.password))
    }

    func testRoundTripIPv6AndAllAttributes() throws {
        let addr = TransportAddress("[2001:db8:1234:5678:11:2233:4455:6677]:32853")!
        let m = STUNMessage(method: .allocate, messageClass: .error, attributes: [
            .xorMappedAddress(addr), .mappedAddress(addr), .xorRelayedAddress(TransportAddress("10.0.0.1:5000")!),
            .errorCode(code: 487, reason: "Role Conflict"), .username("a:b"), .realm("r"), .nonce("n0nce"),
            .unknownAttributes([0x1234, 0x9999]), .priority(42), .useCandidate, .iceControlling(7), .lifetime(600),
            .channelNumber(0x4001), .requestedTransport(17), .data([1, 2, 3, 4, 5]), .other(type: 0xC001, value: [9]),
        ])
        let b = m.encode(integrityKey: [1, 2, 3])
        XCTAssertTrue(STUNMessage.isSTUN(b[...]))
        let p = try STUNMessage.parse(b)
        XCTAssertEqual(p.method, STUNMethod.allocate.rawValue)
        XCTAssertEqual(p.messageClass, .error)
        XCTAssertEqual(p.transactionID, m.transactionID)
        XCTAssertEqual(p.attributes, m.attributes)
        XCTAssertEqual(p.errorCode?.code, STUNErrorCode.roleConflict)
        XCTAssertTrue(p.verifyIntegrity(key: [1, 2, 3]))
        XCTAssertTrue(p.hasValidFingerprint)
    }

    func testRejectsMalformedWithPreciseErrors() {
        var bad = Self.rfc5769Request
        bad[bad.count - 1] ^= 1
        XCTAssertThrowsError(try STUNMessage.parse(bad)) { XCTAssertEqual(($0 as? WireError)?.message, "STUN: FINGERPRINT mismatch") }
        var cookie = Self.rfc5769Request
        cookie[4] = 0
        XCTAssertThrowsError(try STUNMessage.parse(cookie)) { XCTAssertEqual(($0 as? WireError)?.message, "STUN: bad magic cookie") }
        XCTAssertThrowsError(try STUNMessage.parse(Array(Self.rfc5769Request.prefix(30)))) {
            XCTAssertTrue(($0 as? WireError)?.message.contains("does not match") ?? false, "\($0)")
        }
        XCTAssertThrowsError(try STUNMessage.parse([0, 1, 0]))
        var integ = Self.rfc5769Request
        integ[20 + 20 + 8 + 12 + 16 + 2] = 0  // MESSAGE-INTEGRITY length field low byte
        integ[integ.count - 24 - 1] = 0
        XCTAssertThrowsError(try STUNMessage.parse(integ))
    }

    func testTamperedBodyFailsIntegrity() throws {
        let m = STUNMessage(method: .binding, messageClass: .request, attributes: [.username("x:y"), .priority(5)])
        var b = m.encode(integrityKey: [7, 7], fingerprint: false)
        b[b.count - 25] ^= 0xFF  // last byte of PRIORITY
        XCTAssertFalse(try STUNMessage.parse(b).verifyIntegrity(key: [7, 7]))
    }

    func testLongTermKeyAndCRC() {
        XCTAssertEqual(STUNCrypto.crc32(Array("123456789".utf8)[...]), 0xCBF4_3926)
        XCTAssertEqual(STUNCrypto.md5(Array("abc".utf8)), Self.hex("900150983cd24fb0d6963f7d28e17f72"))
    }

    func testDemuxByFirstByte() {
        XCTAssertEqual(DemuxKind.classify(Self.rfc5769Request), .stun)
        XCTAssertEqual(DemuxKind.classify([22, 0xFE, 0xFD]), .dtls)
        XCTAssertEqual(DemuxKind.classify([0x80, 111]), .rtp)
        XCTAssertEqual(DemuxKind.classify([0x80, 96 | 0x80]), .rtp)  // marker bit set, PT 96
        XCTAssertEqual(DemuxKind.classify([0x81, 200]), .rtcp)
        XCTAssertEqual(DemuxKind.classify([0x81, 205]), .rtcp)
        XCTAssertEqual(DemuxKind.classify([0x40, 0]), .turnChannel)
        XCTAssertEqual(DemuxKind.classify([17]), .zrtp)
        XCTAssertEqual(DemuxKind.classify([]), .unknown)
        XCTAssertEqual(DemuxKind.classify([0x80]), .unknown)
        XCTAssertEqual(DemuxKind.classify([255, 0]), .unknown)
    }

    func testIPAddressParsingAndLAN() {
        XCTAssertEqual(IPAddress("10.1.2.3")?.isLAN, true)
        XCTAssertEqual(IPAddress("172.16.0.1")?.isLAN, true)
        XCTAssertEqual(IPAddress("172.32.0.1")?.isLAN, false)
        XCTAssertEqual(IPAddress("192.168.1.1")?.isLAN, true)
        XCTAssertEqual(IPAddress("8.8.8.8")?.isLAN, false)
        XCTAssertEqual(IPAddress("fe80::1%eth0")?.isLAN, true)
        XCTAssertEqual(IPAddress("fd00::5")?.isLAN, true)
        XCTAssertEqual(IPAddress("2001:db8::1")?.isLAN, false)
        XCTAssertEqual(IPAddress("::1")?.isLoopback, true)
        XCTAssertEqual(IPAddress("2001:db8::1")?.description, "2001:db8::1")
        XCTAssertNil(IPAddress("1.2.3"))
        XCTAssertNil(TransportAddress("1.2.3.4"))
        XCTAssertEqual(TransportAddress("[::1]:9")?.description, "[::1]:9")
    }
}
