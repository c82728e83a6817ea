import OTBase
import OTWire

/// Video forward error correction on one connection, sender side (RFC 5109 ULPFEC inside RFC 2198 RED, as browsers
/// negotiate it), sans-IO. While `protection` is on, every media packet of the stream goes out as RED (PT `red`, a
/// 1-byte header before the payload; off, as plain media); after a frame's last packet (marker) come `ceil(n × protection)` FEC packets, RED too (block PT
/// `ulpfec`), on the same SSRC and in the same sequence space, each protecting an interleaved share of the frame's
/// packets (packet k goes to FEC packet k mod m), so a loss in each share is rebuilt by the receiver without a
/// retransmission. Sequence numbers are renumbered per connection to make room for the FEC packets.
///
/// `protection` (FEC packets per media packet) is set from the loss measured on the connection: `protection(forLoss:)`.
public struct ULPFECSender: Sendable {
    public let mediaPayloadType: UInt8
    public let redPayloadType: UInt8
    public let ulpfecPayloadType: UInt8
    /// FEC packets per media packet (0: none; at most 1).
    public var protection: Double = 0 { didSet { protection = min(max(protection, 0), 1) } }
    /// Sequence numbers added so far by FEC packets (what new media numbers are shifted by), and where each shift began:
    /// after the media packet `after` (its original number), from `offsetBefore` to `offsetAfter`.
    private var offset: UInt16 = 0
    private var shifts: [(after: UInt16, offsetBefore: UInt16, offsetAfter: UInt16)] = []
    private var highestOriginal: UInt16?
    /// FEC packets earned by the media packets since the last ones (`protection` per packet).
    private var credit = 0.0
    /// Media goes as RED (FEC on, or the frame under way when it was turned off).
    private var redMode = false
    /// The current frame's media packets as protected: plain RTP with their final sequence numbers.
    private var frame: [[UInt8]] = []
    /// Counters: media packets wrapped, FEC packets made and their bytes.
    public private(set) var mediaPackets = 0, fecPackets = 0, fecBytes = 0

    public init(mediaPayloadType: UInt8, redPayloadType: UInt8, ulpfecPayloadType: UInt8) {
        self.mediaPayloadType = mediaPayloadType & 0x7F
        self.redPayloadType = redPayloadType & 0x7F
        self.ulpfecPayloadType = ulpfecPayloadType & 0x7F
    }

    /// FEC worth sending at a loss fraction (0…1) on the wire and a round-trip time: where it pays. Below 5 % loss, or
    /// on a path of less than `minRoundTripTime`, NACK repairs a loss within a frame interval or two and FEC would only
    /// add its bytes (measured: docs/benchmarks.md, "Loss"); above, 1.5 × the loss, at most one FEC packet per two
    /// media packets: at 10 % a loss among the packets an FEC packet covers is rebuilt at once, without the round trip
    /// a retransmission needs (and which it loses as often at 30 %).
    public static func protection(forLoss loss: Double, roundTripTime rtt: Duration) -> Double {
        guard loss.isFinite, loss >= 0.05, rtt >= minRoundTripTime else { return 0 }
        return min(0.5, 1.5 * loss)
    }

    /// The shortest round-trip time FEC is sent on (libwebrtc's hybrid NACK/FEC also leaves FEC off below 20 ms).
    public static let minRoundTripTime: Duration = .milliseconds(20)

    /// Turns a plain media packet into what goes on the wire (RED, renumbered), in place; returns the FEC packets to
    /// send after it (when it ends a frame and `protection` is on). Packets of other payload types pass unchanged.
    public mutating func process(_ packet: inout [UInt8]) -> [[UInt8]] {
        guard packet.count >= 12, packet[1] & 0x7F == mediaPayloadType else { return [] }
        let original = UInt16(packet[2]) << 8 | UInt16(packet[3])
        // A packet older than the newest (it came late, e.g. repaired on a router's uplink) keeps the numbering of its
        // place: the FEC packets sent after it moved only what followed.
        let late = highestOriginal.map { Int16(bitPattern: original &- $0) <= 0 } ?? false
        let shift = late ? offset(before: original) : offset
        if !late { highestOriginal = original }
        mediaPackets += 1
        guard redMode || protection > 0 else {
            // No FEC: plain media (both payload types are negotiated), renumbered past the FEC packets sent before.
            let seq = original &+ shift
            packet[2] = UInt8(seq >> 8); packet[3] = UInt8(truncatingIfNeeded: seq)
            return []
        }
        guard var media = try? RTPPacket(parsing: packet) else { return [] }
        media.sequenceNumber = original &+ shift
        var red = media
        red.payloadType = redPayloadType
        red.paddingLength = 0
        var wire: [UInt8] = []
        wire.reserveCapacity(packet.count + 1)
        red.writeHeader(into: &wire)
        REDPayload.writePrimary(payloadType: mediaPayloadType, media.payload, into: &wire)
        if late { packet = wire; return [] }
        var plain: [UInt8] = []
        plain.reserveCapacity(packet.count)
        media.write(into: &plain)
        packet = wire
        guard protection > 0 else {
            // Turned off: RED until the frame under way ends, then plain media again.
            if media.marker { redMode = false; frame.removeAll(keepingCapacity: true); credit = 0 }
            return []
        }
        redMode = true
        frame.append(plain)
        credit += protection
        // FEC packets go after a frame once the packets since the last ones have earned one (`credit`): a stream of
        // one-packet frames gets one per 1/protection frames, a keyframe of many packets several at once.
        guard (media.marker && credit >= 1) || frame.count >= ULPFECPayload.maxProtected else { return [] }
        let m = min(frame.count, max(1, Int(credit)))
        credit = max(0, credit - Double(m))
        defer { frame.removeAll(keepingCapacity: true) }
        var out: [[UInt8]] = []
        let before = offset
        for j in 0..<m {
            let group = frame.indices.filter { $0 % m == j }.map { frame[$0] }
            guard let fec = ULPFECPayload(protecting: group) else { continue }
            let fecPacket = RTPPacket(marker: false, payloadType: redPayloadType, sequenceNumber: media.sequenceNumber &+ UInt16(out.count + 1),
                                      timestamp: media.timestamp, ssrc: media.ssrc, extensions: media.extensions)
            var bytes: [UInt8] = []
            fecPacket.writeHeader(into: &bytes)
            bytes.append(ulpfecPayloadType)
            fec.write(into: &bytes)
            fecPackets += 1
            fecBytes += bytes.count
            out.append(bytes)
        }
        offset &+= UInt16(out.count)
        if !out.isEmpty {
            shifts.append((after: original, offsetBefore: before, offsetAfter: offset))
            if shifts.count > 128 { shifts.removeFirst(shifts.count - 128) }
        }
        return out
    }

    /// The shift of media packet `original`, from where FEC packets were put in before it.
    private func offset(before original: UInt16) -> UInt16 {
        for s in shifts.reversed() where Int16(bitPattern: original &- s.after) > 0 { return s.offsetAfter }
        return shifts.first?.offsetBefore ?? offset
    }
}
