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
}
