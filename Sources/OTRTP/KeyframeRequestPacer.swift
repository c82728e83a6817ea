import OTBase

/// Paces keyframe requests (PLI or FIR) for one remote SSRC, sans-IO. The first request goes at once; one made within
/// `interval(rtt:)` of the last sent is held and goes when that interval ends, with every other request made meanwhile
/// folded into it. So a receiver may ask on every loss signal, and keep asking while it waits for a keyframe, and the
/// sender sees one request per interval: none is lost, none is repeated faster than a keyframe could answer it.
public struct KeyframeRequestPacer: Sendable {
    /// The shortest interval between two requests.
    public var minInterval: Duration = .milliseconds(100)
    private var lastSent: Instant?
    /// A request is held for the end of the interval (true: any folded request was a FIR).
    private var held: Bool?
    /// Requests sent, and requests folded into one sent or held.
    public private(set) var sent = 0, folded = 0

    public init(minInterval: Duration = .milliseconds(100)) { self.minInterval = minInterval }

    /// The interval on a path of round-trip time `rtt`: two RTTs (a keyframe asked for needs one to start arriving), at
    /// least `minInterval`.
    /// (Whole microseconds, the resolution of `Instant`: a deadline computed from it is never early.)
    public func interval(rtt: Duration) -> Duration { max(minInterval, (rtt * 2).roundedUpToMicroseconds) }

    /// A request at `now`: true when it is to be sent now; false when it was held or folded (`poll` sends it later).
    public mutating func request(useFIR: Bool = false, now: Instant, rtt: Duration) -> Bool {
        if let last = lastSent, now - last < interval(rtt: rtt) {
            folded += 1
            held = useFIR || held == true
            return false
        }
        held = nil
        lastSent = now
        sent += 1
        return true
    }

    /// The held request if it is due now: send it (as a FIR when true); nil when none is due.
    public mutating func poll(now: Instant, rtt: Duration) -> Bool? {
        guard let useFIR = held, let last = lastSent, now - last >= interval(rtt: rtt) else { return nil }
        held = nil
        lastSent = now
        sent += 1
        return useFIR
    }

    /// When a held request is due.
    public func nextDeadline(rtt: Duration) -> Instant? {
        guard held != nil, let last = lastSent else { return nil }
        return last + interval(rtt: rtt)
    }
}
