import OTBase

/// Frame rate and bitrate over a sliding window (sans-IO: times are passed in).
public struct RateMeter: Sendable {
    public let window: Duration
    private var events: [(time: Instant, bytes: Int)] = []
    private var head = 0
    private var windowBytes = 0
    public private(set) var totalFrames = 0
    public private(set) var totalBytes = 0

    public init(window: Duration = .seconds(1)) { self.window = window }

    /// Counts one frame (or packet) of `bytes` at `time`; times must not go backwards.
    public mutating func record(bytes: Int, at time: Instant) {
        events.append((time, bytes))
        windowBytes += bytes
        totalFrames += 1
        totalBytes += bytes
        prune(before: time - window)
    }

    /// Frames per second over the window ending at `now`.
    public func framesPerSecond(at now: Instant) -> Double {
        Double(inWindow(at: now).frames) / window.seconds
    }

    /// Bits per second over the window ending at `now`.
    public func bitsPerSecond(at now: Instant) -> Double {
        Double(inWindow(at: now).bytes * 8) / window.seconds
    }

    private func inWindow(at now: Instant) -> (frames: Int, bytes: Int) {
        let start = now - window
        var frames = events.count - head, bytes = windowBytes
        var i = head
        while i < events.count && events[i].time <= start {
            frames -= 1; bytes -= events[i].bytes; i += 1
        }
        return (frames, bytes)
    }

    private mutating func prune(before start: Instant) {
        while head < events.count && events[head].time <= start {
            windowBytes -= events[head].bytes
            head += 1
        }
        if head > 64 && head * 2 > events.count {
            events.removeFirst(head)
            head = 0
        }
    }
}

/// Percentiles of a latency (for example capture-to-render) over the most recent samples.
public struct LatencyStats: Sendable {
    /// Summary figures in milliseconds.
    public struct Summary: Sendable, Equatable {
        public var count: Int
        public var min: Double, p50: Double, p90: Double, p95: Double, p99: Double, max: Double, mean: Double
    }

    public let capacity: Int
    private var samples: [Int64] = []  // microseconds, a ring once full
    private var next = 0

    /// Keeps the latest `capacity` samples.
    public init(capacity: Int = 10_000) { self.capacity = max(1, capacity) }

    public var count: Int { samples.count }

    public mutating func add(_ latency: Duration) { add(micros: latency.microseconds) }

    public mutating func add(micros: Int64) {
        if samples.count < capacity { samples.append(micros) } else {
            samples[next] = micros
            next = (next + 1) % capacity
        }
    }

    /// The nearest-rank `p`-th percentile (0…100), or nil with no samples.
    public func percentile(_ p: Double) -> Duration? {
        let sorted = samples.sorted()
        return Self.rank(sorted, p).map { .microseconds($0) }
    }

    /// Count, minimum, percentiles, maximum and mean in milliseconds, or nil with no samples.
    public var summary: Summary? {
        let sorted = samples.sorted()
        guard let lo = sorted.first, let hi = sorted.last else { return nil }
        func ms(_ p: Double) -> Double { Double(Self.rank(sorted, p) ?? 0) / 1000 }
        let mean = Double(sorted.reduce(0, +)) / Double(sorted.count) / 1000
        return Summary(count: sorted.count, min: Double(lo) / 1000, p50: ms(50), p90: ms(90), p95: ms(95),
                       p99: ms(99), max: Double(hi) / 1000, mean: mean)
    }

    private static func rank(_ sorted: [Int64], _ p: Double) -> Int64? {
        guard !sorted.isEmpty else { return nil }
        let r = Int((min(max(p, 0), 100) / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(r, 1), sorted.count) - 1]
    }
}

/// What the demo's status line shows for one received stream: video frame rate and bitrate,
/// audio bitrate, capture-to-render latency; loss and RTT come from the transport's statistics.
public struct FrameStats: Sendable {
    public var video: RateMeter
    public var audio: RateMeter
    public var latency: LatencyStats

    public init(window: Duration = .seconds(1), latencyCapacity: Int = 10_000) {
        video = RateMeter(window: window); audio = RateMeter(window: window)
        latency = LatencyStats(capacity: latencyCapacity)
    }

    /// Counts a rendered video frame of `bytes` encoded bytes; with its capture time (same clock as
    /// `renderedAt`, for example read from the test pattern) the latency is recorded too.
    public mutating func videoFrame(bytes: Int, capturedAt: Instant?, renderedAt: Instant) {
        video.record(bytes: bytes, at: renderedAt)
        if let capturedAt { latency.add(renderedAt - capturedAt) }
    }

    /// Counts a received audio packet of `bytes`.
    public mutating func audioPacket(bytes: Int, at time: Instant) { audio.record(bytes: bytes, at: time) }

    /// One line such as `video 30.0 fps 498 kbit/s | audio 32 kbit/s | loss 0.0% | rtt 1 ms | latency p50 41 ms p95 55 ms`.
    /// `lossFraction` (0…1) and `rttMillis` are left out when nil.
    public func statusLine(at now: Instant, lossFraction: Double? = nil, rttMillis: Double? = nil) -> String {
        var parts = ["video \(Self.fixed(video.framesPerSecond(at: now), 1)) fps \(Int((video.bitsPerSecond(at: now) / 1000).rounded())) kbit/s",
                     "audio \(Int((audio.bitsPerSecond(at: now) / 1000).rounded())) kbit/s"]
        if let lossFraction { parts.append("loss \(Self.fixed(lossFraction * 100, 1))%") }
        if let rttMillis { parts.append("rtt \(Int(rttMillis.rounded())) ms") }
        if let s = latency.summary {
            parts.append("latency p50 \(Int(s.p50.rounded())) ms p95 \(Int(s.p95.rounded())) ms")
        } else {
            parts.append("latency -")
        }
        return parts.joined(separator: " | ")
    }

    private static func fixed(_ v: Double, _ decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let n = Int((v * scale).rounded())
        let whole = n / Int(scale), frac = abs(n % Int(scale))
        let fracText = String(frac)
        return (n < 0 && whole == 0 ? "-" : "") + "\(whole)." + String(repeating: "0", count: decimals - fracText.count) + fracText
    }
}
