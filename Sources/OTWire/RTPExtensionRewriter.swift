import OTBase

/// The RFC 8285 header-extension ids negotiated in SDP (`a=extmap`) for a stream, by meaning; nil leaves an
/// extension out.
public struct RTPHeaderExtensionIds: Sendable, Equatable {
    public var absSendTime: UInt8?
    public var transportSequenceNumber: UInt8?
    public var mid: UInt8?
    /// RFC 6464 client-to-mixer audio level (audio streams only).
    public var audioLevel: UInt8?

    public init(absSendTime: UInt8? = nil, transportSequenceNumber: UInt8? = nil, mid: UInt8? = nil, audioLevel: UInt8? = nil) {
        self.absSendTime = absSendTime; self.transportSequenceNumber = transportSequenceNumber
        self.mid = mid; self.audioLevel = audioLevel
    }

    /// The ids of the extensions among `extmaps` that it knows (ids outside 1...255 are left out).
    public init(extmaps: [SDPExtmap]) {
        func id(_ uri: String) -> UInt8? {
            extmaps.first { $0.uri == uri }.flatMap { (1...255).contains($0.id) ? UInt8($0.id) : nil }
        }
        self.init(absSendTime: id(AbsSendTime.uri), transportSequenceNumber: id(TransportWideSequenceNumber.uri),
                  mid: id(MidExtension.uri), audioLevel: id(AudioLevelExtension.uri))
    }
}

/// Rewrites the header extensions of RTP packets for one receiver's m-section (a router's subscriber, or one peer
/// of a publisher that sends to several): whatever a packet carries under the sender's ids (`source`), the copy
/// carries exactly the extensions the receiver negotiated, under its ids (`target`): its own MID value for the
/// section, a transport-wide sequence number (written as 0: the receiver's connection stamps its own number),
/// abs-send-time of the forwarding moment, and the audio level the sender measured (when the packet has one).
/// Every other element is dropped. The RFC 8285 one-byte form is used when every id is 1...14 and the MID fits in
/// 16 bytes, the two-byte form otherwise.
public struct RTPExtensionRewriter: Sendable, Equatable {
    public let source: RTPHeaderExtensionIds
    public let target: RTPHeaderExtensionIds
    /// The receiver's MID value for the section (written when `target.mid` is set).
    public let mid: [UInt8]
    private let oneByte: Bool

    /// `mid`: the receiver's mid for the section; an empty or overlong one (over 255 bytes) is not written.
    public init(source: RTPHeaderExtensionIds, target: RTPHeaderExtensionIds, mid: String?) {
        self.source = source
        self.target = target
        let bytes = Array((mid ?? "").utf8)
        self.mid = bytes.count <= 255 ? bytes : []
        let ids = [target.absSendTime, target.transportSequenceNumber, target.mid, target.audioLevel].compactMap { $0 }
        oneByte = ids.allSatisfy { (1...14).contains($0) } && self.mid.count <= 16
    }

    /// Writes `packet` into `out` with the receiver's extensions. `out` is emptied first and keeps its storage:
    /// reused from packet to packet, it is not allocated again once it has grown to the packet size. `now` gives
    /// abs-send-time. False (and `out` empty) when `packet` is not an RTP packet.
    @discardableResult
    public func rewrite(_ packet: [UInt8], into out: inout [UInt8], now: Instant) -> Bool {
        out.removeAll(keepingCapacity: true)
        let n = packet.count
        guard n >= 12, packet[0] >> 6 == 2 else { return false }
        let header = 12 + 4 * Int(packet[0] & 0x0F)
        guard n >= header else { return false }
        var payloadStart = header
        var level: UInt8?
        if packet[0] & 0x10 != 0 {
            guard n >= header + 4 else { return false }
            payloadStart = header + 4 + 4 * (Int(packet[header + 2]) << 8 | Int(packet[header + 3]))
            guard payloadStart <= n else { return false }
            if let id = source.audioLevel, target.audioLevel != nil,
               let r = RTPHeaderExtensions.valueRange(in: packet, id: id), r.count == 1 { level = packet[r.lowerBound] }
        }
        let writeMid = target.mid != nil && !mid.isEmpty
        let any = writeMid || target.transportSequenceNumber != nil || target.absSendTime != nil || level != nil
        out.append(any ? packet[0] | 0x10 : packet[0] & ~0x10)
        out.append(contentsOf: packet[1..<header])
        if any {
            out.append(oneByte ? 0xBE : 0x10); out.append(oneByte ? 0xDE : 0x00); out.append(0); out.append(0)
            let start = out.count
            if writeMid, let id = target.mid { element(id, count: mid.count, &out); out.append(contentsOf: mid) }
            if let id = target.transportSequenceNumber { element(id, count: 2, &out); out.append(0); out.append(0) }
            if let id = target.absSendTime {
                let v = AbsSendTime.value(micros: now.micros)
                element(id, count: 3, &out)
                out.append(UInt8(truncatingIfNeeded: v >> 16)); out.append(UInt8(truncatingIfNeeded: v >> 8)); out.append(UInt8(truncatingIfNeeded: v))
            }
            if let id = target.audioLevel, let level { element(id, count: 1, &out); out.append(level) }
            while (out.count - start) % 4 != 0 { out.append(0) }
            let words = (out.count - start) / 4
            out[start - 2] = UInt8(truncatingIfNeeded: words >> 8)
            out[start - 1] = UInt8(truncatingIfNeeded: words)
        }
        out.append(contentsOf: packet[payloadStart...])
        return true
    }

    /// An element header: one byte (id, length - 1) or two (id, length).
    @inline(__always) private func element(_ id: UInt8, count: Int, _ out: inout [UInt8]) {
        if oneByte {
            out.append(id << 4 | UInt8(truncatingIfNeeded: count - 1))
        } else {
            out.append(id); out.append(UInt8(truncatingIfNeeded: count))
        }
    }
}
