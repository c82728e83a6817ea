import OTBase
import OTRTP
import OTWire

/// A step of a bottleneck's capacity: from `at` (since the start of the run) the link carries `bitsPerSecond`
/// (nil: unlimited).
public struct CapacityStep: Sendable, Equatable {
    public var at: Duration
    public var bitsPerSecond: Int?
    public init(at: Duration, bitsPerSecond: Int?) { self.at = at; self.bitsPerSecond = bitsPerSecond }
}

/// A deterministic congestion-control experiment on the seeded `NetworkEmulator` and a `VirtualClock`: a video-like
/// sender (one frame every 1/`frameRate` s of target/`frameRate` bits, sent as a burst of packets of at most
/// `packetSize` bytes, no pacer) follows a `SendSideBandwidthEstimator`; the receiver records arrivals with a
/// `TransportCCRecorder` and sends RTCP transport-wide feedback every `feedbackInterval` back over the emulator.
/// The bottleneck is the emulator's rate-limited FIFO (queueing delay, tail drop beyond `queueLimit` bytes).
public struct CongestionScenario: Sendable {
    public var name: String
    public var seed: UInt64 = 1
    public var estimator: BandwidthEstimatorConfig
    /// Capacity over time, in order; the first step should be at `.zero`.
    public var capacity: [CapacityStep]
    /// One-way base delay and random extra delay, each direction.
    public var delay: Duration = .milliseconds(25)
    public var jitter: Duration = .zero
    /// Random loss each direction (before the bottleneck).
    public var loss = 0.0
    public var queueLimit = 64 * 1024
    public var duration: Duration = .seconds(60)
    public var frameRate = 30
    public var packetSize = 1200
    public var feedbackInterval: Duration = .milliseconds(50)
    /// Utilisation and queueing delay are measured from this time on (after start-up).
    public var measureAfter: Duration = .seconds(10)

    public init(name: String, estimator: BandwidthEstimatorConfig, capacity: [CapacityStep]) {
        self.name = name; self.estimator = estimator; self.capacity = capacity
    }

    /// The estimator's state every 100 ms of a run.
    public struct Sample: Sendable, Equatable {
        public var time: Duration
        public var targetBps: Int
        public var capacityBps: Int?
        public var queueDelay: Duration
        public var usage: BandwidthUsage
    }

    /// What a run measured (virtual-clock figures).
    public struct Result: Sendable {
        public var samples: [Sample]
        /// Time from the last capacity change until the target, averaged over 1 s, entered [0.6, 1.1] × capacity
        /// and stayed there to the end; nil when it never settled (or the link is unlimited).
        public var convergenceTime: Duration?
        /// Bits delivered through the bottleneck ÷ its capacity, after `measureAfter` (nil when unlimited).
        public var meanUtilisation: Double?
        /// Bits per second delivered after `measureAfter`.
        public var goodputBps: Double
        /// Queueing delay seen by packets sent after `measureAfter`: 95th percentile and maximum.
        public var queueDelayP95: Duration
        public var queueDelayMax: Duration
        /// Mean target after `measureAfter`, and the last one.
        public var meanTargetBps: Double
        public var finalTargetBps: Int
        public var packetsSent: Int
        public var feedbackHandled: Int
        /// Samples where the detector said over-use.
        public var overuseSamples: Int
    }

    /// Runs the scenario to its end.
    public func run() -> Result {
        let clock = VirtualClock()
        var net = NetworkEmulator(seed: seed, conditions: LinkConditions(delay: delay, jitter: jitter, loss: loss,
                                                                         rateBitsPerSecond: capacity.first?.bitsPerSecond))
        net.conditions.queueLimit = queueLimit
        let sender = TransportAddress(ip: .v4(0x0A00_0001), port: 5000)
        let receiver = TransportAddress(ip: .v4(0x0A00_0002), port: 6000)
        var bwe = SendSideBandwidthEstimator(config: estimator)
        var recorder = TransportCCRecorder()
        let start = clock.now(), end = start + duration, measureFrom = start + measureAfter
        let frameInterval = Duration.microseconds(1_000_000 / Int64(max(1, frameRate)))
        var nextFrame = start, nextFeedback = start + feedbackInterval, nextSample = start
        var step = 0
        var seq: UInt16 = 0
        var samples: [Sample] = []
        var queueDelays: [Int64] = []
        var deliveredBits = 0.0, capacityBits = 0.0
        var packetsSent = 0
        var lastCapacityChange = Duration.zero
        var unlimitedSeen = capacity.first?.bitsPerSecond == nil

        while clock.now() < end {
            let now = clock.now()
            while step + 1 < capacity.count, start + capacity[step + 1].at <= now {
                step += 1
                net.conditions.rateBitsPerSecond = capacity[step].bitsPerSecond
                lastCapacityChange = capacity[step].at
                if capacity[step].bitsPerSecond == nil { unlimitedSeen = true }
            }
            while let d = net.poll(now: now) {
                if d.to == receiver {
                    guard d.bytes.count >= 2 else { continue }
                    recorder.record(sequence: UInt16(d.bytes[0]) << 8 | UInt16(d.bytes[1]), arrival: now)
                    if now >= measureFrom { deliveredBits += Double(d.bytes.count * 8) }
                } else if let packets = try? RTCP.parse(d.bytes) {
                    for case .transportCC(let fb) in packets { bwe.handleFeedback(fb, now: now) }
                }
            }
            if now >= nextFrame {
                let frameBytes = max(bwe.targetBitrateBps / 8 / max(1, frameRate), 100)
                let count = (frameBytes + packetSize - 1) / packetSize
                for i in 0..<count {
                    let size = frameBytes / count + (i < frameBytes % count ? 1 : 0)
                    var bytes = [UInt8](repeating: 0, count: max(size, 2))
                    bytes[0] = UInt8(seq >> 8); bytes[1] = UInt8(truncatingIfNeeded: seq)
                    if now >= measureFrom { queueDelays.append(net.queueDelay(from: sender.ip, now: now).microseconds) }
                    bwe.packetSent(sequence: seq, size: bytes.count, at: now)
                    net.send(bytes, from: sender, to: receiver, now: now)
                    seq &+= 1
                    packetsSent += 1
                }
                nextFrame = nextFrame + frameInterval
            }
            if now >= nextFeedback {
                if let fb = recorder.feedback(senderSSRC: 2, mediaSSRC: 1) {
                    net.send(RTCP.serialize([.transportCC(fb)]), from: receiver, to: sender, now: now)
                }
                nextFeedback = nextFeedback + feedbackInterval
            }
            if now >= nextSample {
                let e = bwe.estimate
                samples.append(Sample(time: now - start, targetBps: e.targetBitrateBps, capacityBps: capacity[step].bitsPerSecond,
                                      queueDelay: net.queueDelay(from: sender.ip, now: now), usage: e.usage))
                if now >= measureFrom, let c = capacity[step].bitsPerSecond { capacityBits += Double(c) * 0.1 }
                nextSample = nextSample + .milliseconds(100)
            }
            var next = min(nextFrame, nextFeedback, nextSample, end)
            if let d = net.nextDelivery { next = min(next, d) }
            if step + 1 < capacity.count { next = min(next, start + capacity[step + 1].at) }
            clock.advance(to: max(next, now))
        }

        queueDelays.sort()
        let p95 = queueDelays.isEmpty ? 0 : queueDelays[min(queueDelays.count - 1, queueDelays.count * 95 / 100)]
        let measured = samples.filter { $0.time >= measureAfter }
        var convergence: Duration?
        if let cap = capacity[step].bitsPerSecond {
            // The target averaged over the last second (AIMD probes briefly above capacity before each cut).
            let band = Double(cap) * 0.6 ... Double(cap) * 1.1
            let after = samples.filter { $0.time >= lastCapacityChange }
            var averaged: [Double] = []
            var sum = 0.0
            for (i, x) in after.enumerated() {
                sum += Double(x.targetBps)
                if i >= 10 { sum -= Double(after[i - 10].targetBps) }
                averaged.append(sum / Double(min(i + 1, 10)))
            }
            if let lastOut = averaged.lastIndex(where: { !band.contains($0) }) {
                if lastOut + 1 < after.count { convergence = after[lastOut + 1].time - lastCapacityChange }
            } else if let first = after.first {
                convergence = first.time - lastCapacityChange
            }
        }
        let seconds = Double((duration - measureAfter).microseconds) / 1_000_000
        return Result(samples: samples, convergenceTime: convergence,
                      meanUtilisation: unlimitedSeen || capacityBits == 0 ? nil : deliveredBits / capacityBits,
                      goodputBps: seconds > 0 ? deliveredBits / seconds : 0,
                      queueDelayP95: .microseconds(p95), queueDelayMax: .microseconds(queueDelays.last ?? 0),
                      meanTargetBps: measured.isEmpty ? 0 : Double(measured.map(\.targetBps).reduce(0, +)) / Double(measured.count),
                      finalTargetBps: bwe.targetBitrateBps, packetsSent: packetsSent, feedbackHandled: bwe.feedbackCount,
                      overuseSamples: samples.filter { $0.usage == .overusing }.count)
    }
}
