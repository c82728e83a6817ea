import XCTest
import OTBase
@testable import OTWire

final class RTPPacketTests: XCTestCase {
    func testRoundTripWithCSRCsExtensionsAndPadding() throws {
        let ext = try RTPHeaderExtensions([
            RTPHeaderExtensionElement(id: 3, value: AbsSendTime.encode(micros: 1_500_000)[...]),
            RTPHeaderExtensionElement(id: 5, value: TransportWideSequenceNumber.encode(0xBEEF)[...]),
            RTPHeaderExtensionElement(id: 1, value: AudioLevelExtension.encode(voiceActivity: true, levelDBov: 30)[...]),
            RTPHeaderExtensionElement(id: 9, value: try MidExtension.encode("audio0")[...]),
        ])
        XCTAssertTrue(ext.isOneByte)
        let p = RTPPacket(marker: true, payloadType: 111, sequenceNumber: 65535, timestamp: 0xDEADBEEF, ssrc: 0x01020304,
                          csrcs: [7, 8], extensions: ext, payload: [1, 2, 3, 4, 5][...], paddingLength: 3)
        let bytes = p.serialized()
        XCTAssertEqual(bytes.count, 12 + 8 + ext.encodedLength + 5 + 3)
        XCTAssertEqual(bytes[0] & 0x30, 0x30, "padding and extension bits set")
        let q = try RTPPacket(parsing: bytes)
        XCTAssertEqual(q.marker, true)
        XCTAssertEqual(q.payloadType, 111)
        XCTAssertEqual(q.sequenceNumber, 65535)
        XCTAssertEqual(q.timestamp, 0xDEADBEEF)
        XCTAssertEqual(q.ssrc, 0x01020304)
        XCTAssertEqual(q.csrcs, [7, 8])
        XCTAssertEqual(Array(q.payload), [1, 2, 3, 4, 5])
        XCTAssertEqual(q.paddingLength, 3)
        XCTAssertEqual(q.extensions.elements.map(\.id), [3, 5, 1, 9])
        // 1.5 s in 6.18 fixed point.
        XCTAssertEqual(try AbsSendTime.decode(XCTUnwrap(q.extensions.value(id: 3))), 3 << 17)
        XCTAssertEqual(try TransportWideSequenceNumber.decode(XCTUnwrap(q.extensions.value(id: 5))), 0xBEEF)
        let level = try AudioLevelExtension.decode(XCTUnwrap(q.extensions.value(id: 1)))
        XCTAssertTrue(level.voiceActivity); XCTAssertEqual(level.levelDBov, 30)
        XCTAssertEqual(try MidExtension.decode(XCTUnwrap(q.extensions.value(id: 9))), "audio0")
        XCTAssertNil(q.extensions.value(id: 4))
        XCTAssertEqual(AbsSendTime.encode(micros: 65_500_000), AbsSendTime.encode(micros: 1_500_000), "wraps every 64 s")
        XCTAssertEqual(AbsSendTime.encode(micros: Int64.max).count, 3)
        XCTAssertEqual(q.serialized(), bytes)
    }

    func testTwoByteFormChosenForLongValuesAndLargeIds() throws {
        let long = [UInt8](repeating: 0x41, count: 20)
        let ext = try RTPHeaderExtensions([RTPHeaderExtensionElement(id: 20, value: long[...]),
                                           RTPHeaderExtensionElement(id: 2, value: [9][...])])
        XCTAssertTrue(ext.isTwoByte)
        let p = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3, extensions: ext, payload: [0xAA][...])
        let q = try RTPPacket(parsing: p.serialized())
        XCTAssertEqual(q.extensions.value(id: 20).map(Array.init), long)
        XCTAssertEqual(q.extensions.value(id: 2).map(Array.init), [9])
        XCTAssertEqual(Array(q.payload), [0xAA])
    }

    func testExtensionValuesCanBeRewrittenPerPacket() throws {
        var ext = try RTPHeaderExtensions([
            RTPHeaderExtensionElement(id: 2, value: AbsSendTime.encode(micros: 0)[...]),
            RTPHeaderExtensionElement(id: 4, value: TransportWideSequenceNumber.encode(0)[...]),
        ])
        var wire: [UInt8] = []
        for seq in UInt16(1)...3 {
            try ext.overwrite(id: 4, with: TransportWideSequenceNumber.encode(seq * 100))
            try ext.overwrite(id: 2, with: AbsSendTime.encode(micros: Int64(seq) * 250_000))
            wire.removeAll(keepingCapacity: true)
            RTPPacket(payloadType: 96, sequenceNumber: seq, timestamp: 0, ssrc: 1, extensions: ext, payload: [7][...]).write(into: &wire)
            let p = try RTPPacket(parsing: wire)
            XCTAssertEqual(try TransportWideSequenceNumber.decode(XCTUnwrap(p.extensions.value(id: 4))), seq * 100)
            XCTAssertEqual(try AbsSendTime.decode(XCTUnwrap(p.extensions.value(id: 2))), UInt32(seq) << 16)
        }
        XCTAssertThrowsError(try ext.overwrite(id: 4, with: [1, 2, 3]), "length differs")
        XCTAssertThrowsError(try ext.overwrite(id: 9, with: [1]), "absent")
    }

    func testMalformedPacketsThrow() {
        XCTAssertThrowsError(try RTPPacket(parsing: [0x80, 0x60, 0, 1]))  // truncated
        XCTAssertThrowsError(try RTPPacket(parsing: [UInt8](repeating: 0, count: 12)))  // version 0
        // Padding count larger than the body.
        var bad = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 1, payload: [1, 2][...]).serialized()
        bad[0] |= 0x20; bad[bad.count - 1] = 200
        XCTAssertThrowsError(try RTPPacket(parsing: bad))
        // CSRC count beyond the data.
        XCTAssertThrowsError(try RTPPacket(parsing: [0x8F, 0x60, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]))
        // One-byte extension element running past its block.
        let overrun: [UInt8] = [0x90, 0x60, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xBE, 0xDE, 0, 1, 0x1F, 0, 0, 0]
        XCTAssertThrowsError(try RTPPacket(parsing: overrun)) { XCTAssertTrue("\($0)".contains("overruns")) }
    }

    func testSequenceTrackerClassifiesLossReorderDuplicateAndWrap() {
        var t = RTPSequenceTracker()
        XCTAssertEqual(t.record(65533), .first)
        XCTAssertEqual(t.record(65534), .inOrder)
        XCTAssertEqual(t.record(1), .gap(missing: 2))  // 65535 and 0 missing, across the wrap
        XCTAssertEqual(t.record(0), .late)
        XCTAssertEqual(t.record(0), .duplicate)
        XCTAssertEqual(t.record(65535), .late)
        XCTAssertEqual(t.record(2), .inOrder)
        XCTAssertEqual(t.extend(2) - t.extend(65534), 4)
        XCTAssertEqual(t.record(40000), .reset)
    }
}
