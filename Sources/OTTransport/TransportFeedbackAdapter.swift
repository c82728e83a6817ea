import OTBase
import OTRTP
import OTWire

/// One packet the remote acknowledged in transport-wide feedback: when we sent it, when it arrived (remote clock),
/// and its size.
struct AckedPacket: Sendable {
    var sendMicros: Int64
    var arrivalMicros: Int64
    var size: Int
}

/// The sender's side of transport-wide congestion control feedback: remembers each packet's send time and size by
/// transport-wide sequence number (a fixed ring, nothing allocated per packet), and turns a `TransportCCFeedback`
/// into acknowledged packets (sorted by arrival) plus counts of packets reported lost.
struct TransportFeedbackAdapter: Sendable {
    private struct Slot: Sendable {
        var sequence: Int64 = -1
        var sendMicros: Int64 = 0
        var size: Int32 = 0
        /// Not yet in feedback, reported missing, reported received.
        var state = State.unreported
    }
    private enum State: Sendable { case unreported, missing, received }

    private var slots: [Slot]
    private let mask: Int
    private var unwrapper = SequenceUnwrapper()
    private(set) var lastSentSequence: Int64?
    private var lastReference: Int32?
    private var referenceMicros: Int64 = 0
    /// The acknowledged packets of the last feedback, by arrival time (storage reused).
    private(set) var acked: [AckedPacket] = []
    /// Packets of the last feedback newly reported lost (less those reported missing before that have now
    /// arrived: it can be negative), and packets reported for the first time.
    private(set) var lost = 0
    private(set) var reported = 0

    /// Remembers the latest `capacity` packets (rounded up to a power of two).
    init(capacity: Int = 8192) {
        var cap = 64
        while cap < capacity { cap <<= 1 }
        slots = Array(repeating: Slot(), count: cap)
        mask = cap - 1
        acked.reserveCapacity(256)
    }

    /// Records a packet sent with transport-wide sequence number `sequence`.
    mutating func sent(sequence: UInt16, size: Int, at now: Instant) {
        let seq = unwrapper.unwrap(sequence)
        slots[Int(seq & Int64(mask))] = Slot(sequence: seq, sendMicros: now.micros, size: Int32(clamping: size))
        if seq > (lastSentSequence ?? .min) { lastSentSequence = seq }
    }

    /// Matches feedback to what we sent; afterwards `acked`, `lost` and `reported` describe it. Packets we do not
    /// remember (too old, never sent) and packets an earlier feedback already reported received are skipped.
    mutating func process(_ fb: TransportCCFeedback) {
        acked.removeAll(keepingCapacity: true)
        lost = 0
        reported = 0
        guard let last = lastSentSequence else { return }
        // The 16-bit base, unwrapped next to the newest sequence number we sent.
        let base = last - Int64(Int16(bitPattern: UInt16(truncatingIfNeeded: last) &- fb.baseSequence))
        // Reference time: 24-bit signed count of 64 ms, unwrapped against the previous feedback's.
        if let prev = lastReference {
            var delta = (fb.referenceTime &- prev) & 0xFF_FFFF
            if delta & 0x80_0000 != 0 { delta -= 0x100_0000 }
            referenceMicros += Int64(delta) * 64_000
        } else {
            referenceMicros = Int64(fb.referenceTime) * 64_000
        }
        lastReference = fb.referenceTime
        var arrival = referenceMicros
        for (i, delta) in fb.deltas.enumerated() {
            if let delta { arrival += Int64(delta) * 250 }
            let seq = base + Int64(i)
            guard seq <= last else { break }
            guard seq >= 0 else { continue }  // before our first packet (an empty slot says -1)
            let index = Int(seq & Int64(mask))
            guard slots[index].sequence == seq else { continue }
            switch (slots[index].state, delta != nil) {
            case (.received, _), (.missing, false):
                continue
            case (.missing, true):
                lost -= 1  // it was late, not lost
            case (.unreported, let received):
                reported += 1
                if !received { lost += 1; slots[index].state = .missing; continue }
            }
            slots[index].state = .received
            acked.append(AckedPacket(sendMicros: slots[index].sendMicros, arrivalMicros: arrival, size: Int(slots[index].size)))
        }
        // Usually in order already: insertion sort by arrival time, then send time (no allocation).
        var i = 1
        while i < acked.count {
            let x = acked[i]
            var j = i - 1
            while j >= 0 && (acked[j].arrivalMicros, acked[j].sendMicros) > (x.arrivalMicros, x.sendMicros) {
                acked[j + 1] = acked[j]
                j -= 1
            }
            acked[j + 1] = x
            i += 1
        }
    }
}

/// Bytes acknowledged over a sliding window of arrival time, as a bit rate (the "R_hat" of GCC): a fixed ring.
struct AcknowledgedRate: Sendable {
    private var times: [Int64]
    private var sizes: [Int]
    private var head = 0
    private var count = 0
    private var bytes = 0
    private let windowMicros: Int64
    private var firstArrival: Int64?
    private var latest: Int64 = 0

    init(window: Duration = .milliseconds(500), capacity: Int = 4096) {
        windowMicros = window.microseconds
        times = Array(repeating: 0, count: capacity)
        sizes = Array(repeating: 0, count: capacity)
    }

    mutating func add(arrivalMicros t: Int64, size: Int) {
        if firstArrival == nil { firstArrival = t }
        latest = max(latest, t)
        if count == times.count { drop() }
        let i = (head + count) % times.count
        times[i] = t; sizes[i] = size
        count += 1
        bytes += size
        while count > 0 && times[head] <= latest - windowMicros { drop() }
    }

    private mutating func drop() {
        bytes -= sizes[head]
        head = (head + 1) % times.count
        count -= 1
    }

    /// Bits per second over the window; nil until a window's worth (or at least 100 ms) was seen.
    var bitsPerSecond: Double? {
        guard let first = firstArrival else { return nil }
        let span = min(windowMicros, latest - first)
        guard span >= 100_000 else { return nil }
        return Double(bytes) * 8 * 1_000_000 / Double(span)
    }
}
