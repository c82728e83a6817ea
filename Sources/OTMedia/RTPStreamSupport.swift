import OTBase
import OTWire
import Synchronization

extension RTPHeaderExtensionIds {
    /// Bytes the extension block can take at most in a header (one-byte form when it fits), for MTU sizing.
    func maxBlockLength(midLength: Int) -> Int {
        var n = 0
        if absSendTime != nil { n += 4 }
        if transportSequenceNumber != nil { n += 3 }
        if mid != nil { n += 2 + midLength }
        if audioLevel != nil { n += 2 }
        return n == 0 ? 0 : 4 + (n + 3) / 4 * 4
    }
}

/// Transport-wide sequence numbers shared by every stream sent over one transport
/// (draft-holmer-rmcat-transport-wide-cc-extensions). Safe to use from several threads.
public final class TransportSequenceCounter: Sendable {
    private let next: Atomic<UInt16>
    public init(start: UInt16 = 1) { next = Atomic(start) }
    /// Takes the next number (wrapping at 16 bits).
    public func allocate() -> UInt16 { next.wrappingAdd(1, ordering: .relaxed).oldValue }
}

/// Builds the header-extension block of an outgoing packet. In the common case (ids 1...14, mid up to 16 bytes)
/// it writes the RFC 8285 one-byte form into a reused buffer, so steady sending does not allocate for it.
struct RTPExtensionWriter {
    let ids: RTPHeaderExtensionIds
    let midBytes: [UInt8]?
    let transportCounter: TransportSequenceCounter?
    private let oneByte: Bool
    private var buffer: [UInt8] = []

    init(ids: RTPHeaderExtensionIds, mid: String?, transportCounter: TransportSequenceCounter?) throws {
        self.ids = ids
        midBytes = try mid.map { try MidExtension.encode($0) }
        self.transportCounter = transportCounter
        let used = [ids.absSendTime, ids.transportSequenceNumber, ids.mid, ids.audioLevel].compactMap { $0 }
        guard used.allSatisfy({ $0 != 0 }) else { throw OTError(.invalidParameter, "RTP header extension id 0 is reserved") }
        oneByte = used.allSatisfy { (1...14).contains($0) } && (midBytes?.count ?? 1) <= 16
        buffer.reserveCapacity(32)
    }

    var isEmpty: Bool {
        ids.absSendTime == nil && (ids.transportSequenceNumber == nil || transportCounter == nil)
            && (ids.mid == nil || midBytes == nil) && ids.audioLevel == nil
    }

    mutating func block(now: Instant, audioLevel: (voiceActivity: Bool, levelDBov: UInt8)? = nil) throws -> RTPHeaderExtensions {
        guard !isEmpty else { return RTPHeaderExtensions() }
        guard oneByte else { return try RTPHeaderExtensions(elements(now: now, audioLevel: audioLevel)) }
        buffer.removeAll(keepingCapacity: true)
        if let id = ids.absSendTime {
            let v = UInt32(truncatingIfNeeded: (now.micros << 18) / 1_000_000) & 0xFF_FFFF
            buffer.append(id << 4 | 2)
            buffer.append(UInt8(v >> 16)); buffer.append(UInt8(truncatingIfNeeded: v >> 8)); buffer.append(UInt8(truncatingIfNeeded: v))
        }
        if let id = ids.transportSequenceNumber, let c = transportCounter {
            let seq = c.allocate()
            buffer.append(id << 4 | 1)
            buffer.append(UInt8(seq >> 8)); buffer.append(UInt8(truncatingIfNeeded: seq))
        }
        if let id = ids.mid, let m = midBytes {
            buffer.append(id << 4 | UInt8(m.count - 1))
            buffer.append(contentsOf: m)
        }
        if let id = ids.audioLevel, let level = audioLevel {
            buffer.append(id << 4)
            buffer.append((level.voiceActivity ? 0x80 : 0) | min(level.levelDBov, 127))
        }
        while buffer.count % 4 != 0 { buffer.append(0) }
        return try RTPHeaderExtensions(profile: RTPHeaderExtensions.oneByteProfile, data: buffer[...])
    }

    /// The elements in the generic (two-byte capable) form.
    private func elements(now: Instant, audioLevel: (voiceActivity: Bool, levelDBov: UInt8)?) -> [RTPHeaderExtensionElement] {
        var elements: [RTPHeaderExtensionElement] = []
        if let id = ids.absSendTime { elements.append(.init(id: id, value: AbsSendTime.encode(micros: now.micros)[...])) }
        if let id = ids.transportSequenceNumber, let c = transportCounter {
            elements.append(.init(id: id, value: TransportWideSequenceNumber.encode(c.allocate())[...]))
        }
        if let id = ids.mid, let m = midBytes { elements.append(.init(id: id, value: m[...])) }
        if let id = ids.audioLevel, let level = audioLevel {
            elements.append(.init(id: id, value: AudioLevelExtension.encode(voiceActivity: level.voiceActivity, levelDBov: level.levelDBov)[...]))
        }
        return elements
    }
}
