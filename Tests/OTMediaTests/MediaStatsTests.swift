import OTBase
import XCTest
@testable import OTMedia

private func ms(_ m: Int64) -> Instant { Instant(micros: m * 1000) }

final class MediaStatsTests: XCTestCase {
    func testRateMeterCountsOnlyTheWindow() {
        var meter = RateMeter(window: .seconds(1))
        // 30 fps of 2 500-byte frames for 3 s, then 15 fps of 1 000-byte frames for 2 s.
        var t: Int64 = 0
        for _ in 0..<90 { meter.record(bytes: 2_500, at: ms(t)); t += 33 }
        XCTAssertEqual(meter.framesPerSecond(at: ms(t - 33)), 31, accuracy: 1)
        XCTAssertEqual(meter.bitsPerSecond(at: ms(t - 33)), 31 * 2_500 * 8, accuracy: 2_500 * 8)
        for _ in 0..<30 { meter.record(bytes: 1_000, at: ms(t)); t += 66 }
        XCTAssertEqual(meter.framesPerSecond(at: ms(t - 66)), 15, accuracy: 1)
        XCTAssertEqual(meter.bitsPerSecond(at: ms(t - 66)), 15 * 8_000, accuracy: 8_000)
        XCTAssertEqual(meter.totalFrames, 120)
        XCTAssertEqual(meter.totalBytes, 90 * 2_500 + 30 * 1_000)
        // Nothing for 2 s: the rate falls to zero.
        XCTAssertEqual(meter.framesPerSecond(at: ms(t + 2_000)), 0)
        XCTAssertEqual(meter.bitsPerSecond(at: ms(t + 2_000)), 0)
    }

    func testLatencyPercentilesNearestRank() throws {
        var stats = LatencyStats()
        XCTAssertNil(stats.summary)
        XCTAssertNil(stats.percentile(50))
        var rng = SeededRandom(seed: 5)
        for v in (1...100).shuffled(using: &rng) { stats.add(.milliseconds(v)) }
        let s = try XCTUnwrap(stats.summary)
        XCTAssertEqual(s.count, 100)
        XCTAssertEqual(s.min, 1); XCTAssertEqual(s.p50, 50); XCTAssertEqual(s.p90, 90)
        XCTAssertEqual(s.p95, 95); XCTAssertEqual(s.p99, 99); XCTAssertEqual(s.max, 100)
        XCTAssertEqual(s.mean, 50.5)
        XCTAssertEqual(stats.percentile(0), .milliseconds(1))
        XCTAssertEqual(stats.percentile(100), .milliseconds(100))
    }

    func testLatencyKeepsOnlyTheMostRecentSamples() {
        var stats = LatencyStats(capacity: 10)
        for v in 1...25 { stats.add(micros: Int64(v) * 1000) }
        XCTAssertEqual(stats.count, 10)
        XCTAssertEqual(stats.summary?.min, 16)
        XCTAssertEqual(stats.summary?.max, 25)
    }

    func testStatusLineShowsRatesLossRttAndLatency() {
        var fs = FrameStats()
        XCTAssertEqual(fs.statusLine(at: ms(0)), "video 0.0 fps 0 kbit/s | audio 0 kbit/s | latency -")
        for i in 0..<60 {
            let t = Int64(i) * 50  // 20 fps over 3 s
            fs.videoFrame(bytes: 1_250, capturedAt: ms(t - 40 - Int64(i % 5)), renderedAt: ms(t))
            fs.audioPacket(bytes: 100, at: ms(t))
        }
        XCTAssertEqual(fs.statusLine(at: ms(2_950), lossFraction: 0.0125, rttMillis: 3.4),
                       "video 20.0 fps 200 kbit/s | audio 16 kbit/s | loss 1.3% | rtt 3 ms | latency p50 42 ms p95 44 ms")
    }
}
