import OTBase

/// Decides which lost sequence numbers of one SSRC to NACK and when (RFC 4585 generic NACK):
/// at once when a gap appears, then again at most once per RTT, up to `maxRetries` times, and never
/// for packets older than `maxAge`.
public struct NACKGenerator: Sendable {
    struct Entry { var firstMissing: Instant; var lastSent: Instant?; var retries: Int }

    public var maxRetries = 10
    public var maxAge: Duration = .seconds(1)
    /// Gaps larger than this are not tracked (a restart or a long outage); a keyframe request suits them better.
    public var maxGap = 500
    private var unwrapper = SequenceUnwrapper()
    private var highest: Int64?
    private var missing: [Int64: Entry] = [:]
    /// Counters: sequence numbers NACKed (retries counted), packets that arrived after being NACKed, and NACK
    /// entries given up.
    public private(set) var nacked = 0, recovered = 0, givenUp = 0

    public init() {}

    /// Records an arriving packet.
    public mutating func received(sequence: UInt16, now: Instant) {
        let ext = unwrapper.unwrap(sequence)
        guard let h = highest else { highest = ext; return }
        if ext > h {
            if ext - h - 1 > Int64(maxGap) {
                givenUp += missing.count
                missing.removeAll()
            } else {
                var e = h + 1
                while e < ext { missing[e] = Entry(firstMissing: now, lastSent: nil, retries: 0); e += 1 }
            }
            highest = ext
        } else if let entry = missing.removeValue(forKey: ext), entry.retries > 0 {
            recovered += 1
        }
    }

    /// Sequence numbers to NACK now, given the current round-trip time estimate.
    public mutating func poll(now: Instant, rtt: Duration) -> [UInt16] {
        var out: [Int64] = []
        for ext in Array(missing.keys) {  // iterate a copy of the keys so the updates below do not copy `missing`
            guard let e = missing[ext] else { continue }
            if now - e.firstMissing > maxAge || e.retries >= maxRetries {
                missing[ext] = nil
                givenUp += 1
                continue
            }
            if let last = e.lastSent, now - last < rtt { continue }
            missing[ext]?.lastSent = now
            missing[ext]?.retries += 1
            out.append(ext)
        }
        nacked += out.count
        return out.sorted().map { UInt16(truncatingIfNeeded: $0) }
    }

    /// When `poll` may next return something.
    public func nextPoll(rtt: Duration) -> Instant? {
        missing.values.map { $0.lastSent.map { $0 + rtt } ?? $0.firstMissing }.min()
    }

    /// Sequence numbers currently considered lost.
    public var outstanding: Int { missing.count }
}

/// The sender's store of recently sent packets of one SSRC, answering NACKs (at most once per RTT per packet).
public struct RetransmissionCache: Sendable {
    struct Slot { var seq: UInt16; var packet: [UInt8]; var lastResent: Instant? }
    private var slots: [Slot?]
    /// Packets handed out for resending (and their bytes, unprotected), and NACKed sequence numbers not held.
    public private(set) var resent = 0, resentBytes = 0, missed = 0

    /// Keeps the last `capacity` packets.
    public init(capacity: Int = 1024) { slots = Array(repeating: nil, count: max(16, capacity)) }

    public mutating func store(sequence: UInt16, packet: [UInt8]) {
        slots[Int(sequence) % slots.count] = Slot(seq: sequence, packet: packet, lastResent: nil)
    }

    public func lookup(_ sequence: UInt16) -> [UInt8]? {
        guard let s = slots[Int(sequence) % slots.count], s.seq == sequence else { return nil }
        return s.packet
    }

    /// The stored packets for a NACK's lost list, skipping those resent less than `rtt` ago.
    public mutating func packets(for lost: [UInt16], now: Instant, rtt: Duration) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for seq in lost {
            let i = Int(seq) % slots.count
            guard var s = slots[i], s.seq == seq else { missed += 1; continue }
            if let last = s.lastResent, now - last < rtt { continue }
            s.lastResent = now
            slots[i] = s
            resent += 1
            resentBytes += s.packet.count
            out.append(s.packet)
        }
        return out
    }
}
