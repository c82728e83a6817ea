import OTBase
import OTWire

/// Reception statistics of one remote SSRC (RFC 3550 §6.4.1, A.3 and A.8).
public struct RTPReceiveStatistics: Sendable {
    public let ssrc: UInt32
    public let clockRate: UInt32
    private var unwrapper = SequenceUnwrapper()
    private var baseSeq: Int64?
    private var maxSeq: Int64 = 0
    public private(set) var received: Int64 = 0
    private var expectedPrior: Int64 = 0
    private var receivedPrior: Int64 = 0
    private var lastTransit: Int64?
    /// Interarrival jitter in RTP timestamp units.
    public private(set) var jitter: Double = 0
    private var lastSR: UInt32 = 0
    private var lastSRArrival: Instant?

    public init(ssrc: UInt32, clockRate: UInt32) { self.ssrc = ssrc; self.clockRate = max(1, clockRate) }

    public mutating func packet(sequence: UInt16, rtpTimestamp: UInt32, now: Instant) {
        let ext = unwrapper.unwrap(sequence)
        if baseSeq == nil { baseSeq = ext; maxSeq = ext }
        maxSeq = max(maxSeq, ext)
        received += 1
        let arrival = Int64(Double(now.micros) * Double(clockRate) / 1_000_000)
        let transit = arrival - Int64(rtpTimestamp)
        if let last = lastTransit {
            let d = Double(abs(transit - last))
            jitter += (d - jitter) / 16
        }
        lastTransit = transit
    }

    /// Records a sender report from this SSRC (for LSR/DLSR in our reports).
    public mutating func senderReport(ntpTime: UInt64, now: Instant) {
        lastSR = UInt32(truncatingIfNeeded: ntpTime >> 16)
        lastSRArrival = now
    }

    /// Packets expected from the first to the highest sequence number.
    public var expected: Int64 { baseSeq.map { maxSeq - $0 + 1 } ?? 0 }
    /// Packets lost (expected − received; negative with duplicates).
    public var cumulativeLost: Int64 { expected - received }

    /// A report block covering the interval since the previous one.
    public mutating func reportBlock(now: Instant) -> RTCPReportBlock {
        let exp = expected
        let expInterval = exp - expectedPrior, recInterval = received - receivedPrior
        expectedPrior = exp
        receivedPrior = received
        let lostInterval = expInterval - recInterval
        let fraction: UInt8 = expInterval <= 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / expInterval))
        let dlsr: UInt32 = lastSRArrival.map { UInt32(clamping: (now - $0).microseconds * 65536 / 1_000_000) } ?? 0
        return RTCPReportBlock(ssrc: ssrc, fractionLost: fraction,
                               cumulativeLost: Int32(clamping: min(max(cumulativeLost, -0x80_0000), 0x7F_FFFF)),
                               extendedHighestSequence: UInt32(truncatingIfNeeded: maxSeq), jitter: UInt32(min(jitter, Double(UInt32.max))),
                               lastSR: lastSR, delaySinceLastSR: dlsr)
    }
}
