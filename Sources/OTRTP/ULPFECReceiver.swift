import OTBase
import OTWire

/// Video forward error correction on one connection, receiver side (RFC 5109 ULPFEC inside RFC 2198 RED), sans-IO:
/// RED packets are unwrapped into the media packets they carry, FEC packets are kept, and a media packet that went
/// missing is rebuilt as soon as an FEC packet protecting it and all the others it protects are here. Packets of
/// other payload types pass unchanged.
public struct ULPFECReceiver: Sendable {
    public let redPayloadType: UInt8
    public let ulpfecPayloadType: UInt8
    /// Recent media packets (plain RTP, as protected) by sequence number.
    private var media: [(seq: UInt16, packet: [UInt8])?]
    /// Recent FEC packets and the SSRC they protect.
    private var fec: [(payload: ULPFECPayload, ssrc: UInt32)] = []
    /// Counters: FEC packets received, media packets rebuilt from them, RED packets that did not parse.
    public private(set) var fecReceived = 0, recovered = 0, malformed = 0

    public init(redPayloadType: UInt8, ulpfecPayloadType: UInt8, history: Int = 512) {
        self.redPayloadType = redPayloadType & 0x7F
        self.ulpfecPayloadType = ulpfecPayloadType & 0x7F
        media = Array(repeating: nil, count: max(64, history))
    }

    /// Takes one received RTP packet (plain, after SRTP); returns the media packets to pass on: the packet itself, the
    /// media a RED packet carries, and any packet an FEC packet rebuilt (with the recovered flag).
    public mutating func receive(_ packet: [UInt8]) -> [(packet: [UInt8], recovered: Bool)] {
        guard packet.count >= 12, packet[1] & 0x7F == redPayloadType else { return [(packet, false)] }
        guard let red = try? RTPPacket(parsing: packet), let (_, primary) = try? REDPayload.parse(red.payload) else {
            malformed += 1
            return []
        }
        if primary.payloadType == ulpfecPayloadType {
            guard let payload = try? ULPFECPayload(parsing: primary.data) else { malformed += 1; return [] }
            fecReceived += 1
            fec.append((payload, red.ssrc))
            if fec.count > 64 { fec.removeFirst(fec.count - 64) }
            guard let rebuilt = attempt(fec.count - 1) else { return [] }
            return [(rebuilt, true)]
        }
        var plain = red
        plain.payloadType = primary.payloadType
        plain.payload = primary.data
        plain.paddingLength = 0
        let bytes = plain.serialized()
        store(bytes, seq: red.sequenceNumber)
        var out = [(bytes, false)]
        // A late media packet may complete an FEC packet that covers another missing one.
        for i in fec.indices where fec[i].payload.protectedSequences.contains(red.sequenceNumber) {
            if let p = attempt(i) { out.append((p, true)) }
        }
        return out
    }

    private mutating func store(_ packet: [UInt8], seq: UInt16) {
        media[Int(seq) % media.count] = (seq, packet)
    }

    private func lookup(_ seq: UInt16) -> [UInt8]? {
        guard let s = media[Int(seq) % media.count], s.seq == seq else { return nil }
        return s.packet
    }

    /// Tries FEC packet `i`: the packet it rebuilds, if exactly one it protects is missing.
    private mutating func attempt(_ i: Int) -> [UInt8]? {
        let (payload, ssrc) = fec[i]
        guard let rebuilt = payload.recover(ssrc: ssrc, present: { lookup($0) }) else { return nil }
        let seq = UInt16(rebuilt[2]) << 8 | UInt16(rebuilt[3])
        store(rebuilt, seq: seq)
        recovered += 1
        return rebuilt
    }
}
