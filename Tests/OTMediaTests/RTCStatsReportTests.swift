import Foundation
import OTBase
@testable import OTMedia
import XCTest

final class RTCStatsReportTests: XCTestCase {
    func parse(_ json: String) throws -> [[String: Any]] {
        let value = try JSONSerialization.jsonObject(with: Data(json.utf8))
        return try XCTUnwrap(value as? [[String: Any]])
    }

    func testReportFromALossyVideoRunCarriesThePipelineCounters() throws {
        let link = try VideoLink(path: SeededLossyPath(seed: 3, lossProbability: 0.02, maxJitter: .milliseconds(4)))
        link.answerNACK = false
        link.dropFrames = [10]
        try link.run(frames: 0..<40)
        let send = link.sender.stats, receive = link.receiver.stats
        var builder = RTCStatsReportBuilder(timestampMillis: 1_700_000_000_123)
        let remote = RemoteInboundReport(ssrc: send.ssrc, fractionLost8: 64, packetsLost: receive.packetsLost, jitterTicks: 900,
                                         clockRate: 90_000, roundTripTime: .milliseconds(42),
                                         totalRoundTripTime: .milliseconds(84), roundTripTimeMeasurements: 2)
        builder.addOutbound(send, mid: "0", framesPerSecond: 30, remote: remote)
        builder.addInbound(receive, mid: "0")
        let report = try parse(builder.json())
        XCTAssertEqual(report.map { $0["type"] as? String }, ["outbound-rtp", "remote-inbound-rtp", "inbound-rtp"])
        for s in report { XCTAssertEqual(s["timestamp"] as? Double, 1_700_000_000_123) }

        let out = report[0]
        XCTAssertEqual(out["kind"] as? String, "video")
        XCTAssertEqual(out["ssrc"] as? Int, Int(send.ssrc))
        XCTAssertEqual(out["packetsSent"] as? Int, send.packetsSent)
        XCTAssertEqual(out["bytesSent"] as? Int, send.bytesSent)
        XCTAssertEqual(out["framesEncoded"] as? Int, 40)
        XCTAssertEqual(out["keyFramesEncoded"] as? Int, send.keyFramesEncoded)
        XCTAssertEqual(out["pliCount"] as? Int, send.pliCount)
        XCTAssertGreaterThan(send.pliCount, 0)
        XCTAssertEqual(out["remoteId"] as? String, report[1]["id"] as? String)

        let ri = report[1]
        XCTAssertEqual(ri["localId"] as? String, out["id"] as? String)
        XCTAssertEqual(try XCTUnwrap(ri["roundTripTime"] as? Double), 0.042, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(ri["fractionLost"] as? Double), 0.25, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(ri["jitter"] as? Double), 0.01, accuracy: 1e-9)
        XCTAssertEqual(ri["roundTripTimeMeasurements"] as? Int, 2)

        let inbound = report[2]
        XCTAssertEqual(inbound["packetsReceived"] as? Int, receive.packetsReceived)
        XCTAssertEqual(inbound["packetsLost"] as? Int, receive.packetsLost)
        XCTAssertGreaterThan(receive.packetsLost, 0)
        XCTAssertEqual(inbound["framesDecoded"] as? Int, link.decodedCounters.count)
        XCTAssertEqual(inbound["framesDropped"] as? Int, receive.framesDropped)
        XCTAssertGreaterThan(receive.framesDropped, 0)
        XCTAssertEqual(inbound["freezeCount"] as? Int, receive.freezeCount)
        XCTAssertNotNil(inbound["totalFreezesDuration"] as? Double)
        XCTAssertEqual(try XCTUnwrap(inbound["jitter"] as? Double), receive.jitter, accuracy: 1e-9)
        XCTAssertEqual(inbound["mid"] as? String, "0")
    }

    func testAudioEntriesAndRoundTripTimeOnlyWhenKnown() throws {
        var send = AudioSendStats(); send.ssrc = 7; send.packetsSent = 10; send.bytesSent = 800; send.targetBitrate = 32_000
        var receive = AudioReceiveStats(); receive.ssrc = 8; receive.packetsReceived = 9; receive.packetsLost = 1
        receive.concealedSamples = 960; receive.concealmentEvents = 1; receive.totalSamplesReceived = 9600
        var builder = RTCStatsReportBuilder(timestampMillis: 5)
        builder.addOutbound(send, remote: RemoteInboundReport(ssrc: 7, fractionLost8: 0, packetsLost: 0, jitterTicks: 48, clockRate: 48_000))
        builder.addInbound(receive)
        let report = try parse(builder.json())
        XCTAssertEqual(report.count, 3)
        XCTAssertNil(report[1]["roundTripTime"], "no RTT until a report allows one")
        XCTAssertEqual(try XCTUnwrap(report[1]["jitter"] as? Double), 0.001, accuracy: 1e-12)
        XCTAssertEqual(report[0]["targetBitrate"] as? Double, 32_000)
        XCTAssertEqual(report[2]["concealedSamples"] as? Int, 960)
        XCTAssertEqual(report[2]["packetsLost"] as? Int, 1)
        XCTAssertEqual(report[2]["kind"] as? String, "audio")
        XCTAssertNotEqual(report[0]["id"] as? String, report[2]["id"] as? String)
    }

    func testJSONEscapesStringsAndNonFiniteNumbers() throws {
        var s = VideoReceiveStats(); s.ssrc = 1; s.jitter = .nan
        var builder = RTCStatsReportBuilder(timestampMillis: 0)
        builder.addInbound(s, mid: "a\"b\\c\n\u{1}")
        let report = try parse(builder.json())
        XCTAssertEqual(report[0]["mid"] as? String, "a\"b\\c\n\u{1}")
        XCTAssertTrue(report[0]["jitter"] is NSNull)
    }
}
