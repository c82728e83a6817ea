import OTBase

/// What the delay-based detector concludes about the path (draft-ietf-rmcat-gcc-02 §5.4).
public enum BandwidthUsage: String, Sendable, Equatable {
    /// Queues are stable.
    case normal
    /// Queueing delay is growing: we send more than the path carries.
    case overusing
    /// Queueing delay is shrinking: a queue is draining.
    case underusing
}

/// Groups packets into bursts (packets sent within 5 ms of a group's first; a packet that arrives early inside a
/// short burst joins it) and yields the send and arrival deltas between consecutive complete groups (GCC §5.2,
/// as libwebrtc's InterArrival does on send times).
struct InterArrivalGrouper: Sendable {
    private struct Group {
        var firstSend: Int64 = 0
        var lastSend: Int64 = 0
        var firstArrival: Int64 = 0
        var lastArrival: Int64 = 0
    }

    static let burstMicros: Int64 = 5_000
    static let maxBurstMicros: Int64 = 100_000
    private var current: Group?
    private var previous: Group?
    private var reorderedGroups = 0

    /// Adds an acknowledged packet (in arrival order); returns deltas (µs) when it completes a group.
    mutating func add(send: Int64, arrival: Int64) -> (sendDelta: Int64, arrivalDelta: Int64, lastArrival: Int64)? {
        guard var cur = current else {
            current = Group(firstSend: send, lastSend: send, firstArrival: arrival, lastArrival: arrival)
            return nil
        }
        if send < cur.firstSend { return nil }  // sent before this group started: reordered, ignored
        if startsNewGroup(cur, send: send, arrival: arrival) {
            var out: (Int64, Int64, Int64)?
            if let prev = previous {
                let sendDelta = cur.lastSend - prev.lastSend
                let arrivalDelta = cur.lastArrival - prev.lastArrival
                if arrivalDelta < 0 {
                    // Groups arrived out of order; after a few in a row, start over.
                    reorderedGroups += 1
                    if reorderedGroups >= 3 {
                        reorderedGroups = 0
                        previous = nil
                        current = Group(firstSend: send, lastSend: send, firstArrival: arrival, lastArrival: arrival)
                    }
                    return nil
                }
                reorderedGroups = 0
                out = (sendDelta, arrivalDelta, cur.lastArrival)
            }
            previous = cur
            current = Group(firstSend: send, lastSend: send, firstArrival: arrival, lastArrival: arrival)
            return out
        }
        cur.lastSend = max(cur.lastSend, send)
        cur.lastArrival = max(cur.lastArrival, arrival)
        current = cur
        return nil
    }

    private func startsNewGroup(_ g: Group, send: Int64, arrival: Int64) -> Bool {
        if belongsToBurst(g, send: send, arrival: arrival) { return false }
        return send - g.firstSend > Self.burstMicros
    }

    /// A packet that arrives within 5 ms of the group and earlier than its send spacing implies (queued behind it).
    private func belongsToBurst(_ g: Group, send: Int64, arrival: Int64) -> Bool {
        let arrivalDelta = arrival - g.lastArrival
        let sendDelta = send - g.lastSend
        if sendDelta == 0 { return true }
        let propagationDelta = arrivalDelta - sendDelta
        return propagationDelta < 0 && arrivalDelta <= Self.burstMicros && arrival - g.firstArrival < Self.maxBurstMicros
    }
}

/// The trendline filter and over-use detector (GCC §5.3–5.4 as libwebrtc's TrendlineEstimator): accumulates the
/// one-way delay variation between groups, smooths it, fits a line over the last `window` points by least squares
/// and compares the slope (scaled) with an adaptive threshold.
struct TrendlineDetector: Sendable {
    static let window = 20
    static let smoothing = 0.9
    static let thresholdGain = 4.0
    static let overuseTimeMillis = 10.0
    static let kUp = 0.0087
    static let kDown = 0.039

    private var xs: [Double]
    private var ys: [Double]
    private var head = 0
    private var filled = 0
    private var firstArrivalMillis: Double?
    private var accumulatedDelay = 0.0
    private var smoothedDelay = 0.0
    private var deltas = 0
    private(set) var trend = 0.0
    private var previousTrend = 0.0
    /// The adaptive threshold γ (ms).
    private(set) var threshold = 12.5
    private var lastThresholdUpdate: Double?
    private var timeOverUsing = -1.0
    private var overuseCounter = 0
    private(set) var usage: BandwidthUsage = .normal

    init() {
        xs = Array(repeating: 0, count: Self.window)
        ys = Array(repeating: 0, count: Self.window)
    }

    /// One group delta: how much later the group arrived than it was sent, relative to the previous group (ms).
    mutating func update(arrivalDeltaMillis: Double, sendDeltaMillis: Double, arrivalMillis: Double) {
        let delta = arrivalDeltaMillis - sendDeltaMillis
        deltas = min(deltas + 1, 1000)
        let first = firstArrivalMillis ?? arrivalMillis
        firstArrivalMillis = first
        accumulatedDelay += delta
        smoothedDelay = Self.smoothing * smoothedDelay + (1 - Self.smoothing) * accumulatedDelay
        xs[head] = arrivalMillis - first
        ys[head] = smoothedDelay
        head = (head + 1) % Self.window
        filled = min(filled + 1, Self.window)
        if filled == Self.window, let slope = slope() { trend = slope }
        detect(sendDeltaMillis: sendDeltaMillis, nowMillis: arrivalMillis)
    }

    /// Least-squares slope of the points in the window; nil when they all share one x.
    private func slope() -> Double? {
        var sx = 0.0, sy = 0.0
        for i in 0..<filled { sx += xs[i]; sy += ys[i] }
        let mx = sx / Double(filled), my = sy / Double(filled)
        var num = 0.0, den = 0.0
        for i in 0..<filled {
            num += (xs[i] - mx) * (ys[i] - my)
            den += (xs[i] - mx) * (xs[i] - mx)
        }
        return den == 0 ? nil : num / den
    }

    private mutating func detect(sendDeltaMillis: Double, nowMillis: Double) {
        guard deltas >= 2 else { usage = .normal; return }
        let modified = Double(min(deltas, 60)) * trend * Self.thresholdGain
        if modified > threshold {
            if timeOverUsing < 0 { timeOverUsing = sendDeltaMillis / 2 } else { timeOverUsing += sendDeltaMillis }
            overuseCounter += 1
            if timeOverUsing > Self.overuseTimeMillis && overuseCounter > 1 && trend >= previousTrend {
                timeOverUsing = 0
                overuseCounter = 0
                usage = .overusing
            }
        } else if modified < -threshold {
            timeOverUsing = -1
            overuseCounter = 0
            usage = .underusing
        } else {
            timeOverUsing = -1
            overuseCounter = 0
            usage = .normal
        }
        previousTrend = trend
        adaptThreshold(modified, nowMillis: nowMillis)
    }

    /// γ follows |m| slowly upward and faster downward, so it tracks the delay noise without being starved by
    /// a competing flow (GCC §5.4); large outliers leave it alone.
    private mutating func adaptThreshold(_ modified: Double, nowMillis: Double) {
        let last = lastThresholdUpdate ?? nowMillis
        lastThresholdUpdate = nowMillis
        let m = abs(modified)
        if m > threshold + 15 { return }
        let k = m < threshold ? Self.kDown : Self.kUp
        let dt = min(max(nowMillis - last, 0), 100)
        threshold = min(max(threshold + k * (m - threshold) * dt, 6), 600)
    }
}
