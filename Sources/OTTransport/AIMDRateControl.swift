import Glibc
import OTBase

/// The delay-based rate controller (GCC §5.5, as libwebrtc's AimdRateControl): over-use cuts the rate to
/// β × acknowledged throughput; normal use raises it, multiplicatively (8 %/s) while far from the link capacity
/// last seen at a cut, additively (about one packet per response time) near it; under-use holds it.
struct AIMDRateControl: Sendable {
    enum State: Sendable { case hold, increase, decrease }

    static let beta = 0.85
    let minBps: Double
    let maxBps: Double
    private(set) var bitrateBps: Double
    private(set) var state: State = .increase
    /// Link capacity estimate (kbit/s) from the throughput seen at cuts, with its normalized variance.
    private var capacityKbps: Double?
    private var capacityDeviation = 0.4
    private var lastUpdateMicros: Int64?
    private var lastChangeMicros: Int64?

    init(startBps: Double, minBps: Double, maxBps: Double) {
        self.minBps = minBps; self.maxBps = maxBps
        bitrateBps = min(max(startBps, minBps), maxBps)
    }

    /// True while a recent cut's capacity estimate makes increases additive.
    var nearCapacity: Bool { capacityKbps != nil }

    /// Whether another cut is due: a response time after the last change, or right away when the throughput
    /// fell under half the rate.
    func timeToReduceFurther(now: Int64, ackedBps: Double, rttMicros: Int64) -> Bool {
        let interval = min(max(rttMicros, 10_000), 200_000)
        if let last = lastChangeMicros, now - last < interval { return ackedBps < 0.5 * bitrateBps }
        return true
    }

    /// One update from the detector's verdict at `now`; `ackedBps` is the acknowledged throughput when known.
    mutating func update(_ usage: BandwidthUsage, ackedBps: Double?, rttMicros: Int64, now: Int64) {
        switch usage {
        case .overusing: state = .decrease
        case .normal: if state == .hold { state = .increase; lastChangeMicros = now }
        case .underusing: state = .hold
        }
        let since = lastUpdateMicros.map { Double(min(max(now - $0, 0), 1_000_000)) / 1_000_000 } ?? 0
        lastUpdateMicros = now
        var rate = bitrateBps
        switch state {
        case .hold:
            break
        case .increase:
            if let acked = ackedBps, let upper = capacityUpperBoundKbps, acked / 1000 > upper { capacityKbps = nil }
            if nearCapacity {
                rate += additiveIncreaseBpsPerSecond(rttMicros: rttMicros) * since
            } else {
                rate += max(bitrateBps * (pow(1.08, since) - 1), 1000 * since)
            }
            // Do not run far ahead of what actually gets through (an application-limited sender).
            if let acked = ackedBps {
                let cap = 1.5 * acked + 10_000
                rate = min(rate, max(cap, bitrateBps))
            }
        case .decrease:
            if let acked = ackedBps {
                var cut = Self.beta * acked
                if cut > bitrateBps, let c = capacityKbps { cut = Self.beta * c * 1000 }
                if cut < bitrateBps { rate = cut }
                if let lower = capacityLowerBoundKbps, acked / 1000 < lower { capacityKbps = nil }
                updateCapacity(sampleKbps: acked / 1000)
            } else {
                rate = bitrateBps * Self.beta
            }
            state = .hold
            lastChangeMicros = now
        }
        bitrateBps = min(max(rate, minBps), maxBps)
    }

    /// Bits per second gained per second near capacity: one average video packet per response time (RTT + 100 ms).
    private func additiveIncreaseBpsPerSecond(rttMicros: Int64) -> Double {
        let bitsPerFrame = bitrateBps / 30
        let packetsPerFrame = (bitsPerFrame / (1200 * 8)).rounded(.up)
        let packetBits = bitsPerFrame / max(packetsPerFrame, 1)
        let responseSeconds = Double(rttMicros + 100_000) / 1_000_000
        return max(4000, packetBits / responseSeconds)
    }

    private var capacityUpperBoundKbps: Double? {
        capacityKbps.map { $0 + 3 * (capacityDeviation * $0).squareRoot() }
    }
    private var capacityLowerBoundKbps: Double? {
        capacityKbps.map { max(0, $0 - 3 * (capacityDeviation * $0).squareRoot()) }
    }

    private mutating func updateCapacity(sampleKbps: Double) {
        let alpha = 0.05
        let estimate = capacityKbps.map { (1 - alpha) * $0 + alpha * sampleKbps } ?? sampleKbps
        let norm = max(estimate, 1)
        let error = estimate - sampleKbps
        capacityDeviation = min(max((1 - alpha) * capacityDeviation + alpha * error * error / norm, 0.4), 2.5)
        capacityKbps = estimate
    }
}
