import OTBase
@testable import OTMedia
import OTWire
import XCTest

final class NackTrackerTests: XCTestCase {
    let t0 = Instant(micros: 1_000_000)

    func testGapsAreNackedThenRetriedThenGivenUp() {
        var n = NackTracker(retryInterval: .milliseconds(100), maxRetries: 2, lossTimeout: .milliseconds(400))
        XCTAssertTrue(n.packetArrived(65_534, now: t0))
        XCTAssertTrue(n.packetArrived(2, now: t0))   // 65535, 0, 1 missing across the wrap
        XCTAssertEqual(n.missing, [65_535, 0, 1])
        XCTAssertEqual(n.nextDeadline, t0)
        XCTAssertEqual(n.due(now: t0), [65_535, 0, 1])
        XCTAssertEqual(n.due(now: t0 + .milliseconds(50)), [], "not again before the retry interval")
        XCTAssertTrue(n.packetArrived(0, now: t0 + .milliseconds(60)))
        XCTAssertEqual(n.recovered, 1)
        XCTAssertEqual(n.nextDeadline, t0 + .milliseconds(100))
        XCTAssertEqual(n.due(now: t0 + .milliseconds(100)), [65_535, 1])
        XCTAssertEqual(n.due(now: t0 + .milliseconds(250)), [], "at most maxRetries NACKs each")
        XCTAssertFalse(n.hasExpired(now: t0 + .milliseconds(399)))
        XCTAssertTrue(n.hasExpired(now: t0 + .milliseconds(400)))
        XCTAssertTrue(n.packetArrived(1, now: t0), "late and duplicate arrivals are fine")
        XCTAssertEqual(n.missing, [65_535])
    }

    func testATooLargeGapIsGivenUpAtOnce() {
        var n = NackTracker(maxEntries: 10)
        XCTAssertTrue(n.packetArrived(100, now: t0))
        XCTAssertTrue(n.packetArrived(105, now: t0))
        XCTAssertFalse(n.packetArrived(120, now: t0))
        XCTAssertEqual(n.missing, [])
        XCTAssertTrue(n.packetArrived(121, now: t0))
        XCTAssertEqual(n.missing, [], "tracking continues from the new position")
    }

    func testReceiveStatisticsCountLossAndJitter() {
        var s = RTPReceiveStatistics(clockRate: 90_000)
        // Packets every 10 ms of RTP time, arriving every 10 ms except one 4 ms late; sequence 3 is lost.
        let arrivals: [(seq: UInt16, ts: UInt32, at: Int64)] = [(0, 0, 0), (1, 900, 10_000), (2, 1800, 24_000), (4, 3600, 40_000)]
        for a in arrivals {
            s.record(RTPPacket(payloadType: 96, sequenceNumber: a.seq, timestamp: a.ts, ssrc: 1, payload: [1, 2, 3]), now: t0 + .microseconds(a.at))
        }
        s.record(RTPPacket(payloadType: 96, sequenceNumber: 4, timestamp: 3600, ssrc: 1, payload: [1, 2, 3]), now: t0 + .milliseconds(41))
        XCTAssertEqual(s.packetsReceived, 4)
        XCTAssertEqual(s.duplicatePackets, 1)
        XCTAssertEqual(s.bytesReceived, 12)
        XCTAssertEqual(s.headerBytesReceived, 48)
        XCTAssertEqual(s.packetsLost, 1)
        // RFC 3550 A.8: J += (|D| - J) / 16, D = arrival spacing - RTP spacing in clock units:
        // 900 - 900 = 0; 1260 - 900 = 360 (4 ms late); 1440 - 1800 = -360 (4 ms early).
        var j = 0.0
        for d in [0.0, 360, 360] { j += (abs(d) - j) / 16 }
        XCTAssertEqual(s.jitter, j, accuracy: 1e-9)
        XCTAssertEqual(s.jitterSeconds, j / 90_000, accuracy: 1e-12)
        s.rebase()
        s.record(RTPPacket(payloadType: 96, sequenceNumber: 40_000, timestamp: 0, ssrc: 2, payload: []), now: t0)
        XCTAssertEqual(s.packetsLost, 1, "a new stream's first packet is not a gap")
    }
}
