import OTWire

/// What a `FrameTransform` knows about the encoded frame it handles.
public struct EncodedFrameInfo: Sendable, Equatable {
    public var kind: MediaKind
    /// The RTP SSRC of the stream.
    public var ssrc: UInt32
    /// The frame's RTP timestamp.
    public var rtpTimestamp: UInt32
    /// True for a VP8 keyframe (always false for audio).
    public var isKeyframe: Bool

    public init(kind: MediaKind, ssrc: UInt32, rtpTimestamp: UInt32, isKeyframe: Bool) {
        self.kind = kind; self.ssrc = ssrc; self.rtpTimestamp = rtpTimestamp; self.isKeyframe = isKeyframe
    }
}

/// A per-frame transform of encoded media: applied between the encoder and the packetizer on the send
/// side, and between the jitter buffer and the decoder on the receive side (the place end-to-end
/// encryption plugs in).
///
/// For VP8 a transform must leave the payload header intact (the first 10 bytes of a keyframe, the
/// first 3 of a delta frame, as WebRTC's frame encryption does): the receiver reads the keyframe flag
/// from it before the frame is transformed back.
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
