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
    /// The block as written (profile, length and elements, padded), without and with the audio level; per packet
    /// only abs-send-time and the level are filled in, at these offsets into the block.
    private let block: [UInt8], blockWithLevel: [UInt8]
    private let absSendTimeAt: Int?, levelAt: Int?

    /// `mid`: the receiver's mid for the section; an empty or overlong one (over 255 bytes) is not written.
    public init(source: RTPHeaderExtensionIds, target: RTPHeaderExtensionIds, mid: String?) {
        self.source = source
        self.target = target
        let bytes = Array((mid ?? "").utf8)
        self.mid = bytes.count <= 255 ? bytes : []
        let ids = [target.absSendTime, target.transportSequenceNumber, target.mid, target.audioLevel].compactMap { $0 }
        let oneByte = ids.allSatisfy { (1...14).contains($0) } && self.mid.count <= 16
        var elements: [(UInt8, [UInt8])] = []
        if let id = target.mid, !self.mid.isEmpty { elements.append((id, self.mid)) }
        if let id = target.transportSequenceNumber { elements.append((id, [0, 0])) }
        if let id = target.absSendTime { elements.append((id, [0, 0, 0])) }
        func write(_ elements: [(UInt8, [UInt8])]) -> (block: [UInt8], valueAt: [UInt8: Int]) {
            guard !elements.isEmpty else { return ([], [:]) }
            var b: [UInt8] = oneByte ? [0xBE, 0xDE, 0, 0] : [0x10, 0x00, 0, 0]
            var at: [UInt8: Int] = [:]
            for (id, value) in elements {
                b += oneByte ? [id << 4 | UInt8(value.count - 1)] : [id, UInt8(value.count)]
                at[id] = b.count
                b += value
            }
            while b.count % 4 != 0 { b.append(0) }
            let words = (b.count - 4) / 4
            b[2] = UInt8(truncatingIfNeeded: words >> 8); b[3] = UInt8(truncatingIfNeeded: words)
            return (b, at)
        }
        let plain = write(elements)
        block = plain.block
        absSendTimeAt = target.absSendTime.flatMap { plain.valueAt[$0] }
        if let id = target.audioLevel {
            let withLevel = write(elements + [(id, [0])])
            blockWithLevel = withLevel.block
            levelAt = withLevel.valueAt[id]
        } else {
            blockWithLevel = block
            levelAt = nil
        }
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
            if let id = source.audioLevel, levelAt != nil,
               let r = RTPHeaderExtensions.valueRange(in: packet, id: id), r.count == 1 { level = packet[r.lowerBound] }
        }
        let ext = level != nil ? blockWithLevel : block
        out.reserveCapacity(n + ext.count)
        out.append(ext.isEmpty ? packet[0] & ~0x10 : packet[0] | 0x10)
        packet.withUnsafeBufferPointer { out.append(contentsOf: UnsafeBufferPointer(rebasing: $0[1..<header])) }
        if !ext.isEmpty {
            out.append(contentsOf: ext)
            if let at = absSendTimeAt {
                let v = AbsSendTime.value(micros: now.micros)
                out[header + at] = UInt8(truncatingIfNeeded: v >> 16)
                out[header + at + 1] = UInt8(truncatingIfNeeded: v >> 8)
                out[header + at + 2] = UInt8(truncatingIfNeeded: v)
            }
            if let level, let at = levelAt { out[header + at] = level }
        }
        packet.withUnsafeBufferPointer { out.append(contentsOf: UnsafeBufferPointer(rebasing: $0[payloadStart...])) }
        return true
    }
}
