import OTBase
import OTWire

/// Video forward error correction on one connection, sender side (RFC 5109 ULPFEC inside RFC 2198 RED, as browsers
/// negotiate it), sans-IO. Every media packet of the stream goes out as RED (PT `red`, a 1-byte header before the
/// payload); after a frame's last packet (marker) come `ceil(n × protection)` FEC packets, RED too (block PT
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
    /// Sequence numbers added so far by FEC packets (what media numbers are shifted by).
    private var offset: UInt16 = 0
    /// The current frame's media packets as protected: plain RTP with their final sequence numbers.
    private var frame: [[UInt8]] = []
    /// Counters: media packets wrapped, FEC packets made and their bytes.
    public private(set) var mediaPackets = 0, fecPackets = 0, fecBytes = 0

    public init(mediaPayloadType: UInt8, redPayloadType: UInt8, ulpfecPayloadType: UInt8) {
        self.mediaPayloadType = mediaPayloadType & 0x7F
        self.redPayloadType = redPayloadType & 0x7F
        self.ulpfecPayloadType = ulpfecPayloadType & 0x7F
    }

    /// FEC worth sending at a loss fraction (0…1) on the wire: none below 5 % (NACK repairs that alone); above,
    /// 1.5 × the loss, at most one FEC packet per two media packets. At 10 % a frame of 4 packets gets one FEC packet
    /// and a single loss in it is rebuilt at once; at 30 % most frames lose a packet and half of them get it back
    /// without waiting for a retransmission, which is then lost as often.
    public static func protection(forLoss loss: Double) -> Double {
        guard loss.isFinite, loss >= 0.05 else { return 0 }
        return min(0.5, 1.5 * loss)
    }

    /// Turns a plain media packet into what goes on the wire (RED, renumbered), in place; returns the FEC packets to
    /// send after it (when it ends a frame and `protection` is on). Packets of other payload types pass unchanged.
    public mutating func process(_ packet: inout [UInt8]) -> [[UInt8]] {
        guard packet.count >= 12, packet[1] & 0x7F == mediaPayloadType, let parsed = try? RTPPacket(parsing: packet) else { return [] }
        var media = parsed
        media.sequenceNumber = parsed.sequenceNumber &+ offset
        var plain: [UInt8] = []
        plain.reserveCapacity(packet.count)
        media.write(into: &plain)
        var red = media
        red.payloadType = redPayloadType
        red.paddingLength = 0
        packet.removeAll(keepingCapacity: true)
        red.writeHeader(into: &packet)
        REDPayload.writePrimary(payloadType: mediaPayloadType, media.payload, into: &packet)
        mediaPackets += 1
        guard protection > 0 else { frame.removeAll(keepingCapacity: true); return [] }
        frame.append(plain)
        guard media.marker || frame.count >= ULPFECPayload.maxProtected else { return [] }
        defer { frame.removeAll(keepingCapacity: true) }
        let m = min(frame.count, Int((Double(frame.count) * protection).rounded(.up)))
        var out: [[UInt8]] = []
        for j in 0..<m {
            let group = frame.indices.filter { $0 % m == j }.map { frame[$0] }
            guard let fec = ULPFECPayload(protecting: group) else { continue }
            offset &+= 1
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
        return out
    }
}
