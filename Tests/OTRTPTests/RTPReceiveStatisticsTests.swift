import OTBase
import OTWire
@testable import OTRTP
import XCTest

/// One receive-statistics type for the RTP session's report blocks and the pipelines' W3C counters.
final class RTPReceiveStatisticsTests: XCTestCase {
    let t0 = Instant(micros: 1_000_000)

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

    /// The report-block view of the same counters: duplicates count as received (RFC 3550 A.3).
    func testReportBlockCountsDuplicatesAsReceived() {
        var s = RTPReceiveStatistics(ssrc: 5, clockRate: 90000)
        for seq: UInt16 in [65534, 65535, 1, 1] { s.record(sequence: seq, rtpTimestamp: 0, now: t0) }
        let b = s.reportBlock(now: t0)
        XCTAssertEqual(b.extendedHighestSequence, 65536 + 1, "one wrap")
        XCTAssertEqual(b.cumulativeLost, 0, "4 expected (65534...1), 4 received")
        XCTAssertEqual(s.packetsLost, 1, "W3C: the duplicate does not hide the lost 0")
    }

    func testCounterUnwrapperExtendsSequencesAndTimestamps() {
        var seq = SequenceUnwrapper()
        XCTAssertEqual([65530, 2, 65535, 10].map { seq.unwrap($0) }, [65530, 65538, 65535, 65546])
        var ts = CounterUnwrapper(bits: 32)
        XCTAssertEqual([UInt32.max - 10, 5, UInt32.max].map { ts.unwrap($0) }, [Int64(UInt32.max) - 10, Int64(UInt32.max) + 6, Int64(UInt32.max)])
        ts.reset()
        XCTAssertEqual(ts.unwrap(7), 7)
    }
}
