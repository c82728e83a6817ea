import OTBase
import OTWire

/// One encoded frame as an encoder produced it; `data` is valid only during the output callback.
public struct EncodedVideoFrame {
    public var data: UnsafeRawBufferPointer
    public var isKeyframe: Bool
    /// Capture time of the source frame in microseconds.
    public var timestampMicros: Int64
    /// Temporal-layer facts for the payload descriptor (nil without temporal layers).
    public var layer: TemporalLayerInfo?
    /// True when no later frame references this one (it may be dropped by a forwarder).
    public var nonReference: Bool
}

/// A video encoder the send pipeline drives whatever the codec: I420 frames in, encoded frames out.
public protocol VideoEncoder: AnyObject {
    /// The payload format its frames travel in.
    var format: any RTPPayloadFormat { get }
    var config: VideoEncoderConfig { get }
    /// Changes the target bitrate and/or frame rate without restarting the encoder.
    func setRates(bitrateKbps: Int?, framerate: Int?) throws
    /// Makes the next encoded frame a keyframe.
    func requestKeyframe()
    /// Encodes one frame of the configured size; `output` receives each encoded frame (none when rate control
    /// drops it).
    func encode(_ frame: VideoFrame, forceKeyframe: Bool, output: (EncodedVideoFrame) throws -> Void) throws
}

/// A video decoder the receive pipeline drives whatever the codec.
public protocol VideoDecoder: AnyObject {
    var format: any RTPPayloadFormat { get }
    /// Decodes one encoded frame and lends each picture to `picture` (valid only during the call). Returns false
    /// when no picture came out. Throws for a bitstream the decoder rejects or reports as corrupt.
    @discardableResult
    func decode(_ data: UnsafeRawBufferPointer, timestampMicros: Int64, picture: (I420PlanesView) throws -> Void) throws -> Bool
}

extension VideoDecoder {
    /// Decodes a frame held in an array slice into `frame` (resized as needed; its planes are reused).
    @discardableResult
    public func decode(_ data: ArraySlice<UInt8>, timestampMicros: Int64 = 0, into frame: inout VideoFrame) throws -> Bool {
        try data.withUnsafeBytes { try decode($0, timestampMicros: timestampMicros) { try $0.copy(into: &frame) } }
    }
}

/// The video codecs libotsession has, by payload format.
public enum VideoCodecs {
    /// An encoder for `format`; throws `.invalidParameter` for a format without one.
    public static func makeEncoder(_ format: any RTPPayloadFormat, config: VideoEncoderConfig) throws -> any VideoEncoder {
        switch format.name.lowercased() {
        case "vp8": return try VP8Encoder(config: config)
        case "vp9": return try VP9Encoder(config: config)
        default: throw OTError(.invalidParameter, "no video encoder for \(format.name)")
        }
    }

    /// A decoder for `format`; throws `.invalidParameter` for a format without one.
    public static func makeDecoder(_ format: any RTPPayloadFormat, threads: Int = 1) throws -> any VideoDecoder {
        switch format.name.lowercased() {
        case "vp8": return try VP8Decoder(threads: threads)
        case "vp9": return try VP9Decoder(threads: threads)
        default: throw OTError(.invalidParameter, "no video decoder for \(format.name)")
        }
    }
}
