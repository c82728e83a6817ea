import OTBase
import OTWire
@testable import OTRTP
@testable import OTTransport
import XCTest

/// The send-side bandwidth estimator on the seeded emulator (virtual clock): every figure is virtual time.
final class BandwidthEstimatorTests: XCTestCase {
    private func config(start: Int, max: Int = 5_000_000, delayBased: Bool = true) -> BandwidthEstimatorConfig {
        var c = BandwidthEstimatorConfig(startBitrateBps: start, minBitrateBps: 50_000, maxBitrateBps: max)
        c.delayBased = delayBased
        return c
    }

    private func describe(_ r: CongestionScenario.Result) -> String {
        "convergence \(r.convergenceTime.map { "\($0.seconds) s" } ?? "never"), final \(r.finalTargetBps) bps, mean \(Int(r.meanTargetBps)), "
            + "utilisation \(r.meanUtilisation ?? -1), queue p95 \(r.queueDelayP95.seconds * 1000) ms, max \(r.queueDelayMax.seconds * 1000) ms, "
            + "trace \(stride(from: 0, to: r.samples.count, by: 20).map { r.samples[$0].targetBps / 1000 })"
    }

    /// (a) 1 Mbit/s bottleneck, 2.5 Mbit/s start: the estimate settles under the capacity quickly and keeps the
    /// queue short, where the loss-only rule keeps the queue full.
    func testSettlesUnderABottleneckAndKeepsTheQueueShort() {
        var s = CongestionScenario(name: "1M", estimator: config(start: 2_500_000), capacity: [CapacityStep(at: .zero, bitsPerSecond: 1_000_000)])
        s.duration = .seconds(40)
        let r = s.run()
        print("GCC:", describe(r))
        let conv = try? XCTUnwrap(r.convergenceTime, describe(r))
        XCTAssertLessThanOrEqual(conv ?? .seconds(99), .seconds(10), describe(r))
        XCTAssertLessThan(r.finalTargetBps, 1_100_000, describe(r))
        XCTAssertGreaterThan(r.meanTargetBps, 600_000, "the link stays in use: \(describe(r))")
        XCTAssertLessThan(r.queueDelayP95, .milliseconds(150), describe(r))
        XCTAssertGreaterThan(r.meanUtilisation ?? 0, 0.6, describe(r))

        s.estimator.delayBased = false
        let baseline = s.run()
        print("loss only:", describe(baseline))
        XCTAssertGreaterThan(baseline.queueDelayP95, r.queueDelayP95 * 2, "loss-only keeps the queue full: \(describe(baseline))")
    }

    /// (b) Capacity rises from 500 kbit/s to 2 Mbit/s: the estimate follows it up.
    func testRampsUpWhenCapacityRises() {
        var s = CongestionScenario(name: "up", estimator: config(start: 300_000),
                                   capacity: [CapacityStep(at: .zero, bitsPerSecond: 500_000), CapacityStep(at: .seconds(20), bitsPerSecond: 2_000_000)])
        s.duration = .seconds(60)
        let r = s.run()
        print("ramp:", describe(r))
        let before = r.samples.filter { $0.time >= .seconds(15) && $0.time < .seconds(20) }.map(\.targetBps)
        XCTAssertLessThan(before.max() ?? .max, 560_000, "under the first capacity: \(describe(r))")
        XCTAssertGreaterThan(r.finalTargetBps, 1_400_000, describe(r))
        XCTAssertLessThan(r.finalTargetBps, 2_200_000, describe(r))
        XCTAssertNotNil(r.convergenceTime, describe(r))
        XCTAssertLessThan(r.queueDelayP95, .milliseconds(150), describe(r))
    }

    /// (c) 5% random loss and no bottleneck: the delay-based part does not pull the rate under what the loss rule
    /// allows (it holds between 2% and 10%), with little jitter and with enough jitter to reorder packets across
    /// feedback intervals.
    func testRandomLossWithoutABottleneckDoesNotCollapseTheRate() {
        for (jitter, seed) in [(Duration.milliseconds(2), UInt64(3)), (.milliseconds(10), 4)] {
            var s = CongestionScenario(name: "loss", estimator: config(start: 1_000_000, max: 2_500_000), capacity: [CapacityStep(at: .zero, bitsPerSecond: nil)])
            s.loss = 0.05
            s.jitter = jitter
            s.seed = seed
            s.duration = .seconds(30)
            let r = s.run()
            s.estimator.delayBased = false
            let baseline = s.run()
            print("5% loss, jitter \(jitter): GCC:", describe(r), "\nloss only:", describe(baseline))
            XCTAssertGreaterThanOrEqual(Double(r.finalTargetBps), 0.9 * Double(baseline.finalTargetBps), describe(r))
            XCTAssertGreaterThanOrEqual(r.meanTargetBps, 0.9 * baseline.meanTargetBps, describe(r))
            XCTAssertGreaterThan(r.feedbackHandled, 400, "feedback kept coming")
            // Reordered packets are reported again when they arrive late, so jitter is not taken for loss.
            XCTAssertGreaterThan(r.finalTargetBps, 900_000, "5% loss holds the rate: \(describe(r))")
        }
    }
}

/// The estimator's rules on synthetic feedback: 1000-byte packets sent every 8 ms (1 Mbit/s), arriving 20 ms
/// later through a link of `linkBps` (a queue builds when it is slower), fed back every 50 ms.
final class BandwidthEstimatorRuleTests: XCTestCase {
    private func run(startBps: Int, linkBps: Int, seconds: Int, observe: (BandwidthEstimate, Instant) -> Void) {
        var bwe = SendSideBandwidthEstimator(config: BandwidthEstimatorConfig(startBitrateBps: startBps, minBitrateBps: 50_000, maxBitrateBps: 5_000_000))
        var recorder = TransportCCRecorder()
        let t0 = Instant(micros: 2_000_000)
        var pending: [(seq: UInt16, arrival: Instant)] = []
        var linkFree = t0
        var nextFeedback = t0 + .milliseconds(50)
        for i in 0..<(seconds * 125) {
            let sent = t0 + .milliseconds(Int64(i) * 8)
            while nextFeedback <= sent {
                while let p = pending.first, p.arrival <= nextFeedback { recorder.record(sequence: p.seq, arrival: p.arrival); pending.removeFirst() }
                if let fb = recorder.feedback(senderSSRC: 1, mediaSSRC: 2) {
                    observe(bwe.handleFeedback(fb, now: nextFeedback + .milliseconds(20)), nextFeedback)
                }
                nextFeedback = nextFeedback + .milliseconds(50)
            }
            bwe.packetSent(sequence: UInt16(truncatingIfNeeded: i), size: 1000, at: sent)
            linkFree = max(linkFree, sent + .milliseconds(20)) + .microseconds(Int64(8000 * 1_000_000 / linkBps))
            pending.append((UInt16(truncatingIfNeeded: i), linkFree))
        }
    }

    func testGrowingQueueIsOveruseAndCutsToBetaTimesAcknowledgedRate() {
        var firstCut: BandwidthEstimate?
        var overuse = false
        run(startBps: 1_000_000, linkBps: 800_000, seconds: 4) { e, _ in
            if e.usage == .overusing { overuse = true }
            if firstCut == nil, e.delayBasedBitrateBps < 1_000_000 { firstCut = e }
        }
        XCTAssertTrue(overuse, "a queue growing by 2 ms every 8 ms is over-use")
        guard let cut = firstCut, let acked = cut.acknowledgedBitrateBps else { return XCTFail("the delay-based rate was cut") }
        XCTAssertEqual(Double(acked), 800_000, accuracy: 80_000, "acknowledged rate = the link's")
        XCTAssertEqual(Double(cut.delayBasedBitrateBps), 0.85 * Double(acked), accuracy: 0.02 * Double(acked), "multiplicative decrease to 0.85 x acknowledged")
        XCTAssertEqual(cut.targetBitrateBps, min(cut.delayBasedBitrateBps, cut.lossBasedBitrateBps))
    }

    func testStableDelayIsNormalAndGrowsAboutEightPercentPerSecond() {
        var usages = Set<BandwidthUsage>()
        var last: BandwidthEstimate?
        run(startBps: 500_000, linkBps: 2_000_000, seconds: 6) { e, _ in usages.insert(e.usage); last = e }
        XCTAssertEqual(usages, [.normal])
        let target = Double(last?.targetBitrateBps ?? 0)
        // 500 kbit/s × 1.08^5 ≈ 735 kbit/s (first second: no feedback yet to grow on, then 8 % per second).
        XCTAssertGreaterThan(target, 650_000)
        XCTAssertLessThan(target, 820_000)
        XCTAssertEqual(last?.fractionLost, 0)
    }
}

final class BandwidthEstimatorRobustnessTests: XCTestCase {
    /// Feedback is network input: random bases, reference times and deltas (missing, negative, huge) never trap
    /// and never move the target outside the configured bounds.
    func testArbitraryFeedbackKeepsTheTargetInBounds() {
        var rng = SeededRandom(seed: 77)
        var bwe = SendSideBandwidthEstimator(config: BandwidthEstimatorConfig(startBitrateBps: 800_000, minBitrateBps: 100_000, maxBitrateBps: 3_000_000))
        XCTAssertEqual(bwe.handleFeedback(TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 0, referenceTime: 0, feedbackCount: 0,
                                                              deltas: [1, 2, nil]), now: Instant(micros: 1)).targetBitrateBps, 800_000,
                       "feedback before anything was sent changes nothing")
        var now = Instant(micros: 5_000_000)
        var seq: UInt16 = 65000
        for round in 0..<3000 {
            for _ in 0..<Int(rng.next() % 8) {
                bwe.packetSent(sequence: seq, size: Int(rng.next() % 1500), at: now)
                seq &+= 1
            }
            now = now + .microseconds(Int64(rng.next() % 20_000))
            let count = Int(rng.next() % 40)
            let deltas: [Int32?] = (0..<count).map { _ in
                switch rng.next() % 5 {
                case 0: nil
                case 1: Int32(truncatingIfNeeded: Int64(rng.next() % 65536) - 32768)
                default: Int32(rng.next() % 256)
                }
            }
            let base = round % 3 == 0 ? UInt16(truncatingIfNeeded: rng.next()) : seq &- UInt16(truncatingIfNeeded: rng.next() % 64)
            let fb = TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: base,
                                         referenceTime: Int32(truncatingIfNeeded: rng.next() % 0x100_0000) - 0x80_0000,
                                         feedbackCount: UInt8(truncatingIfNeeded: round), deltas: deltas)
            let e = bwe.handleFeedback(fb, now: now)
            XCTAssertTrue((100_000...3_000_000).contains(e.targetBitrateBps), "\(e)")
            XCTAssertTrue((0...1).contains(e.fractionLost))
        }
    }
}
