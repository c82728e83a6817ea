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
        if let pid = pictureId { DescriptorPictureID.write(pid, fifteenBit: pictureIdIs15Bit, into: &out) }
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
            if x & 0x80 != 0 { (d.pictureId, d.pictureIdIs15Bit) = try DescriptorPictureID.read(&r, "VP8 picture id", "VP8 15-bit picture id") }
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
        PayloadFormats.vp8.maxPayloadSize(mtu: mtu, rtpHeaderLength: rtpHeaderLength, srtpOverhead: srtpOverhead)
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

/// VP8's payload descriptor as the frame assembler reads it.
public enum VP8PayloadReader: FramePayloadReader {
    public static func read(_ payload: ArraySlice<UInt8>) -> (FramePacketInfo, ArraySlice<UInt8>)? {
        guard let (d, data) = try? VP8PayloadDescriptor.parse(payload) else { return nil }
        return (FramePacketInfo(startsFrame: d.startsFrame, startsKeyframe: d.startsFrame && VP8FrameHeader.isKeyframe(data),
                                pictureId: d.pictureId, temporalLayer: d.temporalLayer), data)
    }
    public static func keyframeSize(_ frame: ArraySlice<UInt8>) -> (width: Int, height: Int)? {
        VP8FrameHeader.keyframeSize(frame)
    }
}

/// Reassembles VP8 frames from RTP packets (RFC 7741).
public typealias VP8Depacketizer = FrameDepacketizer<VP8PayloadReader>
