import OTBase

/// What `RTPFrameAssembler` needs of one packet, read from its payload descriptor by the video format.
public struct FramePacketInfo: Equatable, Sendable {
    /// The packet starts a frame (VP8 S with partition 0, VP9 B).
    public var startsFrame: Bool
    /// The packet starts a keyframe: a receiver can decode from it.
    public var startsKeyframe: Bool
    /// The format's frame id (7 or 15 bits), consecutive per frame.
    public var pictureId: UInt16?
    public var temporalLayer: UInt8?
    public init(startsFrame: Bool, startsKeyframe: Bool, pictureId: UInt16?, temporalLayer: UInt8?) {
        self.startsFrame = startsFrame; self.startsKeyframe = startsKeyframe
        self.pictureId = pictureId; self.temporalLayer = temporalLayer
    }
}

/// How a video format's depacketizer reads its payloads (the codec-specific half of `FrameDepacketizer`).
public protocol FramePayloadReader: Sendable {
    /// The payload's assembly facts and the codec data after its descriptor; nil when malformed or empty.
    static func read(_ payload: ArraySlice<UInt8>) -> (FramePacketInfo, ArraySlice<UInt8>)?
    /// Width and height read from a whole keyframe's bitstream, nil when it does not carry them.
    static func keyframeSize(_ frame: ArraySlice<UInt8>) -> (width: Int, height: Int)?
}

/// A video format's depacketizer: its `Reader` parses each descriptor, one `RTPFrameAssembler` does the rest.
public struct FrameDepacketizer<Reader: FramePayloadReader>: RTPDepacketizer {
    private var assembler: RTPFrameAssembler

    /// See `RTPFrameAssembler.init`.
    public init(reorderWindow: Int = 16, capacity: Int = 256, repeatRequestAfterFrames: Int = 30) {
        assembler = RTPFrameAssembler(reorderWindow: reorderWindow, capacity: capacity,
                                      repeatRequestAfterFrames: repeatRequestAfterFrames, keyframeSize: Reader.keyframeSize)
    }

    public mutating func insert(_ packet: RTPPacket, deliver: (DepacketizerEvent) -> Void) {
        guard let (info, data) = Reader.read(packet.payload) else { return assembler.countMalformed() }
        assembler.insert(packet, info, data: data, deliver: deliver)
    }
    public func needs(_ sequence: UInt16) -> Bool { assembler.needs(sequence) }
    public var firstMissing: Int64? { assembler.firstMissing }
    public var isWaitingForKeyframe: Bool { assembler.isWaitingForKeyframe }
    public var stats: DepacketizerStats { assembler.stats }
}

/// Reassembles the frames of a video format from RTP packets (any order within `reorderWindow` packets), detects lost
/// packets, and reports a keyframe request instead of passing on frames that cannot be decoded. Frames are delivered in
/// decode order. The format reads each payload's descriptor (`FramePayloadReader`); this is the codec-free rest.
public struct RTPFrameAssembler: Sendable {


    private struct Slot: Sendable {
        var seq: Int64 = -1
        var timestamp: UInt32 = 0
        var marker = false
        var startsFrame = false
        var startsKeyframe = false
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
    /// that carried none of the format (FEC packets in the same sequence space).
    private var lastPictureId: UInt16?
    private var requested = false
    private var droppedSinceRequest = 0
    /// The last number of the newest delta frame dropped while waiting for a keyframe: a keyframe that completes
    /// later with lower numbers (its first packet was being repaired) is followed by frames that are gone.
    private var droppedThrough: Int64?
    private var frameBuffer: [UInt8] = []
    /// `firstMissing`, tracked as packets come (`trackHole`) rather than found by scanning the window: `scan` is the
    /// next number to look at; every number from `nextExpected` up to `heldUpTo` (exclusive) is held; `gap` starts a
    /// run of missing numbers before `scan` that no held packet has yet shown to be a hole (or numbers that carried
    /// none of the format); `scanBase` is the `nextExpected` all this was found for.
    private var hole: Int64?
    private var scan: Int64 = 0
    private var heldUpTo: Int64 = 0
    private var gap: Int64?
    private var scanBase: Int64?
    private let keyframeSize: @Sendable (ArraySlice<UInt8>) -> (width: Int, height: Int)?

    /// - Parameters:
    ///   - capacity: packets held while reassembling (rounded up to a power of two).
    ///   - keyframeSize: reads a whole keyframe's width and height (the format's).
    public init(reorderWindow: Int = 16, capacity: Int = 256, repeatRequestAfterFrames: Int = 30,
                keyframeSize: @escaping @Sendable (ArraySlice<UInt8>) -> (width: Int, height: Int)?) {
        var cap = 16
        while cap < max(capacity, reorderWindow * 2) { cap <<= 1 }
        slots = Array(repeating: Slot(), count: cap)
        mask = Int64(cap - 1)
        self.reorderWindow = reorderWindow
        self.repeatRequestAfterFrames = repeatRequestAfterFrames
        self.keyframeSize = keyframeSize
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
            return slots.contains { $0.seq >= 0 && $0.seq <= ext && $0.startsKeyframe }
        }
        guard let n = nextExpected else { return true }
        return ext >= n
    }

    /// While decoding, the first sequence number (extended) missing before a packet held: the hole the stream waits on
    /// for a repair. nil when nothing is missing (a frame longer than the reorder window still arriving in order is no
    /// hole; nor are numbers that carried none of the format, e.g. FEC, before the next picture) or while a keyframe
    /// is awaited.
    public var firstMissing: Int64? { hole }

    /// Counts a packet whose payload the format could not read.
    public mutating func countMalformed() { stats.malformedPackets += 1 }

    /// Feeds one RTP packet, its descriptor read by the format (`d`; `data`, the codec bytes after it); `deliver`
    /// receives complete frames and keyframe requests.
    public mutating func insert(_ packet: RTPPacket, _ d: FramePacketInfo, data: ArraySlice<UInt8>,
                                deliver: (DepacketizerEvent) -> Void) {
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
        slots[index].startsKeyframe = d.startsKeyframe
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
        trackHole(inserted: seq)
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
            let key = slots[Int(start & mask)].startsKeyframe
            if key {
                // A keyframe resets decoding: anything older is obsolete.
                for i in slots.indices where slots[i].seq >= 0 && slots[i].seq < start { slots[i].seq = -1 }
                waitingForKeyframe = false; requested = false; droppedSinceRequest = 0
                emitFrame(start: start, end: end, keyframe: true, deliver)
                if let dropped = droppedThrough, dropped > end {
                    // Frames right after this keyframe were dropped before it completed: what follows cannot decode,
                    // and the transport, which received their packets, will never report them lost. Ask again now
                    // rather than wait out the hole.
                    droppedThrough = nil
                    nextExpected = nil
                    requestKeyframe(.packetLoss(missing: Int(dropped - end)), deliver)
                    return
                }
                droppedThrough = nil
            } else if !waitingForKeyframe && (nextExpected == start || followsLastFrame(slots[Int(start & mask)].pictureId, start: start)) {
                emitFrame(start: start, end: end, keyframe: false, deliver)
            } else if waitingForKeyframe {
                // A keyframe still being assembled (a packet of it missing, being repaired) comes before this frame:
                // keep it, it decodes once the keyframe completes. Dropped, its numbers would be what the stream
                // waits for next while the transport, which received them, never reports them lost.
                if keyframeAssembling(before: start) { return }
                for s in start...end { release(s) }
                droppedThrough = max(droppedThrough ?? end, end)
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
            // The following frame may already be complete: right after this one, or after numbers that carried none of the format.
            guard let next = completeFrame(around: end + 1) ?? nextPicture(after: end) else { return }
            (start, end) = next
        }
    }

    /// Whether a keyframe's first packet is held with a number below `seq` (the keyframe is incomplete: complete, it
    /// would have been delivered).
    private func keyframeAssembling(before seq: Int64) -> Bool {
        slots.contains { $0.seq >= 0 && $0.seq < seq && $0.startsKeyframe }
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
    /// with nothing of the format missing in between (only numbers that carried other payloads, e.g. FEC).
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
                                        keyframeSize: keyframe ? keyframeSize(data) : nil,
                                        pictureId: head.pictureId, temporalLayer: head.temporalLayer,
                                        firstSequence: start, lastSequence: end)))
    }

    /// Updates `firstMissing` after `seq` was stored: the scan goes on from where it stopped, and starts again from
    /// `nextExpected` when that moved (frames delivered) or from the first number not known held when `seq` filled a
    /// number already looked at (a repair). So a packet arriving in order costs O(1), a repair the numbers after the
    /// run held from `nextExpected`.
    private mutating func trackHole(inserted seq: Int64) {
        guard !waitingForKeyframe, let n = nextExpected, let h = highest else {
            scanBase = nil
            hole = nil
            return
        }
        if scanBase != n {
            scanBase = n
            (scan, heldUpTo, gap, hole) = (n, n, nil, nil)
        } else if seq < scan {
            (scan, gap, hole) = (heldUpTo, nil, nil)
        }
        while hole == nil && scan <= h {
            let i = Int(scan & mask)
            if slots[i].seq != scan {
                if gap == nil { gap = scan }
            } else if let g = gap {
                // A hole, unless what follows it is the next picture (the numbers carried FEC).
                guard slots[i].startsFrame, followsLastFrame(slots[i].pictureId, start: scan) else {
                    hole = g
                    return
                }
                gap = nil
            } else if heldUpTo == scan {
                heldUpTo += 1
            }
            scan += 1
        }
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
        // Everything from n on depends on the missing packets (video frames reference earlier ones).
        nextExpected = nil
        requestKeyframe(.packetLoss(missing: missing), deliver)
        // Complete delta frames already held are now undecodable; a held keyframe is still usable.
        var s = n
        while s <= h {
            if let p = slot(s), p.startsKeyframe, let (a, b) = completeFrame(around: s) {
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
