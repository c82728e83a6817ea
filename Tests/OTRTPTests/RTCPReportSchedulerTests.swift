import OTBase
@testable import OTRTP
import XCTest

final class RTCPReportSchedulerTests: XCTestCase {
    let t0 = Instant(micros: 5_000_000)

    /// First report 500 ms after the start, then one per 0.5–1.5 intervals, randomized.
    func testReportsStartAfterHalfASecondThenComeAtRandomizedIntervals() {
        var s = RTCPReportScheduler(interval: .seconds(1), seed: 42, start: t0)
        XCTAssertFalse(s.due(now: t0 + .milliseconds(499)))
        XCTAssertTrue(s.due(now: t0 + .milliseconds(500)))
        XCTAssertFalse(s.due(now: t0 + .milliseconds(500)), "one report per due time")
        var gaps: [Duration] = []
        for _ in 0..<50 {
            let at = s.nextReportAt
            XCTAssertFalse(s.due(now: at - .microseconds(1)))
            let before = at
            XCTAssertTrue(s.due(now: at))
            gaps.append(s.nextReportAt - before)
        }
        XCTAssertTrue(gaps.allSatisfy { $0 >= .milliseconds(500) && $0 <= .milliseconds(1500) }, "\(gaps)")
        XCTAssertGreaterThan(Set(gaps).count, 40, "randomized")
    }

    func testTheSameSeedGivesTheSameScheduleAndAnotherSeedAnother() {
        var a = RTCPReportScheduler(interval: .seconds(1), seed: 7, start: t0)
        var b = RTCPReportScheduler(interval: .seconds(1), seed: 7, start: t0)
        var c = RTCPReportScheduler(interval: .seconds(1), seed: 8, start: t0)
        var differs = false
        for _ in 0..<5 {
            XCTAssertTrue(a.due(now: a.nextReportAt) && b.due(now: b.nextReportAt) && c.due(now: c.nextReportAt))
            XCTAssertEqual(a.nextReportAt, b.nextReportAt)
            differs = differs || a.nextReportAt != c.nextReportAt
        }
        XCTAssertTrue(differs)
    }
}
