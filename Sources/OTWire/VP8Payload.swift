import OTBase

/// The VP8 payload descriptor at the start of every VP8 RTP payload (RFC 7741 §4.2).
public struct VP8PayloadDescriptor: Equatable, Sendable {
    /// N: the frame is not used as a reference by any other frame (it may be discarded).
    public var nonReference: Bool
    /// S: this packet starts a VP8 partition.
    public var startOfPartition: Bool
    /// PID: the partition index (0...7).
    public var partitionIndex: UInt8
    /// The picture id, 7 or 15 bits (`pictureIdIs15Bit`), or nil when absent.
    public var pictureId: UInt16?
    public var pictureIdIs15Bit: Bool
    /// TL0PICIDX: running index of base-layer frames.
    public var tl0PicIdx: UInt8?
    /// TID: the temporal layer (0...3), or nil when absent.
    public var temporalLayer: UInt8?
    /// Y: the frame depends only on the base layer (a layer sync point).
    public var layerSync: Bool
    /// KEYIDX (0...31), or nil when absent.
    public var keyIndex: UInt8?

    public init(nonReference: Bool = false, startOfPartition: Bool, partitionIndex: UInt8 = 0,
                pictureId: UInt16? = nil, pictureIdIs15Bit: Bool = true, tl0PicIdx: UInt8? = nil,
                temporalLayer: UInt8? = nil, layerSync: Bool = false, keyIndex: UInt8? = nil) {
        self.nonReference = nonReference; self.startOfPartition = startOfPartition
        self.partitionIndex = partitionIndex & 0x07
        self.pictureId = pictureId.map { $0 & (pictureIdIs15Bit ? 0x7FFF : 0x7F) }
        self.pictureIdIs15Bit = pictureIdIs15Bit
        self.tl0PicIdx = tl0PicIdx; self.temporalLayer = temporalLayer.map { $0 & 0x03 }
        self.layerSync = layerSync; self.keyIndex = keyIndex.map { $0 & 0x1F }
    }

    /// True for the first packet of a frame (S set, PID 0).
    public var startsFrame: Bool { startOfPartition && partitionIndex == 0 }

    private var hasExtension: Bool { pictureId != nil || tl0PicIdx != nil || temporalLayer != nil || keyIndex != nil }

    /// The descriptor's size in bytes.
    public var encodedLength: Int {
        guard hasExtension else { return 1 }
        var n = 2
        if pictureId != nil { n += pictureIdIs15Bit ? 2 : 1 }
        if tl0PicIdx != nil { n += 1 }
        if temporalLayer != nil || keyIndex != nil { n += 1 }
        return n
    }

    /// Appends the descriptor.
    public func write(into out: inout [UInt8]) {
        let x = hasExtension
        out.append((x ? 0x80 : 0) | (nonReference ? 0x20 : 0) | (startOfPartition ? 0x10 : 0) | (partitionIndex & 0x07))
        guard x else { return }
        let tk = temporalLayer != nil || keyIndex != nil
        out.append((pictureId != nil ? 0x80 : 0) | (tl0PicIdx != nil ? 0x40 : 0)
                   | (temporalLayer != nil ? 0x20 : 0) | (keyIndex != nil ? 0x10 : 0))
        if let pid = pictureId {
            if pictureIdIs15Bit {
                out.append(0x80 | UInt8(truncatingIfNeeded: pid >> 8) & 0x7F)
                out.append(UInt8(truncatingIfNeeded: pid))
            } else {
                out.append(UInt8(truncatingIfNeeded: pid) & 0x7F)
            }
        }
        if let l = tl0PicIdx { out.append(l) }
        if tk {
            out.append(((temporalLayer ?? 0) & 0x03) << 6 | (layerSync ? 0x20 : 0) | ((keyIndex ?? 0) & 0x1F))
        }
    }

    /// Parses the descriptor at the start of an RTP payload; returns it and the VP8 data after it.
    /// Throws `WireError` when the payload is truncated or holds no VP8 data.
    public static func parse(_ payload: ArraySlice<UInt8>) throws -> (VP8PayloadDescriptor, ArraySlice<UInt8>) {
        var r = ByteReader(payload)
        let b0 = try r.u8("VP8 payload descriptor")
        var d = VP8PayloadDescriptor(nonReference: b0 & 0x20 != 0, startOfPartition: b0 & 0x10 != 0,
                                     partitionIndex: b0 & 0x07)
        if b0 & 0x80 != 0 {
            let x = try r.u8("VP8 descriptor extension byte")
            if x & 0x80 != 0 {
                let p0 = try r.u8("VP8 picture id")
                if p0 & 0x80 != 0 {
                    let p1 = try r.u8("VP8 15-bit picture id")
                    d.pictureId = UInt16(p0 & 0x7F) << 8 | UInt16(p1)
                    d.pictureIdIs15Bit = true
                } else {
                    d.pictureId = UInt16(p0)
                    d.pictureIdIs15Bit = false
                }
            }
            if x & 0x40 != 0 { d.tl0PicIdx = try r.u8("VP8 TL0PICIDX") }
            if x & 0x30 != 0 {
                let tk = try r.u8("VP8 TID/KEYIDX")
                if x & 0x20 != 0 { d.temporalLayer = tk >> 6; d.layerSync = tk & 0x20 != 0 }
                if x & 0x10 != 0 { d.keyIndex = tk & 0x1F }
            }
        }
        let data = r.rest()
        guard !data.isEmpty else { throw WireError("VP8 payload holds a descriptor but no data") }
        return (d, data)
    }
}

/// Facts read from the VP8 payload header at the start of a frame (RFC 7741 §4.3, RFC 6386 §9.1).
public enum VP8FrameHeader {
    /// True when the frame data (starting with the payload header) is a keyframe (P bit clear).
    public static func isKeyframe(_ frame: ArraySlice<UInt8>) -> Bool {
        guard let b = frame.first else { return false }
        return b & 0x01 == 0
    }

    /// Width and height from a keyframe header, or nil if `frame` is not a well-formed keyframe start.
    public static func keyframeSize(_ frame: ArraySlice<UInt8>) -> (width: Int, height: Int)? {
        guard frame.count >= 10, isKeyframe(frame) else { return nil }
        let s = frame.startIndex
        guard frame[s + 3] == 0x9D, frame[s + 4] == 0x01, frame[s + 5] == 0x2A else { return nil }
        let w = (Int(frame[s + 6]) | Int(frame[s + 7]) << 8) & 0x3FFF
        let h = (Int(frame[s + 8]) | Int(frame[s + 9]) << 8) & 0x3FFF
        return (w, h)
    }
}

/// Temporal-layer facts the encoder reports for a frame, carried in the descriptor.
public struct TemporalLayerInfo: Equatable, Sendable {
    public var temporalLayer: UInt8
    public var layerSync: Bool
    /// TL0PICIDX of the frame (the packetizer fills it when nil).
    public var tl0PicIdx: UInt8?
    public init(temporalLayer: UInt8, layerSync: Bool, tl0PicIdx: UInt8? = nil) {
        self.temporalLayer = temporalLayer; self.layerSync = layerSync; self.tl0PicIdx = tl0PicIdx
    }
}

/// Splits encoded VP8 frames into RTP payloads no larger than `maxPayloadSize`, in balanced sizes,
/// with a 15-bit picture id that increases per frame.
public struct VP8Packetizer: RTPPacketizer {
    /// Bytes available per RTP payload (descriptor + VP8 data).
    public var maxPayloadSize: Int
    /// The picture id the next frame gets.
    public private(set) var pictureId: UInt16
    /// The TL0PICIDX of the latest base-layer frame (used when layers are signalled).
    public private(set) var tl0PicIdx: UInt8
    private var scratch: [UInt8] = []

    public init(maxPayloadSize: Int = 1200, initialPictureId: UInt16 = 0) {
        self.maxPayloadSize = maxPayloadSize
        self.pictureId = initialPictureId & 0x7FFF
        self.tl0PicIdx = 0
    }

    /// The payload size that fits an MTU after IP/UDP (28 bytes, IPv4), the RTP header and the SRTP tag.
    public static func maxPayloadSize(mtu: Int = 1200, rtpHeaderLength: Int = 12, srtpOverhead: Int = 16) -> Int {
        max(mtu - 28 - rtpHeaderLength - srtpOverhead, 8)
    }

    /// Packetizes one frame; `emit` gets each payload (valid only during the call) and whether it is the last
    /// of the frame (the RTP marker). Returns the number of packets, 0 for an empty frame.
    @discardableResult
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, nonReference: Bool, layer: TemporalLayerInfo?,
                                   emit: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows -> Int {
        guard frame.count > 0 else { return 0 }
        if let layer, layer.temporalLayer == 0 {
            tl0PicIdx = layer.tl0PicIdx ?? tl0PicIdx &+ 1
        }
        var d = VP8PayloadDescriptor(nonReference: nonReference, startOfPartition: true, pictureId: pictureId,
                                     tl0PicIdx: layer.map { _ in tl0PicIdx },
                                     temporalLayer: layer?.temporalLayer, layerSync: layer?.layerSync ?? false)
        pictureId = (pictureId &+ 1) & 0x7FFF
        let room = max(maxPayloadSize - d.encodedLength, 1)
        let count = (frame.count + room - 1) / room
        let base = frame.count / count, extra = frame.count % count
        var offset = 0
        if scratch.capacity < maxPayloadSize { scratch.reserveCapacity(maxPayloadSize) }
        for i in 0..<count {
            let size = base + (i < extra ? 1 : 0)
            scratch.removeAll(keepingCapacity: true)
            d.startOfPartition = i == 0
            d.write(into: &scratch)
            scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: frame[offset..<offset + size]))
            offset += size
            try emit(scratch[...], i == count - 1)
        }
        return count
    }
}

/// Reassembles VP8 frames from RTP packets (any order within `reorderWindow` packets), detects lost packets,
/// and reports a keyframe request instead of passing on frames that cannot be decoded. Malformed payloads
/// are counted and dropped. Frames are delivered in decode order.
public struct VP8Depacketizer: RTPDepacketizer {


    private struct Slot: Sendable {
        var seq: Int64 = -1
        var timestamp: UInt32 = 0
        var marker = false
        var startsFrame = false
        var pictureId: UInt16?
        var temporalLayer: UInt8?
        var data: [UInt8] = []
    }

    /// How many packets past a missing one to wait before declaring it lost.
    public var reorderWindow: Int
    /// Dropped delta frames after which a keyframe request is repeated.
    public var repeatRequestAfterFrames: Int
    public private(set) var stats = DepacketizerStats()

    private var slots: [Slot]
    private let mask: Int64
    private var highest: Int64?
    private var nextExpected: Int64?
    private var waitingForKeyframe = true
    /// The picture ID of the last frame delivered: a frame with the next one follows it even across sequence numbers
    /// that carried no VP8 (FEC packets in the same sequence space).
    private var lastPictureId: UInt16?
    private var requested = false
    private var droppedSinceRequest = 0
    private var frameBuffer: [UInt8] = []

    /// - Parameters:
    ///   - capacity: packets held while reassembling (rounded up to a power of two).
    public init(reorderWindow: Int = 16, capacity: Int = 256, repeatRequestAfterFrames: Int = 30) {
        var cap = 16
        while cap < max(capacity, reorderWindow * 2) { cap <<= 1 }
        slots = Array(repeating: Slot(), count: cap)
        mask = Int64(cap - 1)
        self.reorderWindow = reorderWindow
        self.repeatRequestAfterFrames = repeatRequestAfterFrames
    }

    /// Whether delta frames are being dropped until a keyframe arrives.
    public var isWaitingForKeyframe: Bool { waitingForKeyframe }

    /// Whether losing the packet with `sequence` for good leaves what comes next undecodable: while decoding, it is not
    /// older than the next packet expected in order; while waiting for a keyframe, it belongs to (or follows) a keyframe
    /// being assembled, which it leaves incomplete.
    public func needs(_ sequence: UInt16) -> Bool {
        guard let h = highest else { return false }
        let ext = h + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: h)))
        if waitingForKeyframe {
            return slots.contains { $0.seq >= 0 && $0.seq <= ext && $0.startsFrame && VP8FrameHeader.isKeyframe($0.data[...]) }
        }
        guard let n = nextExpected else { return true }
        return ext >= n
    }

    /// Feeds one RTP packet carrying VP8; `deliver` receives complete frames and keyframe requests.
    public mutating func insert(_ packet: RTPPacket, deliver: (DepacketizerEvent) -> Void) {
        guard let (d, data) = try? VP8PayloadDescriptor.parse(packet.payload) else {
            stats.malformedPackets += 1
            return
        }
        let seq = extend(packet.sequenceNumber)
        if let h = highest, seq - h > mask {
            // Far ahead of everything held: what is pending cannot complete.
            clearSlots()
            nextExpected = nil
            if !waitingForKeyframe { requestKeyframe(.packetLoss(missing: Int(seq - h - 1)), deliver) }
        }
        if let h = highest, h - seq > mask {
            stats.latePackets += 1
            return
        }
        if let n = nextExpected, seq < n {
            stats.latePackets += 1
            return
        }
        let index = Int(seq & mask)
        if slots[index].seq == seq {
            stats.duplicatePackets += 1
            return
        }
        slots[index].seq = seq
        slots[index].timestamp = packet.timestamp
        slots[index].marker = packet.marker
        slots[index].startsFrame = d.startsFrame
        slots[index].pictureId = d.pictureId
        slots[index].temporalLayer = d.temporalLayer
        slots[index].data.removeAll(keepingCapacity: true)
        // Size a slot once for any packet, so a steady stream reuses it without reallocating.
        if slots[index].data.capacity < data.count { slots[index].data.reserveCapacity(max(data.count, 1500)) }
        slots[index].data.append(contentsOf: data)
        if highest.map({ seq > $0 }) ?? true { highest = seq }

        if let (start, end) = completeFrame(around: seq) {
            handleComplete(start: start, end: end, deliver)
        }
        checkForLoss(deliver)
    }

    // MARK: private

    private func extend(_ seq: UInt16) -> Int64 {
        guard let h = highest else { return Int64(seq) + 65536 }
        return h + Int64(Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: h)))
    }

    private func slot(_ seq: Int64) -> Slot? {
        let s = slots[Int(seq & mask)]
        return s.seq == seq ? s : nil
    }

    /// The first and last sequence number of the complete frame holding `seq`, if all its packets are here.
    private func completeFrame(around seq: Int64) -> (Int64, Int64)? {
        guard let p = slot(seq) else { return nil }
        var start = seq
        var cur = p
        var steps: Int64 = 0
        while !cur.startsFrame {
            guard steps < mask, let prev = slot(start - 1), prev.timestamp == p.timestamp, !prev.marker else { return nil }
            start -= 1; cur = prev; steps += 1
        }
        var end = seq
        cur = p
        while !cur.marker {
            guard steps < mask, let next = slot(end + 1), next.timestamp == p.timestamp, !next.startsFrame else { return nil }
            end += 1; cur = next; steps += 1
        }
        return (start, end)
    }

    private mutating func handleComplete(start: Int64, end: Int64, _ deliver: (DepacketizerEvent) -> Void) {
        var start = start, end = end
        while true {
            let first = slots[Int(start & mask)].data[...]
            let key = VP8FrameHeader.isKeyframe(first)
            if key {
                // A keyframe resets decoding: anything older is obsolete.
                for i in slots.indices where slots[i].seq >= 0 && slots[i].seq < start { slots[i].seq = -1 }
                waitingForKeyframe = false; requested = false; droppedSinceRequest = 0
                emitFrame(start: start, end: end, keyframe: true, deliver)
            } else if !waitingForKeyframe && (nextExpected == start || followsLastFrame(slots[Int(start & mask)].pictureId, start: start)) {
                emitFrame(start: start, end: end, keyframe: false, deliver)
            } else if waitingForKeyframe {
                // A keyframe still being assembled (a packet of it missing, being repaired) comes before this frame:
                // keep it, it decodes once the keyframe completes. Dropped, its numbers would be what the stream
                // waits for next while the transport, which received them, never reports them lost.
                if keyframeAssembling(before: start) { return }
                for s in start...end { release(s) }
                stats.framesDropped += 1
                droppedSinceRequest += 1
                if !requested {
                    requestKeyframe(.noKeyframeYet, deliver)
                } else if droppedSinceRequest >= repeatRequestAfterFrames {
                    requestKeyframe(.stillWaiting, deliver)
                }
                return
            } else {
                return  // an earlier frame is still incomplete
            }
            nextExpected = end + 1
            // The following frame may already be complete: right after this one, or after numbers that carried no VP8.
            guard let next = completeFrame(around: end + 1) ?? nextPicture(after: end) else { return }
            (start, end) = next
        }
    }

    /// Whether a keyframe's first packet is held with a number below `seq` (the keyframe is incomplete: complete, it
    /// would have been delivered).
    private func keyframeAssembling(before seq: Int64) -> Bool {
        slots.contains { $0.seq >= 0 && $0.seq < seq && $0.startsFrame && VP8FrameHeader.isKeyframe($0.data[...]) }
    }

    /// A complete frame held within `ULPFECPayload.maxProtected` numbers after `end` that is the next picture.
    private func nextPicture(after end: Int64) -> (Int64, Int64)? {
        guard let h = highest, h > end + 1 else { return nil }
        var s = end + 2
        while s <= min(h, end + Int64(ULPFECPayload.maxProtected)) {
            if let p = slot(s), p.startsFrame, followsLastFrame(p.pictureId, start: s) { return completeFrame(around: s) }
            s += 1
        }
        return nil
    }

    /// Whether a frame starting at `start` with picture ID `pid` is the next picture after the last delivered one,
    /// with nothing VP8 of ours missing in between (only numbers that carried other payloads, e.g. FEC).
    private func followsLastFrame(_ pid: UInt16?, start: Int64) -> Bool {
        guard let pid, let last = lastPictureId, let n = nextExpected, start > n else { return false }
        let modulus: UInt16 = last > 0x7F || pid > 0x7F ? 0x8000 : 0x80
        return (pid &- last) % modulus == 1
    }

    private mutating func emitFrame(start: Int64, end: Int64, keyframe: Bool, _ deliver: (DepacketizerEvent) -> Void) {
        frameBuffer.removeAll(keepingCapacity: true)
        for s in start...end { frameBuffer.append(contentsOf: slots[Int(s & mask)].data) }
        let head = slots[Int(start & mask)]
        for s in start...end { release(s) }
        lastPictureId = head.pictureId
        stats.framesDelivered += 1
        let data = frameBuffer[...]
        deliver(.frame(ReceivedEncodedFrame(data: data, rtpTimestamp: head.timestamp, isKeyframe: keyframe,
                                        keyframeSize: keyframe ? VP8FrameHeader.keyframeSize(data) : nil,
                                        pictureId: head.pictureId, temporalLayer: head.temporalLayer,
                                        firstSequence: start, lastSequence: end)))
    }

    private mutating func checkForLoss(_ deliver: (DepacketizerEvent) -> Void) {
        guard !waitingForKeyframe, let n = nextExpected, let h = highest, h - n >= Int64(reorderWindow) else { return }
        var missing = 0
        var frameEnded = false
        for s in n...h {
            guard let p = slot(s) else { missing += 1; continue }
            if p.marker || (p.startsFrame && s > n) { frameEnded = true }
        }
        if missing == 0 {
            // Nothing missing and no frame ended yet: one frame longer than the window is still arriving.
            guard frameEnded else { return }
            // Nothing missing, a frame ended, yet no frame was made from n (no start, or packets of two frames under
            // one): no repair can complete it, so it is lost all the same (else the stream would stall while packets
            // keep arriving and no one asks for a keyframe).
            stats.unassemblable += 1
        }
        // Everything from n on depends on the missing packets (VP8 frames reference earlier ones).
        nextExpected = nil
        requestKeyframe(.packetLoss(missing: missing), deliver)
        // Complete delta frames already held are now undecodable; a held keyframe is still usable.
        var s = n
        while s <= h {
            if let p = slot(s), p.startsFrame, VP8FrameHeader.isKeyframe(p.data[...]), let (a, b) = completeFrame(around: s) {
                handleComplete(start: a, end: b, deliver)
                return
            }
            s += 1
        }
    }

    private mutating func requestKeyframe(_ reason: KeyframeRequestReason, _ deliver: (DepacketizerEvent) -> Void) {
        waitingForKeyframe = true
        requested = true
        droppedSinceRequest = 0
        stats.keyframeRequests += 1
        deliver(.keyframeRequest(reason))
    }

    private mutating func release(_ seq: Int64) {
        let i = Int(seq & mask)
        if slots[i].seq == seq { slots[i].seq = -1 }
    }

    private mutating func clearSlots() {
        for i in slots.indices { slots[i].seq = -1 }
    }
}
