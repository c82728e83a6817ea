import XCTest
import OTTransport
@testable import OTSession

/// The publisher's loss-based bitrate rule and the subscriber's audio-fallback monitor.
final class MediaAdaptationTests: XCTestCase {
    func testLossBasedBitrateCutsUnderHeavyLossGrowsWhenCleanAndStaysInBounds() {
        var r = LossBasedBitrate(minKbps: 100, startKbps: 1000, maxKbps: 1200)
        XCTAssertEqual(r.report(fractionLost: 0.20), 900, "20% loss cuts by 10%")
        XCTAssertEqual(r.report(fractionLost: 0.05), 900, "2–10% holds")
        XCTAssertEqual(r.report(fractionLost: 0.0), 973, "clean grows 8%")
        for _ in 0..<20 { r.report(fractionLost: 0) }
        XCTAssertEqual(r.targetKbps, 1200, "never above the maximum")
        for _ in 0..<40 { r.report(fractionLost: 0.5) }
        XCTAssertEqual(r.targetKbps, 100, "never below the minimum")
    }

    func testQualityMonitorWarnsThenDropsVideoAndRestoresItAfterRecovery() {
        var q = VideoQualityMonitor(lossThreshold: 0.15, windowSeconds: 3)
        XCTAssertNil(q.second(received: 100, lost: 0))
        XCTAssertEqual(q.second(received: 70, lost: 30), .warn)
        XCTAssertNil(q.second(received: 70, lost: 30))
        XCTAssertEqual(q.second(received: 70, lost: 30), .disableVideo)
        XCTAssertTrue(q.videoDisabled)
        XCTAssertNil(q.second(received: 50, lost: 50), "no second warning while video is off")
        XCTAssertNil(q.second(received: 100, lost: 0))
        XCTAssertNil(q.second(received: 100, lost: 1))
        XCTAssertEqual(q.second(received: 100, lost: 0), .enableVideo)
        XCTAssertFalse(q.videoDisabled)
    }

    func testQualityWarningIsLiftedWhenLossRecoversBeforeVideoIsDropped() {
        var q = VideoQualityMonitor(lossThreshold: 0.15, windowSeconds: 3)
        XCTAssertEqual(q.second(received: 80, lost: 20), .warn)
        XCTAssertNil(q.second(received: 90, lost: 10), "between half the threshold and the threshold: no change")
        XCTAssertEqual(q.second(received: 100, lost: 0), .liftWarning)
        XCTAssertFalse(q.videoDisabled)
        XCTAssertNil(q.second(received: 0, lost: 0), "a silent second says nothing")
    }
}
