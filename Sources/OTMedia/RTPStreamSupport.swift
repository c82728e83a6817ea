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

/// The last sent RTP packets by sequence number, for answering NACKs (bounded ring; slots reuse their storage).
public struct RTPPacketHistory: Sendable {
    private var slots: [(seq: Int32, bytes: [UInt8])]
    private let mask: Int

    /// Holds the latest `capacity` packets (rounded up to a power of two, at least 16).
    public init(capacity: Int = 1024) {
        var cap = 16
        while cap < capacity { cap <<= 1 }
        slots = Array(repeating: (-1, []), count: cap)
        mask = cap - 1
    }

    /// Packets the history can hold.
    public var capacity: Int { slots.count }

    /// Stores a serialized packet under its sequence number, replacing the oldest.
    public mutating func store(sequence: UInt16, packet: [UInt8]) {
        let i = Int(sequence) & mask
        slots[i].seq = Int32(sequence)
        slots[i].bytes.removeAll(keepingCapacity: true)
        slots[i].bytes.append(contentsOf: packet)
    }

    /// The stored packet with `sequence`, or nil when it was never sent or is too old.
    public func packet(sequence: UInt16) -> [UInt8]? {
        let s = slots[Int(sequence) & mask]
        return s.seq == Int32(sequence) ? s.bytes : nil
    }
}

/// Receive-side RTP counters of one stream (RFC 3550 §6.4.1 and A.3/A.8): packets, bytes, cumulative
/// loss and interarrival jitter.
public struct RTPReceiveStatistics: Sendable {
    public let clockRate: Int
    public private(set) var packetsReceived = 0
    /// Payload bytes (W3C `bytesReceived`).
    public private(set) var bytesReceived = 0
    /// Header and padding bytes.
    public private(set) var headerBytesReceived = 0
    public private(set) var duplicatePackets = 0
    public private(set) var lastPacketReceived: Instant?
    private var tracker = RTPSequenceTracker()
    private var base: Int64?
    private var expectedBeforeReset: Int64 = 0
    private var jitterTicks = 0.0
    private var last: (arrival: Instant, timestamp: UInt32)?

    public init(clockRate: Int) { self.clockRate = max(clockRate, 1) }

    /// Counts a packet that arrived at `now` and returns how it arrived.
    @discardableResult
    public mutating func record(_ packet: RTPPacket, now: Instant) -> RTPSequenceTracker.Arrival {
        let expectedSoFar = expectedPackets
        let arrival = tracker.record(packet.sequenceNumber)
        switch arrival {
        case .duplicate:
            duplicatePackets += 1
            return arrival
        case .first:
            base = tracker.highest
        case .reset:
            // A restart of the sequence space: keep what was expected before it.
            expectedBeforeReset = expectedSoFar
            base = tracker.highest
        default: break
        }
        packetsReceived += 1
        bytesReceived += packet.payload.count
        headerBytesReceived += packet.headerLength + packet.paddingLength
        lastPacketReceived = now
        if let l = last {
            let elapsedTicks = Double((now - l.arrival).microseconds) * Double(clockRate) / 1_000_000
            let d = elapsedTicks - Double(Int32(bitPattern: packet.timestamp &- l.timestamp))
            jitterTicks += (abs(d) - jitterTicks) / 16
        }
        last = (now, packet.timestamp)
        return arrival
    }

    /// Starts sequence tracking afresh (a new SSRC) while keeping the counters: the next packet counts as the first.
    public mutating func rebase() {
        expectedBeforeReset = expectedPackets
        tracker = RTPSequenceTracker()
        base = nil
        last = nil
    }

    /// Packets expected from the first to the highest sequence number seen.
    public var expectedPackets: Int64 {
        guard let b = base, let h = tracker.highest else { return expectedBeforeReset }
        return expectedBeforeReset + h - b + 1
    }

    /// Cumulative packets lost: expected minus received (negative with duplicates the tracker missed is clamped to 0).
    public var packetsLost: Int { max(0, Int(expectedPackets) - packetsReceived) }

    /// Interarrival jitter in RTP clock units.
    public var jitter: Double { jitterTicks }
    /// Interarrival jitter in seconds (W3C `jitter`).
    public var jitterSeconds: Double { jitterTicks / Double(clockRate) }
}

/// Passes keyframe requests on at most once per interval, so a burst of loss signals becomes one PLI.
struct KeyframeRequestLimiter {
    let interval: Duration
    private var last: Instant?
    private(set) var suppressed = 0
    init(interval: Duration) { self.interval = interval }

    mutating func allow(now: Instant) -> Bool {
        if let l = last, now - l < interval { suppressed += 1; return false }
        last = now
        return true
    }
}
