import OTBase
import XCTest
@testable import OTWire

/// RED (RFC 2198) and ULPFEC (RFC 5109) payloads.
final class FECWireTests: XCTestCase {
    func testREDPrimaryOnlyAndWithARedundantBlock() throws {
        var out: [UInt8] = []
        REDPayload.writePrimary(payloadType: 96, [1, 2, 3][...], into: &out)
        XCTAssertEqual(out, [96, 1, 2, 3])
        let (redundant, primary) = try REDPayload.parse(out[...])
        XCTAssertEqual(redundant, [])
        XCTAssertEqual(primary, REDBlock(payloadType: 96, data: [1, 2, 3][...]))
        // RFC 2198 §3: a redundant block of PT 0, 160 ticks old, 2 bytes; then the primary of PT 0.
        let two: [UInt8] = [0x80, 0x02, 0x80, 0x02, 0x00, 0xAA, 0xBB, 0xCC]
        let parsed = try REDPayload.parse(two[...])
        XCTAssertEqual(parsed.redundant.map(\.timestampOffset), [160])
        XCTAssertEqual(parsed.redundant.map { Array($0.data) }, [[0xAA, 0xBB]])
        XCTAssertEqual(Array(parsed.primary.data), [0xCC])
        XCTAssertThrowsError(try REDPayload.parse([0x80, 0x02, 0x80, 0x09, 0x00, 0xAA][...]), "a block longer than the payload")
        XCTAssertThrowsError(try REDPayload.parse([][...]))
    }

    private func packet(seq: UInt16, marker: Bool, pt: UInt8 = 96, size: Int, ext: Bool = false) -> [UInt8] {
        var e = RTPHeaderExtensions()
        if ext { e = try! RTPHeaderExtensions([RTPHeaderExtensionElement(id: 2, value: [0x12, 0x34][...])]) }
        return RTPPacket(marker: marker, payloadType: pt, sequenceNumber: seq, timestamp: 90_000 &+ UInt32(seq) * 3000, ssrc: 0xABCD,
                         extensions: e, payload: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seq)) }[...]).serialized()
    }

    func testULPFECRebuildsAnyOneMissingPacket() throws {
        let packets = [packet(seq: 65534, marker: false, size: 300), packet(seq: 65535, marker: false, size: 17, ext: true),
                       packet(seq: 0, marker: false, pt: 100, size: 1000), packet(seq: 1, marker: true, size: 45)]
        let fec = try XCTUnwrap(ULPFECPayload(protecting: packets))
        XCTAssertEqual(fec.sequenceBase, 65534, "across the wrap")
        XCTAssertEqual(fec.protectedSequences, [65534, 65535, 0, 1])
        XCTAssertEqual(fec.protectedData.count, 1000)
        var wire: [UInt8] = []
        fec.write(into: &wire)
        XCTAssertEqual(wire.count, 10 + 4 + 1000, "short mask")
        let parsed = try ULPFECPayload(parsing: wire[...])
        XCTAssertEqual(parsed, fec)
        for missing in packets.indices {
            let bySeq = Dictionary(uniqueKeysWithValues: packets.enumerated().filter { $0.offset != missing }
                .map { (UInt16($0.element[2]) << 8 | UInt16($0.element[3]), $0.element) })
            XCTAssertEqual(parsed.recover(ssrc: 0xABCD, present: { bySeq[$0] }), packets[missing], "packet \(missing) rebuilt bit for bit")
        }
        let two = Dictionary(uniqueKeysWithValues: packets.prefix(2).map { (UInt16($0[2]) << 8 | UInt16($0[3]), $0) })
        XCTAssertNil(parsed.recover(ssrc: 0xABCD, present: { two[$0] }), "two missing: nothing to rebuild")
    }

    func testULPFECLongMaskAndMalformedInput() throws {
        let packets = [packet(seq: 10, marker: false, size: 20), packet(seq: 40, marker: true, size: 30)]
        let fec = try XCTUnwrap(ULPFECPayload(protecting: packets))
        var wire: [UInt8] = []
        fec.write(into: &wire)
        XCTAssertEqual(wire[0] & 0x40, 0x40, "the L bit: a 48-bit mask")
        XCTAssertEqual(try ULPFECPayload(parsing: wire[...]).protectedSequences, [10, 40])
        XCTAssertNil(ULPFECPayload(protecting: [packet(seq: 0, marker: false, size: 1), packet(seq: 60, marker: false, size: 1)]),
                     "more than 48 apart")
        XCTAssertThrowsError(try ULPFECPayload(parsing: wire.prefix(12)), "truncated")
        var noMask = wire
        noMask[12] = 0; noMask[13] = 0; noMask[14] = 0; noMask[15] = 0; noMask[16] = 0; noMask[17] = 0
        XCTAssertThrowsError(try ULPFECPayload(parsing: noMask[...]))
        // Random bytes never trap.
        var rng = SeededRandom(seed: 5)
        for _ in 0..<2000 {
            let junk = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if let f = try? ULPFECPayload(parsing: junk[...]) { _ = f.recover(ssrc: 1, present: { _ in [0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] }) }
            _ = try? REDPayload.parse(junk[...])
        }
    }
}
