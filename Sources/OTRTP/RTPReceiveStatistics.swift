import OTBase
import OTWire

/// Reception statistics of one remote SSRC, sans-IO: the RFC 3550 counters behind report blocks (§6.4.1, A.3, A.8:
/// expected, lost, fraction lost, interarrival jitter, LSR/DLSR) and the W3C `inbound-rtp` ones (packets, payload and
/// header bytes, duplicates, jitter in seconds). One instance serves the RTP session's reports and a pipeline's stats.
public struct RTPReceiveStatistics: Sendable {
    public let ssrc: UInt32
    public let clockRate: UInt32
    private var tracker = RTPSequenceTracker()
    private var base: Int64?
    /// Packets expected before the sequence space restarted (`rebase`, or a jump the tracker treats as a reset).
    private var expectedBeforeReset: Int64 = 0
    /// Every packet recorded, duplicates included (RFC 3550's "received": cumulative loss goes negative with them).
    public private(set) var received: Int64 = 0
    /// Packets recorded that were not duplicates (W3C `packetsReceived`).
    public private(set) var packetsReceived = 0
    /// Payload bytes (W3C `bytesReceived`), and header and padding bytes, of the packets that were not duplicates.
    public private(set) var bytesReceived = 0
    public private(set) var headerBytesReceived = 0
    public private(set) var duplicatePackets = 0
    public private(set) var lastPacketReceived: Instant?
    private var expectedPrior: Int64 = 0
    private var receivedPrior: Int64 = 0
    private var last: (arrival: Instant, timestamp: UInt32)?
    /// Interarrival jitter in RTP timestamp units.
    public private(set) var jitter: Double = 0
    private var lastSR: UInt32 = 0
    private var lastSRArrival: Instant?

    public init(ssrc: UInt32 = 0, clockRate: UInt32) { self.ssrc = ssrc; self.clockRate = max(1, clockRate) }
    public init(clockRate: Int) { self.init(clockRate: UInt32(clamping: clockRate)) }

    /// Counts a packet (its header fields; payload and header sizes for the byte counters) that arrived at `now`,
    /// and returns how it arrived.
    @discardableResult
    public mutating func record(sequence: UInt16, rtpTimestamp: UInt32, now: Instant, payloadBytes: Int = 0,
                                headerBytes: Int = 0) -> RTPSequenceTracker.Arrival {
        let expectedSoFar = expected
        let arrival = tracker.record(sequence)
        received += 1
        switch arrival {
        case .duplicate:
            duplicatePackets += 1
            return arrival
        case .first:
            base = tracker.highest
        case .reset:
            expectedBeforeReset = expectedSoFar
            base = tracker.highest
        default: break
        }
        packetsReceived += 1
        bytesReceived += payloadBytes
        headerBytesReceived += headerBytes
        lastPacketReceived = now
        if let l = last {
            let elapsedTicks = Double((now - l.arrival).microseconds) * Double(clockRate) / 1_000_000
            let d = elapsedTicks - Double(Int32(bitPattern: rtpTimestamp &- l.timestamp))
            jitter += (abs(d) - jitter) / 16
        }
        last = (now, rtpTimestamp)
        return arrival
    }

    /// Counts a parsed packet.
    @discardableResult
    public mutating func record(_ packet: RTPPacket, now: Instant) -> RTPSequenceTracker.Arrival {
        record(sequence: packet.sequenceNumber, rtpTimestamp: packet.timestamp, now: now, payloadBytes: packet.payload.count,
               headerBytes: packet.headerLength + packet.paddingLength)
    }

    /// Starts sequence tracking afresh (a new SSRC) while keeping the counters: the next packet counts as the first.
    public mutating func rebase() {
        expectedBeforeReset = expected
        tracker = RTPSequenceTracker()
        base = nil
        last = nil
    }

    /// Records a sender report from this SSRC (for LSR/DLSR in our reports).
    public mutating func senderReport(ntpTime: UInt64, now: Instant) {
        lastSR = UInt32(truncatingIfNeeded: ntpTime >> 16)
        lastSRArrival = now
    }

    /// Packets expected from the first to the highest sequence number (over restarts).
    public var expected: Int64 {
        guard let b = base, let h = tracker.highest else { return expectedBeforeReset }
        return expectedBeforeReset + h - b + 1
    }
    /// Packets lost (expected − received; negative with duplicates), as in report blocks.
    public var cumulativeLost: Int64 { expected - received }
    /// Packets lost, duplicates not counted as received (W3C `packetsLost`), never negative.
    public var packetsLost: Int { max(0, Int(expected) - packetsReceived) }
    /// Interarrival jitter in seconds (W3C `jitter`).
    public var jitterSeconds: Double { jitter / Double(clockRate) }

    /// A report block covering the interval since the previous one.
    public mutating func reportBlock(now: Instant) -> RTCPReportBlock {
        let exp = expected
        let expInterval = exp - expectedPrior, recInterval = received - receivedPrior
        expectedPrior = exp
        receivedPrior = received
        let lostInterval = expInterval - recInterval
        let fraction: UInt8 = expInterval <= 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / expInterval))
        let dlsr: UInt32 = lastSRArrival.map { UInt32(clamping: (now - $0).microseconds * 65536 / 1_000_000) } ?? 0
        let highest = tracker.highest.map { $0 - 65536 } ?? 0
        return RTCPReportBlock(ssrc: ssrc, fractionLost: fraction,
                               cumulativeLost: Int32(clamping: min(max(cumulativeLost, -0x80_0000), 0x7F_FFFF)),
                               extendedHighestSequence: UInt32(truncatingIfNeeded: highest), jitter: UInt32(min(jitter, Double(UInt32.max))),
                               lastSR: lastSR, delaySinceLastSR: dlsr)
    }
}
