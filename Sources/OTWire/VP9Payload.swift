import OTBase

/// The VP9 payload descriptor at the start of every VP9 RTP payload (RFC 9628 §4.2). Holds no arrays, so parsing
/// it allocates nothing (the router reads it per packet).
public struct VP9PayloadDescriptor: Equatable, Sendable {
    /// P: the picture is predicted from earlier pictures (clear on a keyframe).
    public var interPicture: Bool
    /// F: flexible mode (references listed per picture as P_DIFFs) rather than a predefined group of frames.
    public var flexible: Bool
    /// B: this packet starts a (layer) frame.
    public var startOfFrame: Bool
    /// E: this packet ends a (layer) frame.
    public var endOfFrame: Bool
    /// Z: the frame is not used for inter-layer prediction.
    public var notInterLayerReference: Bool
    /// The picture id, 7 or 15 bits (`pictureIdIs15Bit`), or nil when absent (I clear).
    public var pictureId: UInt16?
    public var pictureIdIs15Bit: Bool
    /// The layer indices (L): temporal (0...7) and spatial (0...7) layer, U (switching up point), D (inter-layer
    /// dependency); nil when absent (one layer of each).
    public var layer: Layer?
    /// TL0PICIDX (non-flexible mode with layer indices).
    public var tl0PicIdx: UInt8?
    /// How many reference P_DIFFs followed (flexible mode, P set): 0...3.
    public var referenceCount: Int
    /// The scalability structure (V), sent on the first packet of a keyframe.
    public var scalability: ScalabilityStructure?

    public struct Layer: Equatable, Sendable {
        public var temporal: UInt8
        public var switchingUp: Bool
        public var spatial: UInt8
        public var interLayerDependent: Bool
        public init(temporal: UInt8, switchingUp: Bool = false, spatial: UInt8 = 0, interLayerDependent: Bool = false) {
            self.temporal = temporal & 0x07; self.switchingUp = switchingUp
            self.spatial = spatial & 0x07; self.interLayerDependent = interLayerDependent
        }
    }

    /// The SS data: spatial layers, the highest layer's resolution (when Y), the size of the group of frames (when G).
    /// What we send: one spatial layer with its resolution, and a group of one frame (temporal layer 0, referencing
    /// the previous picture), as libwebrtc does for a single-layer stream.
    public struct ScalabilityStructure: Equatable, Sendable {
        public var spatialLayers: Int
        public var width: UInt16?
        public var height: UInt16?
        /// N_G: frames in the group of frames, nil when G is clear.
        public var picturesInGroup: Int?
        public init(spatialLayers: Int = 1, width: UInt16? = nil, height: UInt16? = nil, picturesInGroup: Int? = nil) {
            self.spatialLayers = spatialLayers; self.width = width; self.height = height; self.picturesInGroup = picturesInGroup
        }
    }

    public init(interPicture: Bool, flexible: Bool = false, startOfFrame: Bool, endOfFrame: Bool,
                notInterLayerReference: Bool = false, pictureId: UInt16? = nil, pictureIdIs15Bit: Bool = true,
                layer: Layer? = nil, tl0PicIdx: UInt8? = nil, referenceCount: Int = 0, scalability: ScalabilityStructure? = nil) {
        self.interPicture = interPicture; self.flexible = flexible; self.startOfFrame = startOfFrame
        self.endOfFrame = endOfFrame; self.notInterLayerReference = notInterLayerReference
        self.pictureId = pictureId.map { $0 & (pictureIdIs15Bit ? 0x7FFF : 0x7F) }
        self.pictureIdIs15Bit = pictureIdIs15Bit; self.layer = layer; self.tl0PicIdx = tl0PicIdx
        self.referenceCount = referenceCount; self.scalability = scalability
    }

    /// Whether this packet starts a keyframe as the descriptor says: B set, P clear, base spatial layer.
    public var startsKeyframePicture: Bool { startOfFrame && !interPicture && (layer?.spatial ?? 0) == 0 }

    /// Appends the descriptor (non-flexible mode; `referenceCount` is not written).
    public func write(into out: inout [UInt8]) {
        out.append((pictureId != nil ? 0x80 : 0) | (interPicture ? 0x40 : 0) | (layer != nil ? 0x20 : 0)
                   | (startOfFrame ? 0x08 : 0) | (endOfFrame ? 0x04 : 0)
                   | (scalability != nil ? 0x02 : 0) | (notInterLayerReference ? 0x01 : 0))
        if let pid = pictureId { DescriptorPictureID.write(pid, fifteenBit: pictureIdIs15Bit, into: &out) }
        if let l = layer {
            out.append(l.temporal << 5 | (l.switchingUp ? 0x10 : 0) | l.spatial << 1 | (l.interLayerDependent ? 0x01 : 0))
            out.append(tl0PicIdx ?? 0)
        }
        if let ss = scalability {
            let hasSize = ss.width != nil && ss.height != nil
            out.append(UInt8(truncatingIfNeeded: max(1, min(8, ss.spatialLayers)) - 1) << 5 | (hasSize ? 0x10 : 0)
                       | (ss.picturesInGroup != nil ? 0x08 : 0))
            if let w = ss.width, let h = ss.height {
                for _ in 0..<max(1, min(8, ss.spatialLayers)) {
                    out += [UInt8(w >> 8), UInt8(truncatingIfNeeded: w), UInt8(h >> 8), UInt8(truncatingIfNeeded: h)]
                }
            }
            if let n = ss.picturesInGroup {
                out.append(UInt8(clamping: n))
                // Each frame of the group: temporal layer 0, no switching up, one reference: the previous picture.
                for _ in 0..<min(n, 255) { out += [0x04, 0x01] }
            }
        }
    }

    /// Bytes `write` appends.
    public var encodedLength: Int {
        var n = 1
        if pictureId != nil { n += pictureIdIs15Bit ? 2 : 1 }
        if layer != nil { n += 2 }
        if let ss = scalability {
            n += 1
            if ss.width != nil && ss.height != nil { n += 4 * max(1, min(8, ss.spatialLayers)) }
            if let g = ss.picturesInGroup { n += 1 + 2 * min(g, 255) }
        }
        return n
    }

    /// Parses the descriptor at the start of an RTP payload; returns it and the VP9 data after it. Throws `WireError`
    /// when the payload is truncated or holds no VP9 data.
    public static func parse(_ payload: ArraySlice<UInt8>) throws -> (VP9PayloadDescriptor, ArraySlice<UInt8>) {
        var r = ByteReader(payload)
        let b0 = try r.u8("VP9 payload descriptor")
        var d = VP9PayloadDescriptor(interPicture: b0 & 0x40 != 0, flexible: b0 & 0x10 != 0, startOfFrame: b0 & 0x08 != 0,
                                     endOfFrame: b0 & 0x04 != 0, notInterLayerReference: b0 & 0x01 != 0)
        if b0 & 0x80 != 0 { (d.pictureId, d.pictureIdIs15Bit) = try DescriptorPictureID.read(&r, "VP9 picture id", "VP9 15-bit picture id") }
        if b0 & 0x20 != 0 {
            let l = try r.u8("VP9 layer indices")
            d.layer = Layer(temporal: l >> 5, switchingUp: l & 0x10 != 0, spatial: (l >> 1) & 0x07, interLayerDependent: l & 0x01 != 0)
            if !d.flexible { d.tl0PicIdx = try r.u8("VP9 TL0PICIDX") }
        }
        if d.flexible && d.interPicture {
            // Up to three P_DIFFs, each saying (N) whether another follows.
            while true {
                let p = try r.u8("VP9 reference index")
                d.referenceCount += 1
                guard p & 0x01 != 0 else { break }
                guard d.referenceCount < 3 else { throw WireError("VP9 descriptor lists more than three references") }
            }
        }
        if b0 & 0x02 != 0 {
            let v = try r.u8("VP9 scalability structure")
            var ss = ScalabilityStructure(spatialLayers: Int(v >> 5) + 1)
            if v & 0x10 != 0 {
                for i in 0..<ss.spatialLayers {
                    let w = UInt16(try r.u8("VP9 SS width")) << 8 | UInt16(try r.u8("VP9 SS width"))
                    let h = UInt16(try r.u8("VP9 SS height")) << 8 | UInt16(try r.u8("VP9 SS height"))
                    if i == ss.spatialLayers - 1 { (ss.width, ss.height) = (w, h) }
                }
            }
            if v & 0x08 != 0 {
                let n = Int(try r.u8("VP9 SS N_G"))
                ss.picturesInGroup = n
                for _ in 0..<n {
                    let tur = try r.u8("VP9 SS group entry")
                    for _ in 0..<Int(tur >> 2 & 0x03) { _ = try r.u8("VP9 SS P_DIFF") }
                }
            }
            d.scalability = ss
        }
        let data = r.rest()
        guard !data.isEmpty else { throw WireError("VP9 payload holds a descriptor but no data") }
        return (d, data)
    }
}

/// Facts read from the VP9 uncompressed header at the start of a frame (VP9 bitstream specification §6.2).
public enum VP9FrameHeader {
    /// Frame type and, for a keyframe, the frame size; nil when `frame` does not start with a well-formed header
    /// (or, for a keyframe, is too short to hold its size).
    public static func parse<Bytes: RandomAccessCollection<UInt8>>(_ frame: Bytes) -> (isKeyframe: Bool, size: (width: Int, height: Int)?)?
    where Bytes.Index == Int {
        var bits = BitReader(frame)
        guard let marker = bits.read(2), marker == 2, let low = bits.read(1), let high = bits.read(1) else { return nil }
        let profile = high << 1 | low
        if profile == 3 { guard bits.read(1) == 0 else { return nil } }
        guard let showExisting = bits.read(1) else { return nil }
        if showExisting == 1 { return (false, nil) }
        guard let frameType = bits.read(1), bits.read(2) != nil else { return nil }  // then show_frame, error_resilient_mode
        guard frameType == 0 else { return (false, nil) }
        guard bits.read(8) == 0x49, bits.read(8) == 0x83, bits.read(8) == 0x42 else { return nil }
        if profile >= 2 { guard bits.read(1) != nil else { return nil } }  // ten_or_twelve_bit
        guard let colorSpace = bits.read(3) else { return nil }
        let extra = colorSpace != 7 ? 1 + (profile & 1 == 1 ? 3 : 0) : (profile & 1 == 1 ? 1 : 0)
        guard bits.read(extra) != nil, let w = bits.read(16), let h = bits.read(16) else { return nil }
        return (true, (w + 1, h + 1))
    }

    /// True when the frame data starts with a keyframe's uncompressed header.
    public static func isKeyframe(_ frame: ArraySlice<UInt8>) -> Bool { parse(frame)?.isKeyframe ?? false }

    /// Width and height from a keyframe's header, or nil.
    public static func keyframeSize(_ frame: ArraySlice<UInt8>) -> (width: Int, height: Int)? { parse(frame)?.size }

    /// Reads big-endian bit fields from bytes, nil past the end.
    private struct BitReader<Bytes: RandomAccessCollection<UInt8>> where Bytes.Index == Int {
        let bytes: Bytes
        var position = 0
        init(_ bytes: Bytes) { self.bytes = bytes }
        mutating func read(_ count: Int) -> Int? {
            guard position + count <= bytes.count * 8 else { return nil }
            var v = 0
            for _ in 0..<count {
                let byte = bytes[bytes.startIndex + position >> 3]
                v = v << 1 | Int(byte >> (7 - UInt8(position & 7)) & 1)
                position += 1
            }
            return v
        }
    }
}

/// VP9's payload descriptor as the frame assembler reads it: a keyframe starts with B set and P clear on the base
/// spatial layer, and its uncompressed header says so too.
public enum VP9PayloadReader: FramePayloadReader {
    public static func read(_ payload: ArraySlice<UInt8>) -> (FramePacketInfo, ArraySlice<UInt8>)? {
        guard let (d, data) = try? VP9PayloadDescriptor.parse(payload) else { return nil }
        return (FramePacketInfo(startsFrame: d.startOfFrame, startsKeyframe: d.startsKeyframePicture && VP9FrameHeader.isKeyframe(data),
                                pictureId: d.pictureId, temporalLayer: d.layer?.temporal), data)
    }
    public static func keyframeSize(_ frame: ArraySlice<UInt8>) -> (width: Int, height: Int)? {
        VP9FrameHeader.keyframeSize(frame)
    }
}

/// Reassembles VP9 frames from RTP packets (RFC 9628): one spatial layer; frames end with the RTP marker.
public typealias VP9Depacketizer = FrameDepacketizer<VP9PayloadReader>

/// Splits encoded VP9 frames (one spatial and temporal layer) into RTP payloads no larger than `maxPayloadSize`,
/// non-flexible mode, with a 15-bit picture id that increases per frame and the scalability structure on the first
/// packet of each keyframe (browsers need it to start decoding). The frame's own header says whether it is a keyframe
/// and its size (it stays in clear under end-to-end encryption: `VP9PayloadFormat.clearPrefixLength`).
public struct VP9Packetizer: RTPPacketizer {
    public var maxPayloadSize: Int
    /// The picture id the next frame gets.
    public private(set) var pictureId: UInt16
    private var scratch: [UInt8] = []

    public init(maxPayloadSize: Int = 1200, initialPictureId: UInt16 = 0) {
        self.maxPayloadSize = maxPayloadSize
        self.pictureId = initialPictureId & 0x7FFF
    }

    /// `nonReference` and `layer` have no field in a single-layer non-flexible descriptor and are ignored.
    @discardableResult
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, nonReference: Bool, layer: TemporalLayerInfo?,
                                   emit: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows -> Int {
        guard frame.count > 0 else { return 0 }
        let header = VP9FrameHeader.parse(frame)
        let key = header?.isKeyframe ?? false
        var d = VP9PayloadDescriptor(interPicture: !key, startOfFrame: true, endOfFrame: false, pictureId: pictureId)
        if key, let size = header?.size {
            d.scalability = .init(spatialLayers: 1, width: UInt16(clamping: size.width), height: UInt16(clamping: size.height),
                                  picturesInGroup: 1)
        }
        pictureId = (pictureId &+ 1) & 0x7FFF
        let firstRoom = max(maxPayloadSize - d.encodedLength, 1)
        var rest = d
        rest.scalability = nil
        let restRoom = max(maxPayloadSize - rest.encodedLength, 1)
        // The first packet carries the longer descriptor; the rest share the remaining bytes evenly.
        let count = frame.count <= firstRoom ? 1 : 1 + (frame.count - firstRoom + restRoom - 1) / restRoom
        let first = min(firstRoom, (frame.count + count - 1) / count)
        if scratch.capacity < maxPayloadSize { scratch.reserveCapacity(maxPayloadSize) }
        var offset = 0
        for i in 0..<count {
            let size: Int
            if i == 0 {
                size = first
            } else {
                let left = frame.count - offset, packets = count - i
                size = (left + packets - 1) / packets
            }
            scratch.removeAll(keepingCapacity: true)
            var desc = i == 0 ? d : rest
            desc.startOfFrame = i == 0
            desc.endOfFrame = i == count - 1
            desc.write(into: &scratch)
            scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: frame[offset..<offset + size]))
            offset += size
            try emit(scratch[...], i == count - 1)
        }
        return count
    }
}

/// VP9 (RFC 9628), profile 0: frames split by `VP9Packetizer`, reassembled by `VP9Depacketizer`.
public struct VP9PayloadFormat: RTPPayloadFormat {
    public init() {}
    public var name: String { "VP9" }
    public var kind: MediaKind { .video }
    public var clockRate: UInt32 { 90_000 }
    public var fmtp: String? { "profile-id=0" }
    public var rtcpFeedback: [String] { ["nack", "nack pli", "ccm fir", "transport-cc"] }
    public var preferredPayloadType: UInt8 { 98 }
    /// VP9 at 90 kHz in profile 0 (no `profile-id` means 0; browsers also offer profile 2, which we do not decode).
    public func matches(_ codec: SDPCodec) -> Bool {
        codec.name.lowercased() == "vp9" && codec.clockRate == clockRate && (codec.fmtpParameters["profile-id"] ?? "0") == "0"
    }
    public func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool {
        VP9PayloadReader.read(payload)?.0.startsKeyframe ?? false
    }
    public func frameID(_ payload: ArraySlice<UInt8>) -> UInt16? {
        (try? VP9PayloadDescriptor.parse(payload))?.0.pictureId
    }
    /// The uncompressed header up to a keyframe's size (68 bits in profile 0): 10 bytes of a keyframe; the first
    /// byte (frame marker, profile, frame type) of other frames.
    public func clearPrefixLength(isKeyframe: Bool) -> Int { isKeyframe ? 10 : 1 }
    /// Starts at a random picture id.
    public func makePacketizer(maxPayloadSize: Int) -> VP9Packetizer {
        VP9Packetizer(maxPayloadSize: maxPayloadSize, initialPictureId: UInt16.random(in: 0...0x7FFF))
    }
    public func makeDepacketizer(reorderWindow: Int) -> VP9Depacketizer {
        VP9Depacketizer(reorderWindow: reorderWindow, capacity: max(512, 2 * reorderWindow))
    }
}
