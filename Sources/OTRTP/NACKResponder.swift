import OTBase
import OTWire

/// The sender's answer to NACKs for one SSRC, sans-IO: keeps the last `capacity` packets sent (plain RTP) and hands
/// back the ones a NACK names, each at most once per RTT (a receiver NACKs again when a retransmission was lost too:
/// that is answered, a duplicate NACK within the RTT is not). With RTX negotiated (RFC 4588) a retransmission goes out
/// on the RTX stream; without, as the original packet.
///
/// Without `keepsPackets` the packets are kept elsewhere (a media router answers every subscriber of a stream from the
/// stream's one history): `marked` notes only which sequence numbers were sent, `resendable` applies the same
/// once-per-RTT rule, and the caller hands the packets it found to `wrapped`.
public struct NACKResponder: Sendable {
    /// A sent packet; `seq` -1 when empty. A slot's buffer is reused, so storing allocates only until each slot has
    /// held a packet of the largest size.
    struct Slot { var seq: Int32 = -1; var packet: [UInt8] = []; var lastResent: Instant? }
    private var slots: [Slot]
    /// Whether `store` keeps a copy of each packet (false: only its sequence number).
    public let keepsPackets: Bool
    /// The RTX stream retransmissions are wrapped for, when negotiated.
    public var rtx: RTXSender?
    /// Packets handed out for resending (and their bytes, as sent: RTX-wrapped when configured), NACKed sequence numbers not held, and NACKs
    /// of a packet resent less than an RTT before (not answered).
    public private(set) var resent = 0, resentBytes = 0, missed = 0, suppressed = 0

    /// Keeps the last `capacity` packets (or, without `keepsPackets`, their sequence numbers).
    public init(capacity: Int = 1024, rtx: RTXSender? = nil, keepsPackets: Bool = true) {
        slots = Array(repeating: Slot(), count: max(16, capacity))
        self.rtx = rtx
        self.keepsPackets = keepsPackets
    }

    /// Records a packet sent: with `keepsPackets` a copy of it (in the slot's reused buffer: the caller may go on to
    /// change its own, e.g. protect it in place, without a copy-on-write), else only its sequence number.
    public mutating func store(sequence: UInt16, packet: [UInt8]) {
        let i = Int(sequence) % slots.count
        slots[i].seq = Int32(sequence)
        slots[i].lastResent = nil
        guard keepsPackets else { return }
        slots[i].packet.removeAll(keepingCapacity: true)
        slots[i].packet.append(contentsOf: packet)
    }

    public func lookup(_ sequence: UInt16) -> [UInt8]? {
        let s = slots[Int(sequence) % slots.count]
        return s.seq == Int32(sequence) && keepsPackets ? s.packet : nil
    }

    /// The sequence numbers of a NACK's lost list to resend: sent recently (the others count as missed) and not resent
    /// within `rtt` (those count as suppressed). They count as resent from now.
    public mutating func resendable(_ lost: [UInt16], now: Instant, rtt: Duration) -> [UInt16] {
        var out: [UInt16] = []
        for seq in lost {
            let i = Int(seq) % slots.count
            guard slots[i].seq == Int32(seq) else { missed += 1; continue }
            if let last = slots[i].lastResent, now - last < rtt { suppressed += 1; continue }
            slots[i].lastResent = now
            out.append(seq)
        }
        return out
    }

    /// The packets to send for a NACK's lost list: stored ones not resent within `rtt`, as RTX when configured.
    public mutating func packets(for lost: [UInt16], now: Instant, rtt: Duration) -> [[UInt8]] {
        resendable(lost, now: now, rtt: rtt).compactMap { seq in lookup(seq).map { wrapped($0) } }
    }

    /// A packet to resend (plain RTP, as first sent), counted, and wrapped for the RTX stream when configured.
    public mutating func wrapped(_ packet: [UInt8]) -> [UInt8] {
        var out = packet
        if rtx != nil, let original = try? RTPPacket(parsing: packet), let rtxPacket = rtx?.wrap(original) { out = rtxPacket.serialized() }
        resent += 1
        resentBytes += out.count
        return out
    }
}
