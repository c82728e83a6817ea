import OTBase
import OTWire

/// Receiver side of transport-wide congestion control: records the transport-wide sequence number (from the RTP
/// header extension) and arrival time of each packet in a fixed ring (nothing allocated per packet), and builds
/// the RTCP feedback. A packet that arrives after a feedback reported it missing (reordered by more than the
/// feedback interval) reopens reporting from it, so the sender learns it was not lost.
public struct TransportCCRecorder: Sendable {
    private var sequences: [Int64]
    private var arrivals: [Int64]
    private let mask: Int
    private var unwrapper = SequenceUnwrapper()
    private var highest: Int64 = .min
    private var first: Int64?
    /// First sequence number the next feedback covers.
    private var nextToReport: Int64?
    private var feedbackCount: UInt8 = 0
    /// Most packets one feedback covers.
    public var maxPacketsPerFeedback = 1000
    /// How many sequence numbers back a late arrival may reopen reporting.
    public var lateWindow = 512
    /// Packets recorded (duplicates included).
    public private(set) var packetsRecorded = 0
    /// Transport-wide numbers from the first recorded to the highest that were not recorded (never negative).
    public var packetsLost: Int {
        guard let first, highest != .min else { return 0 }
        return max(0, Int(highest - first + 1) - packetsRecorded)
    }
    /// When the feedback for what was recorded is due (`feedbackInterval` after the first packet it covers).
    public private(set) var feedbackDue: Instant?
    public var feedbackInterval: Duration = .milliseconds(50)

    /// Keeps the latest `capacity` arrivals (rounded up to a power of two, at least 2048).
    public init(capacity: Int = 4096) {
        var cap = 2048
        while cap < capacity { cap <<= 1 }
        sequences = Array(repeating: -1, count: cap)
        arrivals = Array(repeating: 0, count: cap)
        mask = cap - 1
    }

    /// Records a packet's transport-wide sequence number and arrival time (a duplicate keeps the first arrival).
    public mutating func record(sequence: UInt16, arrival: Instant) {
        let ext = unwrapper.unwrap(sequence)
        packetsRecorded += 1
        if first == nil { first = ext }
        if feedbackDue == nil { feedbackDue = arrival + feedbackInterval }
        if highest != .min, ext <= highest - Int64(sequences.count) { return }  // older than the ring holds
        let i = Int(ext & Int64(mask))
        if sequences[i] == ext { return }
        if let n = nextToReport {
            if ext < n {
                guard n - ext <= Int64(lateWindow) else { return }
                nextToReport = ext  // reported missing: report again from here
            }
        } else {
            nextToReport = ext
        }
        sequences[i] = ext
        arrivals[i] = arrival.micros
        highest = max(highest, ext)
    }

    private func arrival(_ seq: Int64) -> Int64? {
        let i = Int(seq & Int64(mask))
        return sequences[i] == seq ? arrivals[i] : nil
    }

    /// Feedback for everything recorded since the last call (nil when nothing new arrived).
    public mutating func feedback(senderSSRC: UInt32, mediaSSRC: UInt32) -> TransportCCFeedback? {
        feedbackDue = nil
        guard let start = nextToReport, highest >= start else { return nil }
        let last = min(highest, start + Int64(max(1, maxPacketsPerFeedback)) - 1)
        var firstArrival: Int64?
        var s = start
        while s <= last, firstArrival == nil { firstArrival = arrival(s); s += 1 }
        // Reference time: multiples of 64 ms; deltas in 250 µs ticks from it, then from each previous arrival.
        let refTicks = (firstArrival ?? arrival(highest) ?? 0) / 64_000
        var previous = refTicks * 64_000
        var deltas: [Int32?] = []
        deltas.reserveCapacity(Int(last - start + 1))
        var seq = start
        while seq <= last {
            if let at = arrival(seq) {
                let d = (at - previous) / 250
                deltas.append(Int32(clamping: d))
                previous += d * 250
            } else {
                deltas.append(nil)
            }
            seq += 1
        }
        nextToReport = last + 1
        defer { feedbackCount &+= 1 }
        return TransportCCFeedback(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, baseSequence: UInt16(truncatingIfNeeded: start),
                                   referenceTime: Int32(truncatingIfNeeded: refTicks) & 0x7F_FFFF, feedbackCount: feedbackCount, deltas: deltas)
    }
}
