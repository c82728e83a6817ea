import OTBase
import OTWire

/// An audio encoder the send pipeline drives whatever the codec: one frame of interleaved PCM in, one packet out.
/// The settings it is made with are `OpusEncoderConfig`'s (rate, channels, bitrate, frame length, FEC, DTX), the
/// knobs any WebRTC audio codec has.
public protocol AudioEncoder: AnyObject {
    /// The payload format its packets travel in.
    var format: any RTPPayloadFormat { get }
    var config: OpusEncoderConfig { get }
    /// Encodes one frame (`config.samplesPerFrame × channels` samples) into `packet` (cleared first; its capacity
    /// reused). Returns the packet length.
    @discardableResult
    func encode(_ pcm: UnsafeBufferPointer<Int16>, into packet: inout [UInt8]) throws -> Int
    /// Changes the target bitrate (bit/s) without restarting.
    func setBitrate(_ bps: Int) throws
    /// Switches in-band forward error correction, sized for the loss receivers report (percent).
    func setFEC(_ on: Bool, expectedLossPercent: Int?) throws
    /// Switches discontinuous transmission.
    func setDTX(_ on: Bool) throws
    /// Whether the last frame was coded as DTX silence.
    var inDTX: Bool { get }
}

/// An audio decoder the receive pipeline drives whatever the codec: a packet, or a loss, in; interleaved PCM out.
public protocol AudioDecoder: AnyObject {
    var format: any RTPPayloadFormat { get }
    var sampleRate: Int { get }
    var channels: Int { get }
    /// Decodes one packet into `pcm` (cleared; capacity reused). Returns samples per channel.
    @discardableResult
    func decode(_ payload: ArraySlice<UInt8>, into pcm: inout [Int16]) throws -> Int
    /// Conceals `samples` per channel of lost audio.
    @discardableResult
    func concealLoss(samples: Int, into pcm: inout [Int16]) throws -> Int
    /// Rebuilds the lost frame before `nextPayload` from the FEC data it carries (concealing when it has none).
    @discardableResult
    func recoverWithFEC(from nextPayload: ArraySlice<UInt8>, samples: Int, into pcm: inout [Int16]) throws -> Int
}

/// The audio codecs libotsession has, by payload format.
public enum AudioCodecs {
    /// An encoder for `format`; throws `.invalidParameter` for a format without one.
    public static func makeEncoder(_ format: any RTPPayloadFormat, config: OpusEncoderConfig) throws -> any AudioEncoder {
        switch format.name.lowercased() {
        case "opus": return try OpusAudioEncoder(config: config)
        default: throw OTError(.invalidParameter, "no audio encoder for \(format.name)")
        }
    }

    /// A decoder for `format` with this output rate and channel count; throws `.invalidParameter` for a format
    /// without one.
    public static func makeDecoder(_ format: any RTPPayloadFormat, sampleRate: Int, channels: Int) throws -> any AudioDecoder {
        switch format.name.lowercased() {
        case "opus": return try OpusAudioDecoder(sampleRate: sampleRate, channels: channels)
        default: throw OTError(.invalidParameter, "no audio decoder for \(format.name)")
        }
    }
}
