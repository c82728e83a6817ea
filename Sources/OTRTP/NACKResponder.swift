import OTBase
import OTWire

/// The sender's answer to NACKs for one SSRC, sans-IO: keeps the last `capacity` packets sent (plain RTP) and hands
/// back the ones a NACK names, each at most once per RTT (a receiver NACKs again when a retransmission was lost too:
/// that is answered, a duplicate NACK within the RTT is not). With RTX negotiated (RFC 4588) a retransmission goes out
/// on the RTX stream; without, as the original packet.
public struct NACKResponder: Sendable {
    struct Slot { var seq: UInt16; var packet: [UInt8]; var lastResent: Instant? }
    private var slots: [Slot?]
    /// The RTX stream retransmissions are wrapped for, when negotiated.
    public var rtx: RTXSender?
    /// Packets handed out for resending (and their bytes, as stored), NACKed sequence numbers not held, and NACKs
    /// of a packet resent less than an RTT before (not answered).
    public private(set) var resent = 0, resentBytes = 0, missed = 0, suppressed = 0

    /// Keeps the last `capacity` packets.
    public init(capacity: Int = 1024, rtx: RTXSender? = nil) {
        slots = Array(repeating: nil, count: max(16, capacity))
        self.rtx = rtx
    }

    public mutating func store(sequence: UInt16, packet: [UInt8]) {
        slots[Int(sequence) % slots.count] = Slot(seq: sequence, packet: packet, lastResent: nil)
    }

    public func lookup(_ sequence: UInt16) -> [UInt8]? {
        guard let s = slots[Int(sequence) % slots.count], s.seq == sequence else { return nil }
        return s.packet
    }

    /// The packets to send for a NACK's lost list: stored ones not resent within `rtt`, as RTX when configured.
    public mutating func packets(for lost: [UInt16], now: Instant, rtt: Duration) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for seq in lost {
            let i = Int(seq) % slots.count
            guard var s = slots[i], s.seq == seq else { missed += 1; continue }
            if let last = s.lastResent, now - last < rtt { suppressed += 1; continue }
            s.lastResent = now
            slots[i] = s
            var packet = s.packet
            if rtx != nil, let original = try? RTPPacket(parsing: s.packet), let wrapped = rtx?.wrap(original) {
                packet = wrapped.serialized()
            }
            resent += 1
            resentBytes += packet.count
            out.append(packet)
        }
        return out
    }
}
