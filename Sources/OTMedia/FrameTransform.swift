import OTWire

/// What a `FrameTransform` knows about the encoded frame it handles.
public struct EncodedFrameInfo: Sendable, Equatable {
    public var kind: MediaKind
    /// The RTP SSRC of the stream.
    public var ssrc: UInt32
    /// The frame's RTP timestamp.
    public var rtpTimestamp: UInt32
    /// True for a video keyframe (always false for audio).
    public var isKeyframe: Bool
    /// The payload format the frame travels in: it says which leading bytes must stay readable
    /// (`RTPPayloadFormat.clearPrefixLength`).
    public var format: any RTPPayloadFormat

    /// `format` nil: the default of the kind (Opus, VP8).
    public init(kind: MediaKind, ssrc: UInt32, rtpTimestamp: UInt32, isKeyframe: Bool, format: (any RTPPayloadFormat)? = nil) {
        self.kind = kind; self.ssrc = ssrc; self.rtpTimestamp = rtpTimestamp; self.isKeyframe = isKeyframe
        self.format = format ?? (kind == .audio ? PayloadFormats.opus : PayloadFormats.vp8)
    }

    public static func == (a: EncodedFrameInfo, b: EncodedFrameInfo) -> Bool {
        a.kind == b.kind && a.ssrc == b.ssrc && a.rtpTimestamp == b.rtpTimestamp && a.isKeyframe == b.isKeyframe
            && a.format.name == b.format.name
    }
}

/// A per-frame transform of encoded media: applied between the encoder and the packetizer on the send
/// side, and between the jitter buffer and the decoder on the receive side (the place end-to-end
/// encryption plugs in).
///
/// A transform must leave the format's clear prefix intact (`info.format.clearPrefixLength`; VP8: the first 10
/// bytes of a keyframe, the first 3 of a delta frame, as WebRTC's frame encryption does): the receiver reads the
/// keyframe flag from it before the frame is transformed back.
public protocol FrameTransform: Sendable {
    /// True when the transform changes nothing; the pipelines then skip it (no copy).
    var isIdentity: Bool { get }
    /// Transforms an outgoing encoded frame: writes the result into `output` (cleared first, capacity reused).
    func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws
    /// Undoes `transformOutgoing` for a received frame: writes the result into `output` (cleared first).
    /// A throw drops the frame (counted; for video a keyframe is requested).
    func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws
}

/// The default transform: passes frames through untouched.
public struct IdentityFrameTransform: FrameTransform {
    public init() {}
    public var isIdentity: Bool { true }
    public func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: frame)
    }
    public func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: frame)
    }
}
