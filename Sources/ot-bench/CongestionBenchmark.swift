import Foundation
import OTBase
import OTTransport
import OTWire

/// `ot-bench cc [--quick]`: the send-side bandwidth estimator (GCC: delay-based + loss-based) against the loss-only
/// rule, on the seeded emulator with a virtual clock (deterministic: same figures on every machine). Each scenario
/// runs twice in this process, once per controller; figures are virtual-clock ones. Then the estimator's own cost:
/// heap allocations per packet sent and per feedback, and CPU time per packet.
func runCongestionBenchmark(_ args: [String]) throws {
    let quick = args.contains("--quick")
    let length: Duration = quick ? .seconds(30) : .seconds(60)
    func gcc(start: Int) -> BandwidthEstimatorConfig {
        BandwidthEstimatorConfig(startBitrateBps: start, minBitrateBps: 50_000, maxBitrateBps: 5_000_000)
    }
    var scenarios: [CongestionScenario] = []
    var s = CongestionScenario(name: "1 Mbit/s bottleneck, start 2.5 Mbit/s", estimator: gcc(start: 2_500_000),
                               capacity: [CapacityStep(at: .zero, bitsPerSecond: 1_000_000)])
    s.duration = length
    scenarios.append(s)
    s = CongestionScenario(name: "capacity 0.5 -> 2 Mbit/s at 20 s", estimator: gcc(start: 300_000),
                           capacity: [CapacityStep(at: .zero, bitsPerSecond: 500_000), CapacityStep(at: .seconds(20), bitsPerSecond: 2_000_000)])
    s.duration = length + .seconds(20)
    s.measureAfter = .seconds(25)
    scenarios.append(s)
    s = CongestionScenario(name: "capacity 2 -> 0.5 Mbit/s at 20 s", estimator: gcc(start: 1_000_000),
                           capacity: [CapacityStep(at: .zero, bitsPerSecond: 2_000_000), CapacityStep(at: .seconds(20), bitsPerSecond: 500_000)])
    s.duration = length + .seconds(20)
    s.measureAfter = .seconds(25)
    scenarios.append(s)
    s = CongestionScenario(name: "1 Mbit/s bottleneck, 1% loss, 5 ms jitter", estimator: gcc(start: 300_000),
                           capacity: [CapacityStep(at: .zero, bitsPerSecond: 1_000_000)])
    s.loss = 0.01
    s.jitter = .milliseconds(5)
    s.duration = length
    scenarios.append(s)
    s = CongestionScenario(name: "no bottleneck, 5% loss (max 2.5 Mbit/s)", estimator: gcc(start: 1_000_000),
                           capacity: [CapacityStep(at: .zero, bitsPerSecond: nil)])
    s.estimator.maxBitrateBps = 2_500_000
    s.loss = 0.05
    s.jitter = .milliseconds(2)
    s.duration = length
    scenarios.append(s)

    print("ot-bench cc: send-side BWE (GCC delay+loss) vs loss-only, seeded emulator, virtual clock")
    print("sender: 30 fps frames of target/30 bits in <=1200-byte packets (no pacer); 25 ms one-way delay;")
    print("receiver feedback (RTCP transport-cc) every 50 ms; bottleneck = rate-limited FIFO, 64 KB tail drop")
    print("convergence: after the last capacity change, time until the target (1 s average) stays in [0.6, 1.1] x capacity")
    print("utilisation, goodput, mean target, queue delay: from 10 s on (5 s after the change where capacity changes)\n")
    let header = ["scenario", "controller", "converge", "utilisation", "goodput", "mean target", "queue p95", "queue max"]
    var rows: [[String]] = []
    for scenario in scenarios {
        for delayBased in [true, false] {
            var run = scenario
            run.estimator.delayBased = delayBased
            let r = run.run()
            rows.append([scenario.name, delayBased ? "GCC" : "loss-only",
                         scenario.capacity.last?.bitsPerSecond == nil ? "-" : r.convergenceTime.map { fmt($0.seconds, 1) + " s" } ?? "never",
                         r.meanUtilisation.map { whole($0 * 100) + " %" } ?? "-",
                         whole(r.goodputBps / 1000) + " kbit/s", whole(r.meanTargetBps / 1000) + " kbit/s",
                         whole(r.queueDelayP95.seconds * 1000) + " ms", whole(r.queueDelayMax.seconds * 1000) + " ms"])
        }
    }
    printTable(header, rows)

    // The estimator's own cost on its hot path: record a packet; handle a feedback of 50 packets.
    var bwe = SendSideBandwidthEstimator(config: gcc(start: 1_000_000))
    let packets = quick ? 200_000 : 1_000_000
    var feedbacks: [TransportCCFeedback] = []
    for i in 0..<(packets / 50) {
        feedbacks.append(TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: UInt16(truncatingIfNeeded: i * 50), referenceTime: Int32(i),
                                             feedbackCount: UInt8(truncatingIfNeeded: i), deltas: Array(repeating: 40, count: 50)))
    }
    var now = Instant(micros: 1_000_000)
    // Warm up (buffers reach their capacity), then measure.
    for i in 0..<50 { bwe.packetSent(sequence: UInt16(i), size: 1200, at: now) }
    bwe.handleFeedback(feedbacks[0], now: now)
    var sendAllocs: UInt64 = 0, feedbackAllocs: UInt64 = 0
    let watch = Stopwatch()
    for i in 1..<feedbacks.count {
        let a0 = allocations()
        for k in 0..<50 {
            now = Instant(micros: now.micros + 400)
            bwe.packetSent(sequence: UInt16(truncatingIfNeeded: i * 50 + k), size: 1200, at: now)
        }
        let a1 = allocations()
        bwe.handleFeedback(feedbacks[i], now: now)
        feedbackAllocs += allocations() - a1
        sendAllocs += a1 - a0
    }
    let cpu = watch.elapsed().cpu
    print("\nestimator cost: \(packets) packets, \(feedbacks.count) feedbacks of 50: "
          + "\(fmt(Double(sendAllocs) / Double(packets), 3)) allocations per packet sent, "
          + "\(fmt(Double(feedbackAllocs) / Double(feedbacks.count), 2)) per feedback handled, "
          + "\(whole(cpu * 1e9 / Double(packets))) ns CPU per packet (send + its share of feedback)"
          + " [final estimate \(bwe.targetBitrateBps / 1000) kbit/s]")
}

private func printTable(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { c in all.map { $0[c].count }.max() ?? 0 }
    for (n, r) in all.enumerated() {
        print(r.indices.map { r[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  "))
        if n == 0 { print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
}
