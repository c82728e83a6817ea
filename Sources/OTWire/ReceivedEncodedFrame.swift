import OTBase

/// An encoded frame reassembled from RTP packets by a depacketizer.
public struct ReceivedEncodedFrame: Sendable {
    /// The codec bitstream of the frame (valid until the next call into the depacketizer unless copied).
    public var data: ArraySlice<UInt8>
    public var rtpTimestamp: UInt32
    /// Decodable on its own (audio frames always are).
    public var isKeyframe: Bool
    /// Width and height read from a keyframe's header, when the format carries them.
    public var keyframeSize: (width: Int, height: Int)?
    /// The format's frame id (VP8 picture id), when the payload carries one.
    public var pictureId: UInt16?
    public var temporalLayer: UInt8?
    /// Extended sequence numbers of the first and last packet.
    public var firstSequence: Int64
    public var lastSequence: Int64
    public init(data: ArraySlice<UInt8>, rtpTimestamp: UInt32, isKeyframe: Bool, keyframeSize: (width: Int, height: Int)? = nil,
                pictureId: UInt16? = nil, temporalLayer: UInt8? = nil, firstSequence: Int64, lastSequence: Int64) {
        self.data = data; self.rtpTimestamp = rtpTimestamp; self.isKeyframe = isKeyframe; self.keyframeSize = keyframeSize
        self.pictureId = pictureId; self.temporalLayer = temporalLayer
        self.firstSequence = firstSequence; self.lastSequence = lastSequence
    }
}
