import OTBase
import OTWire

/// Receiver side of transport-wide congestion control: records the transport-wide sequence number
/// (from the RTP header extension) and arrival time of each packet, and builds the RTCP feedback.
public struct TransportCCRecorder: Sendable {
    private var unwrapper = SequenceUnwrapper()
    private var arrivals: [Int64: Instant] = [:]
    /// First sequence number not yet reported.
    private var nextToReport: Int64?
    private var feedbackCount: UInt8 = 0
    /// Most packets one feedback covers.
    public var maxPacketsPerFeedback = 1000

    public init() {}

    /// Records a packet's transport-wide sequence number and arrival time.
    public mutating func record(sequence: UInt16, arrival: Instant) {
        let ext = unwrapper.unwrap(sequence)
        if let n = nextToReport, ext < n { return }  // already reported
        if nextToReport == nil { nextToReport = ext }
        arrivals[ext] = arrival
        if arrivals.count > 4 * maxPacketsPerFeedback, let lo = arrivals.keys.min() { arrivals[lo] = nil }
    }

    /// Feedback for everything recorded since the last call (nil when nothing new arrived).
    public mutating func feedback(senderSSRC: UInt32, mediaSSRC: UInt32) -> TransportCCFeedback? {
        guard let start = nextToReport, let end = arrivals.keys.max(), end >= start,
              let firstArrival = arrivals[start] ?? arrivals.filter({ $0.key >= start }).min(by: { $0.key < $1.key })?.value else { return nil }
        let last = min(end, start + Int64(maxPacketsPerFeedback) - 1)
        // Reference time: multiples of 64 ms; deltas in 250 µs ticks from it.
        let refTicks = firstArrival.micros / 64_000
        var previous = refTicks * 64_000
        var deltas: [Int32?] = []
        deltas.reserveCapacity(Int(last - start + 1))
        var seq = start
        while seq <= last {
            if let at = arrivals.removeValue(forKey: seq) {
                let d = (at.micros - previous) / 250
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
