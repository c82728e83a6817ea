import OTTransport
import XCTest
@testable import OTSession

/// The publisher's loss-based bitrate rule and the relayed subscriber's audio-fallback settings.
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

    /// The relayed subscriber's fallback on whole seconds of loss (the router's own rules: QualityFallbackTests).
    func testRelayedSubscriberFallbackCountsWholeSecondsOfLoss() {
        var q = QualityFallbackMonitor(config: SubscriberEngine.localFallbackConfig(
            SubscriberSettings(qualityLossThreshold: 0.15, qualityWindowSeconds: 3)))
        let clock = VirtualClock()
        func second(_ received: Int, _ lost: Int) -> QualityFallbackMonitor.Action? {
            clock.advance(by: .seconds(1))
            return q.observe(LinkQualitySample(loss: Double(lost) / Double(received + lost)), now: clock.now())
        }
        XCTAssertNil(second(100, 0))
        XCTAssertNil(second(70, 30), "one poor second (one unlucky window) does not warn")
        XCTAssertEqual(second(70, 30), .warn, "two poor seconds warn")
        XCTAssertEqual(second(70, 30), .disableVideo, "three poor seconds drop video")
        XCTAssertNil(second(50, 50), "no second warning while video is off")
        XCTAssertNil(second(100, 0))
        XCTAssertNil(second(100, 1))
        XCTAssertEqual(second(100, 0), .enableVideo, "three good seconds restore it")
        XCTAssertNil(second(80, 20))
        XCTAssertEqual(second(80, 20), .warn)
        XCTAssertNil(second(90, 10), "between half the threshold and the threshold: not poor")
        XCTAssertEqual(second(100, 0), .liftWarning, "two seconds without a poor one lift the warning")
    }
}
