import OTBase
@testable import OTWire
import XCTest

final class RTCPTests: XCTestCase {
    func testCompoundRoundTrip() throws {
        let rb = RTCPReportBlock(ssrc: 0xBBBB, fractionLost: 25, cumulativeLost: -3, extendedHighestSequence: 70000, jitter: 120, lastSR: 0x1234_5678, delaySinceLastSR: 65536)
        let packets: [RTCPPacket] = [
            .senderReport(RTCPSenderReport(ssrc: 0xAAAA, ntpTime: 0xE000_0000_8000_0000, rtpTime: 90000, packetCount: 10, octetCount: 12000, reports: [rb])),
            .receiverReport(ssrc: 0xAAAA, reports: [rb, RTCPReportBlock(ssrc: 7)]),
            .sourceDescription([RTCPSDESChunk(ssrc: 0xAAAA, items: [(1, "user@host")]), RTCPSDESChunk(ssrc: 2, items: [(1, "abcd"), (6, "tool")])]),
            .nack(senderSSRC: 1, mediaSSRC: 2, lost: [100, 101, 116, 117, 200]),
            .pli(senderSSRC: 1, mediaSSRC: 2),
            .fir(senderSSRC: 1, entries: [.init(ssrc: 2, sequence: 9)]),
            .transportCC(TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 65530, referenceTime: -5, feedbackCount: 3,
                                             deltas: [4, nil, 300, -2, 0] + Array(repeating: 8, count: 20) + [nil, nil])),
            .bye(ssrcs: [0xAAAA], reason: "done"),
            .extendedReport(senderSSRC: 0xAAAA, blocks: [.receiverReferenceTime(ntp: 0xE000_0001_8000_0000),
                                                         .dlrr([.init(ssrc: 2, lastRR: 0x0001_8000, delaySinceLastRR: 6554),
                                                                .init(ssrc: 3, lastRR: 7, delaySinceLastRR: 0)])]),
            .other(packetType: 204, count: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8]),
        ]
        let bytes = RTCP.serialize(packets)
        XCTAssertEqual(bytes.count % 4, 0)
        XCTAssertEqual(DemuxKind.classify(bytes), .rtcp)
        XCTAssertEqual(try RTCP.parse(bytes), packets)
    }

    func testNACKWireLayout() throws {
        // PID 100 with BLP bits for 101 (bit 0) and 116 (bit 15); then a new pair for 117.
        let bytes = RTCP.serialize([.nack(senderSSRC: 1, mediaSSRC: 2, lost: [100, 101, 116, 117])])
        XCTAssertEqual(bytes, [0x81, 205, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 100, 0x80, 0x01, 0, 117, 0, 0])
        // Sequence numbers wrap.
        let wrap = RTCP.serialize([.nack(senderSSRC: 1, mediaSSRC: 2, lost: [65535, 0, 1])])
        XCTAssertEqual(try RTCP.parse(wrap), [.nack(senderSSRC: 1, mediaSSRC: 2, lost: [65535, 0, 1])])
        XCTAssertEqual(wrap.count, 16)
    }

    func testTransportCCUsesRunLengthForLongRuns() throws {
        let fb = TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 10, referenceTime: 100, feedbackCount: 0,
                                     deltas: Array(repeating: 1, count: 500))
        let bytes = RTCP.serialize([.transportCC(fb)])
        // header 4 + ssrcs 8 + base/count/ref/fb 8 + one run-length chunk 2 + 500 small deltas, padded.
        XCTAssertEqual(bytes.count, 4 + 8 + 8 + 2 + 500 + 2)
        XCTAssertEqual(try RTCP.parse(bytes), [.transportCC(fb)])
    }

    func testRejectsMalformed() {
        XCTAssertThrowsError(try RTCP.parse([0x81, 200])) { XCTAssertEqual("\($0)", "RTCP: packet shorter than 4 bytes") }
        XCTAssertThrowsError(try RTCP.parse([0x41, 200, 0, 0])) { XCTAssertEqual("\($0)", "RTCP: version 1, expected 2") }
        XCTAssertThrowsError(try RTCP.parse([0x81, 200, 0, 9, 1, 2, 3, 4]))
        XCTAssertThrowsError(try RTCP.parse([0x81, 205, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2])) {
            XCTAssertEqual("\($0)", "RTCP NACK: FCI length 0 is not a positive multiple of 4")
        }
        XCTAssertThrowsError(try RTCP.parse([0xA1, 201, 0, 1, 0, 0, 0, 0]))  // padding byte 0
        // SR claiming one report block with no block bytes.
        XCTAssertThrowsError(try RTCP.parse([0x81, 200, 0, 6] + Array(repeating: 0, count: 24)))
    }

    /// One malformed packet costs only itself (libwebrtc's rule): a sound header with a body that does not parse is
    /// skipped and counted, the packets around it are read; `parse` stays strict and throws what was skipped.
    func testAMalformedPacketIsSkippedAndTheRestOfTheCompoundKept() {
        let sr = RTCPPacket.senderReport(RTCPSenderReport(ssrc: 7, ntpTime: 0xE000_0000_8000_0000, rtpTime: 90, packetCount: 1,
                                                          octetCount: 100, reports: [RTCPReportBlock(ssrc: 9, fractionLost: 3)]))
        let nack = RTCPPacket.nack(senderSSRC: 7, mediaSSRC: 9, lost: [100, 102])
        let pli = RTCPPacket.pli(senderSSRC: 7, mediaSSRC: 9)
        // An XR whose block claims 20 bytes of the 4 its packet holds.
        let badXR: [UInt8] = [0x80, 207, 0, 3, 0, 0, 0, 7, 7, 0, 0, 5, 0, 0, 0, 0]
        // A NACK whose FCI is 2 bytes (its header's length counts the SSRCs and one padded word).
        let oddNACK: [UInt8] = [0xA1, 205, 0, 3, 0, 0, 0, 7, 0, 0, 0, 9, 0, 100, 0, 2]
        // An SR that claims two report blocks and carries one.
        var shortSR = RTCP.serialize([sr])
        shortSR[0] = 0x82
        func compound(_ parts: [[UInt8]]) -> RTCPCompound { RTCP.parseCompound(Array(parts.joined())) }

        let middle = compound([RTCP.serialize([sr]), badXR, RTCP.serialize([nack])])
        XCTAssertEqual(middle.packets, [sr, nack])
        XCTAssertEqual(middle.skipped, 1)
        XCTAssertEqual(middle.firstError, WireError("RTCP XR: block type 7 of 20 bytes, 4 left"))
        XCTAssertThrowsError(try RTCP.parse(Array([RTCP.serialize([sr]), badXR, RTCP.serialize([nack])].joined()))) {
            XCTAssertEqual("\($0)", "RTCP XR: block type 7 of 20 bytes, 4 left")
        }
        // First, last, alone; two of them, of other kinds.
        XCTAssertEqual(compound([badXR, RTCP.serialize([sr, nack])]).packets, [sr, nack])
        XCTAssertEqual(compound([RTCP.serialize([sr, nack]), badXR]).packets, [sr, nack])
        let alone = compound([badXR])
        XCTAssertEqual(alone.packets, [])
        XCTAssertEqual(alone.skipped, 1)
        let two = compound([oddNACK, RTCP.serialize([pli]), shortSR, RTCP.serialize([nack])])
        XCTAssertEqual(two.packets, [pli, nack])
        XCTAssertEqual(two.skipped, 2)
        XCTAssertEqual(two.firstError, WireError("RTCP NACK: FCI length 2 is not a positive multiple of 4"), "the first is named")
        XCTAssertEqual(compound([RTCP.serialize([sr, nack, pli])]), RTCPCompound(packets: [sr, nack, pli]), "nothing skipped")
    }

    /// A header that does not parse ends the compound: what came before it is kept, what follows is not read (its
    /// length cannot be trusted to find the next packet), and it counts as one skipped packet.
    func testABrokenHeaderEndsTheCompoundAndKeepsWhatCameBefore() {
        let sr = RTCP.serialize([.senderReport(RTCPSenderReport(ssrc: 7, ntpTime: 1, rtpTime: 2, packetCount: 3, octetCount: 4))])
        let pli = RTCP.serialize([.pli(senderSSRC: 7, mediaSSRC: 9)])
        let parsed = try? RTCP.parse(sr + pli)
        for (tail, error) in [([0x81, 205, 0, 50, 0, 0, 0, 7], "truncated RTCP packet body: need 200 bytes at offset 44, have 16"),
                              ([0x41, 205, 0, 1, 0, 0, 0, 7], "RTCP: version 1, expected 2"),
                              ([0xA1, 201, 0, 1, 0, 0, 0, 0], "RTCP: bad padding")] as [([UInt8], String)] {
            let c = RTCP.parseCompound(sr + pli + tail + pli)
            XCTAssertEqual(c.packets, parsed, "\(tail)")
            XCTAssertEqual(c.skipped, 1, "\(tail)")
            XCTAssertEqual(c.firstError?.message, error)
        }
        let short = RTCP.parseCompound(sr + pli + [0x81, 201])
        XCTAssertEqual(short.packets, parsed)
        XCTAssertEqual(short.firstError?.message, "RTCP: packet shorter than 4 bytes")
        let first = RTCP.parseCompound([0x81, 200, 0, 50] + sr)
        XCTAssertEqual(first.packets, [])
        XCTAssertEqual(first.skipped, 1)
        XCTAssertEqual(RTCP.parseCompound([]).skipped, 1, "an empty datagram is no packet")
    }

    func testExtendedReportWireLayout() throws {
        // RFC 3611: RRTR block (BT 4, length 2) and DLRR block (BT 5, length 3 per sub-block).
        let bytes = RTCP.serialize([.extendedReport(senderSSRC: 1, blocks: [.receiverReferenceTime(ntp: 0x0102_0304_0506_0708),
                                                                           .dlrr([.init(ssrc: 2, lastRR: 3, delaySinceLastRR: 4)])])])
        XCTAssertEqual(bytes, [0x80, 207, 0, 8, 0, 0, 0, 1,
                               4, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8,
                               5, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4])
    }

    func testExtendedReportSkipsUnknownBlocksAndKeepsTheCompound() throws {
        // A VoIP metrics block (BT 7, 8 words) between an RRTR and a DLRR, then an RR: the unknown block is skipped by its
        // length, the rest is read.
        let xr: [UInt8] = [0x80, 207, 0, 17, 0, 0, 0, 9,
                           4, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2,
                           7, 0, 0, 8] + Array(repeating: 0xEE, count: 32) + [
                           5, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]
        let rr = RTCP.serialize([.receiverReport(ssrc: 9, reports: [])])
        XCTAssertEqual(try RTCP.parse(xr + rr), [
            .extendedReport(senderSSRC: 9, blocks: [.receiverReferenceTime(ntp: 0x0000_0001_0000_0002),
                                                    .dlrr([.init(ssrc: 2, lastRR: 3, delaySinceLastRR: 4)])]),
            .receiverReport(ssrc: 9, reports: []),
        ])
        // No blocks at all is a valid XR.
        XCTAssertEqual(try RTCP.parse([0x80, 207, 0, 1, 0, 0, 0, 9]), [.extendedReport(senderSSRC: 9, blocks: [])])
    }

    func testRejectsMalformedExtendedReport() {
        func xr(_ blocks: [UInt8]) -> [UInt8] { [0x80, 207, 0, UInt8(1 + blocks.count / 4), 0, 0, 0, 9] + blocks }
        // A block claiming more words than the packet holds.
        XCTAssertThrowsError(try RTCP.parse(xr([7, 0, 0, 5, 0, 0, 0, 0]))) {
            XCTAssertEqual("\($0)", "RTCP XR: block type 7 of 20 bytes, 4 left")
        }
        // An RRTR of the wrong length.
        XCTAssertThrowsError(try RTCP.parse(xr([4, 0, 0, 1, 0, 0, 0, 1]))) {
            XCTAssertEqual("\($0)", "RTCP XR: RRTR block of 4 bytes, expected 8")
        }
        // A DLRR whose length is not whole sub-blocks.
        XCTAssertThrowsError(try RTCP.parse(xr([5, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]))) {
            XCTAssertEqual("\($0)", "RTCP XR: DLRR block of 8 bytes, not a multiple of 12")
        }
        // No room for the sender SSRC.
        XCTAssertThrowsError(try RTCP.parse([0x80, 207, 0, 0]))
    }
}
