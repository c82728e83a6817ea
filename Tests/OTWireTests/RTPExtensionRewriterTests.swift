import OTBase
@testable import OTWire
import XCTest

final class RTPExtensionRewriterTests: XCTestCase {
    /// What Chromium's publishers send on audio: audio level 1, abs-send-time 2, transport-wide sequence 3, MID 4,
    /// plus an element the receiver never negotiated (13, video orientation's id).
    static let chromiumIds = RTPHeaderExtensionIds(absSendTime: 2, transportSequenceNumber: 3, mid: 4, audioLevel: 1)

    static func packet(extensions: [RTPHeaderExtensionElement], csrcs: [UInt32] = [], padding: Int = 0) throws -> [UInt8] {
        RTPPacket(marker: true, payloadType: 111, sequenceNumber: 4242, timestamp: 960_000, ssrc: 0xA0D1, csrcs: csrcs,
                  extensions: try RTPHeaderExtensions(extensions), payload: [0xF8, 1, 2, 3, 4, 5], paddingLength: padding).serialized()
    }
    static let publisherElements: [RTPHeaderExtensionElement] = [
        .init(id: 1, value: [0x85]), .init(id: 2, value: [1, 2, 3]), .init(id: 3, value: [0x12, 0x34]),
        .init(id: 4, value: Array("pa".utf8)[...]), .init(id: 13, value: [0x01]),
    ]

    func elements(_ bytes: [UInt8]) throws -> [UInt8: [UInt8]] {
        var d: [UInt8: [UInt8]] = [:]
        for e in try RTPPacket(parsing: bytes).extensions.elements { d[e.id] = Array(e.value) }
        return d
    }

    func testWritesExactlyTheReceiversExtensionsUnderItsIds() throws {
        let input = try Self.packet(extensions: Self.publisherElements, csrcs: [7, 8], padding: 3)
        // The subscriber: MID as id 2, transport-cc as id 5, audio level as id 7, no abs-send-time; its audio mid is "1".
        let r = RTPExtensionRewriter(source: Self.chromiumIds, target: RTPHeaderExtensionIds(transportSequenceNumber: 5, mid: 2, audioLevel: 7), mid: "1")
        var out: [UInt8] = []
        XCTAssertTrue(r.rewrite(input, into: &out, now: Instant(micros: 1_000_000)))
        let p = try RTPPacket(parsing: out), q = try RTPPacket(parsing: input)
        XCTAssertTrue(p.extensions.isOneByte)
        XCTAssertEqual(try elements(out), [2: Array("1".utf8), 5: [0, 0], 7: [0x85]])  // the publisher's 1, 2, 3, 4, 13 are gone
        XCTAssertEqual(Array(p.payload), Array(q.payload))
        XCTAssertEqual(p.paddingLength, 3)
        XCTAssertEqual(p.csrcs, [7, 8])
        XCTAssertEqual([p.marker ? 1 : 0, Int(p.payloadType), Int(p.sequenceNumber), Int(p.timestamp), Int(p.ssrc)],
                       [1, 111, 4242, 960_000, 0xA0D1])
        // The connection stamps its own transport-wide number where the rewriter left room for it.
        XCTAssertEqual(TransportWideSequenceNumber.valueOffset(in: out, id: 5).map { out[$0] }, 0)
    }

    func testAbsSendTimeIsTheForwardingTimeAndAudioLevelOnlyWhenTheSenderMeasuredIt() throws {
        let r = RTPExtensionRewriter(source: RTPHeaderExtensionIds(audioLevel: 1), target: RTPHeaderExtensionIds(absSendTime: 3, audioLevel: 1), mid: nil)
        var out: [UInt8] = []
        r.rewrite(try Self.packet(extensions: []), into: &out, now: Instant(micros: 65_500_000))
        XCTAssertEqual(try elements(out), [3: AbsSendTime.encode(micros: 65_500_000)])  // no level to copy
        r.rewrite(try Self.packet(extensions: [.init(id: 1, value: [0x7F])]), into: &out, now: Instant(micros: 2_000_000))
        XCTAssertEqual(try elements(out), [3: AbsSendTime.encode(micros: 2_000_000), 1: [0x7F]])
    }

    func testTwoByteFormForLargeIdsOrALongMid() throws {
        let input = try Self.packet(extensions: Self.publisherElements)
        let wide = RTPExtensionRewriter(source: Self.chromiumIds, target: RTPHeaderExtensionIds(transportSequenceNumber: 200, mid: 20), mid: "v")
        var out: [UInt8] = []
        wide.rewrite(input, into: &out, now: .zero)
        XCTAssertTrue(try RTPPacket(parsing: out).extensions.isTwoByte)
        XCTAssertEqual(try elements(out), [20: Array("v".utf8), 200: [0, 0]])
        XCTAssertEqual(TransportWideSequenceNumber.valueOffset(in: out, id: 200).map { out[$0 - 2] }, 200)
        let longMid = String(repeating: "m", count: 17)
        let long = RTPExtensionRewriter(source: Self.chromiumIds, target: RTPHeaderExtensionIds(mid: 4), mid: longMid)
        long.rewrite(input, into: &out, now: .zero)
        XCTAssertTrue(try RTPPacket(parsing: out).extensions.isTwoByte)
        XCTAssertEqual(try elements(out), [4: Array(longMid.utf8)])
    }

    func testNothingNegotiatedLeavesNoBlockAndABlockIsAddedWhereThereWasNone() throws {
        var out: [UInt8] = []
        RTPExtensionRewriter(source: Self.chromiumIds, target: RTPHeaderExtensionIds(), mid: "0")
            .rewrite(try Self.packet(extensions: Self.publisherElements), into: &out, now: .zero)
        let bare = try RTPPacket(parsing: out)
        XCTAssertTrue(bare.extensions.isEmpty)
        XCTAssertEqual(out[0] & 0x10, 0)
        XCTAssertEqual(out.count, 12 + 6)
        var out2: [UInt8] = []
        RTPExtensionRewriter(source: RTPHeaderExtensionIds(), target: RTPHeaderExtensionIds(mid: 1), mid: "0")
            .rewrite(out, into: &out2, now: .zero)
        XCTAssertEqual(try elements(out2), [1: Array("0".utf8)])
    }

    func testMalformedPacketsAreRefusedAndEveryTruncationIsSafe() throws {
        let r = RTPExtensionRewriter(source: Self.chromiumIds, target: RTPHeaderExtensionIds(transportSequenceNumber: 5, mid: 2, audioLevel: 7), mid: "1")
        let input = try Self.packet(extensions: Self.publisherElements, csrcs: [1], padding: 2)
        var out: [UInt8] = [9, 9]
        for n in 0..<input.count {
            let cut = Array(input.prefix(n))
            if !r.rewrite(cut, into: &out, now: .zero) { XCTAssertEqual(out, [], "\(n) bytes") }
            _ = RTPHeaderExtensions.valueRange(in: cut, id: 4)
        }
        XCTAssertFalse(r.rewrite(Array(input.prefix(11)), into: &out, now: .zero))
        XCTAssertFalse(r.rewrite([0x40] + input.dropFirst(), into: &out, now: .zero))  // RTP version 1
        // Whatever parses as RTP is rewritten into RTP that parses, with the same payload.
        var mutator = FuzzMutator(corpus: [input], seed: 11, maxRandomLength: 80)
        for _ in 0..<3000 {
            let m = mutator.next(from: input)
            guard let p = try? RTPPacket(parsing: m), r.rewrite(m, into: &out, now: .zero) else { continue }
            let q = try RTPPacket(parsing: out)
            XCTAssertEqual(Array(q.payload), Array(p.payload))
        }
    }

    func testIdsFromNegotiatedExtmaps() {
        let ids = RTPHeaderExtensionIds(extmaps: [SDPExtmap(id: 4, uri: MidExtension.uri), SDPExtmap(id: 3, uri: TransportWideSequenceNumber.uri),
                                                  SDPExtmap(id: 13, uri: "urn:3gpp:video-orientation"), SDPExtmap(id: 300, uri: AbsSendTime.uri)])
        XCTAssertEqual(ids, RTPHeaderExtensionIds(transportSequenceNumber: 3, mid: 4))
    }
}
