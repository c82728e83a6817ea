import OTBase

/// Decides which lost sequence numbers of one SSRC to NACK and when (RFC 4585 generic NACK), sans-IO.
///
/// A gap is NACKed at once; a packet still missing is NACKed again every `retryInterval(rtt:)` (so a retransmission
/// that was lost too is asked for again), up to `maxRetries` times, and on a fast path for at least `minRepairWindow`.
/// A packet is given up when its last NACK had its chance to be answered (and the window has passed), when it has
/// been missing for `maxAge`, or when a gap is too large to track. Numbers between a late packet older than every one
/// received before and the oldest of those are missing too (the stream's first packets came out of order); given-up
/// sequence numbers are handed out by `takeGivenUp()`: a receiver stops waiting for them (and asks for a keyframe).
///
/// The round trip it retries on is the shorter of the session's (`rtt` of `poll`) and that of its own repairs
/// (`repairRoundTrip`): a leg that only receives measures none by RTCP, and its session's estimate stays a default or
/// a handshake's, inflated by the handshake's own losses.
public struct NACKGenerator: Sendable {
    struct Entry { var firstMissing: Instant; var lastSent: Instant?; var retries: Int }

    /// The defaults of `minRetryInterval` and `maxAge`, for receivers that size their waits on them.
    public static let defaultMinRetryInterval: Duration = .milliseconds(20)
    public static let defaultMaxAge: Duration = .seconds(1)

    public var maxRetries = 10
    /// The shortest wait between two NACKs of one packet: on a near-zero RTT (loopback, LAN) a retransmission still
    /// takes a scheduling round or two on a busy host to come back.
    public var minRetryInterval = NACKGenerator.defaultMinRetryInterval
    public var maxAge = NACKGenerator.defaultMaxAge
    /// However short the path, a packet is not given up before it has been missing this long: through the router the
    /// receiver's NACKs find nothing until the publisher's leg has repaired the packet, which takes rounds of its own
    /// (at 20 % loss per leg, ten retries 20 ms apart ran out while the uplink was still repairing, and each give-up
    /// froze video until a keyframe came).
    public var minRepairWindow: Duration = .milliseconds(500)
    /// Gaps larger than this are not tracked (a restart or a long outage); the packets missing before one are given up.
    public var maxGap = 500
    private var unwrapper = SequenceUnwrapper()
    private var highest: Int64?
    /// The oldest sequence number received.
    private var lowest: Int64 = .max
    private var missing: [Int64: Entry] = [:]
    private var abandoned: [UInt16] = []
    /// Counters: sequence numbers NACKed (retries counted), packets that arrived after being NACKed, and missing
    /// packets given up.
    public private(set) var nacked = 0, recovered = 0, givenUp = 0
    /// The round trip of this generator's repairs: from a packet's only NACK to its arrival (after a retry it is
    /// unknown which NACK was answered). A shorter sample is taken at once, a longer one moves it an eighth of the way
    /// (a repair that waited, e.g. on a router's own uplink repair, says little about the path). nil before the first.
    public private(set) var repairRoundTrip: Duration?

    public init() {}

    /// The wait between two NACKs of a packet on a path of round-trip time `rtt`: a bit more than the RTT, at least
    /// `floor`.
    /// (Whole microseconds, the resolution of `Instant`: a deadline computed from it is never early.)
    public static func retryInterval(rtt: Duration, floor: Duration = defaultMinRetryInterval) -> Duration {
        max(floor, (rtt + rtt / 4).roundedUpToMicroseconds)
    }

    /// This generator's wait between two NACKs of a packet: `retryInterval(rtt:floor:)` on the shorter of `rtt` and
    /// `repairRoundTrip`, at least `minRetryInterval`.
    public func retryInterval(rtt: Duration) -> Duration {
        Self.retryInterval(rtt: repairRoundTrip.map { min($0, rtt) } ?? rtt, floor: minRetryInterval)
    }

    /// Records an arriving packet.
    public mutating func received(sequence: UInt16, now: Instant) {
        let ext = unwrapper.unwrap(sequence)
        guard let h = highest else { highest = ext; lowest = ext; return }
        if ext < lowest {
            // Older than every packet so far: the ones between it and them were sent before those, and are missing (a
            // router's first packets to a new subscriber, one repaired late: a loss right after it was never NACKed,
            // and the stream stalled until the depacketizer's backstop gave up seconds later).
            guard lowest - ext - 1 <= Int64(maxGap) else { return }
            markMissing(ext + 1 ..< lowest, now: now)
            lowest = ext
        } else if ext > h {
            if ext - h - 1 > Int64(maxGap) {
                // The receiver sees the jump itself; what was tracked before it will not come either.
                for e in missing.keys.sorted() { abandon(e) }
                missing.removeAll()
            } else {
                markMissing(h + 1 ..< ext, now: now)
            }
            highest = ext
        } else if let entry = missing.removeValue(forKey: ext), entry.retries > 0 {
            recovered += 1
            if entry.retries == 1, let sent = entry.lastSent { sampleRepair(now - sent) }
        }
    }

    /// Sequence numbers to NACK now, given the current round-trip time estimate.
    public mutating func poll(now: Instant, rtt: Duration) -> [UInt16] {
        let interval = retryInterval(rtt: rtt)
        var out: [Int64] = []
        for ext in Array(missing.keys) {  // iterate a copy of the keys so the updates below do not copy `missing`
            guard let e = missing[ext] else { continue }
            let waited = e.lastSent.map { now - $0 }
            // Too old, or every retry was made and the last one had its time to be answered: nothing will come.
            let exhausted = e.retries >= maxRetries && now - e.firstMissing >= minRepairWindow
            if now - e.firstMissing >= maxAge || (exhausted && (waited ?? interval) >= interval) {
                missing[ext] = nil
                abandon(ext)
                continue
            }
            if exhausted { continue }
            if let waited, waited < interval { continue }
            missing[ext]?.lastSent = now
            missing[ext]?.retries += 1
            out.append(ext)
        }
        nacked += out.count
        return out.sorted().map { UInt16(truncatingIfNeeded: $0) }
    }

    /// Sequence numbers given up since the last call (oldest first; at most 1024 are kept between calls).
    public mutating func takeGivenUp() -> [UInt16] {
        defer { abandoned.removeAll(keepingCapacity: true) }
        return abandoned
    }

    /// When `poll` may next NACK or give up something.
    public func nextPoll(rtt: Duration) -> Instant? {
        let interval = retryInterval(rtt: rtt)
        return missing.values.map { e in min(e.firstMissing + maxAge, e.lastSent.map { $0 + interval } ?? e.firstMissing) }.min()
    }

    /// Sequence numbers currently considered lost.
    public var outstanding: Int { missing.count }

    private mutating func sampleRepair(_ d: Duration) {
        guard let r = repairRoundTrip, d > r else { repairRoundTrip = d; return }
        repairRoundTrip = r + (d - r) / 8
    }

    private mutating func markMissing(_ range: Range<Int64>, now: Instant) {
        for e in range { missing[e] = Entry(firstMissing: now, lastSent: nil, retries: 0) }
    }

    private mutating func abandon(_ ext: Int64) {
        givenUp += 1
        if abandoned.count < 1024 { abandoned.append(UInt16(truncatingIfNeeded: ext)) }
    }
}
