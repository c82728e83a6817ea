import COTShims
import COpus
import OTBase
import OTWire

/// Opus encoder settings; defaults follow libwebrtc (VoIP, complexity 9, 32 kbit/s, 20 ms, FEC and DTX off).
public struct OpusEncoderConfig: Sendable {
    /// 48000 (the RTP clock of RFC 7587); libopus also accepts 8/12/16/24 kHz.
    public var sampleRate: Int
    /// 1 (mono) or 2 (stereo).
    public var channels: Int
    public var bitrateBps: Int
    /// 0...10.
    public var complexity: Int
    /// Frame length in milliseconds (10, 20, 40 or 60).
    public var frameMillis: Int
    /// In-band forward error correction (LBRR) for the previous frame.
    public var fec: Bool
    /// Discontinuous transmission: near-silent frames shrink to 1–2 bytes.
    public var dtx: Bool
    /// Expected loss (percent) that tunes the FEC amount.
    public var expectedLossPercent: Int

    public init(sampleRate: Int = 48_000, channels: Int = 1, bitrateBps: Int = 32_000, complexity: Int = 9,
                frameMillis: Int = 20, fec: Bool = false, dtx: Bool = false, expectedLossPercent: Int = 0) {
        self.sampleRate = sampleRate; self.channels = channels; self.bitrateBps = bitrateBps
        self.complexity = complexity; self.frameMillis = frameMillis; self.fec = fec; self.dtx = dtx
        self.expectedLossPercent = expectedLossPercent
    }

    /// Samples per channel in one frame.
    public var samplesPerFrame: Int { sampleRate * frameMillis / 1000 }
}

/// An Opus encoder on libopus in VoIP mode. Named `OpusAudioEncoder` so it does not clash with libopus' `OpusEncoder`.
public final class OpusAudioEncoder: AudioEncoder {
    public var format: any RTPPayloadFormat { PayloadFormats.opus }
    /// The largest packet this encoder writes.
    public static let maxPacketSize = 1500
    public private(set) var config: OpusEncoderConfig
    private let enc: OpaquePointer

    /// Opens an encoder; throws `CodecError` when libopus refuses the settings.
    public init(config: OpusEncoderConfig) throws {
        guard [8000, 12000, 16000, 24000, 48000].contains(config.sampleRate), (1...2).contains(config.channels),
              [10, 20, 40, 60].contains(config.frameMillis) else {
            throw OTError(.invalidParameter, "invalid Opus encoder configuration")
        }
        var err: Int32 = 0
        guard let e = opus_encoder_create(Int32(config.sampleRate), Int32(config.channels), OPUS_APPLICATION_VOIP, &err),
              err == OPUS_OK else {
            throw CodecError(.opus, code: err, String(cString: opus_strerror(err)))
        }
        enc = e
        self.config = config
        do {
            try set(OPUS_SET_BITRATE_REQUEST, config.bitrateBps)
            try set(OPUS_SET_COMPLEXITY_REQUEST, config.complexity)
            try set(OPUS_SET_INBAND_FEC_REQUEST, config.fec ? 1 : 0)
            try set(OPUS_SET_PACKET_LOSS_PERC_REQUEST, config.expectedLossPercent)
            try set(OPUS_SET_DTX_REQUEST, config.dtx ? 1 : 0)
            try set(OPUS_SET_SIGNAL_REQUEST, Int(OPUS_SIGNAL_VOICE))
        } catch {
            opus_encoder_destroy(e)
            throw error
        }
    }

    deinit { opus_encoder_destroy(enc) }

    private func set(_ request: Int32, _ value: Int) throws {
        let r = otshim_opus_encoder_set(enc, request, Int32(value))
        guard r == OPUS_OK else { throw CodecError(.opus, code: r, "ctl \(request): " + String(cString: opus_strerror(r))) }
    }

    /// Changes the bitrate at runtime.
    public func setBitrate(_ bps: Int) throws { try set(OPUS_SET_BITRATE_REQUEST, bps); config.bitrateBps = bps }
    /// Changes the complexity (0...10) at runtime.
    public func setComplexity(_ c: Int) throws { try set(OPUS_SET_COMPLEXITY_REQUEST, c); config.complexity = c }
    /// Switches in-band FEC and the expected loss that sizes it.
    public func setFEC(_ on: Bool, expectedLossPercent: Int?) throws {
        try set(OPUS_SET_INBAND_FEC_REQUEST, on ? 1 : 0); config.fec = on
        if let l = expectedLossPercent { try set(OPUS_SET_PACKET_LOSS_PERC_REQUEST, l); config.expectedLossPercent = l }
    }
    /// Switches DTX.
    public func setDTX(_ on: Bool) throws { try set(OPUS_SET_DTX_REQUEST, on ? 1 : 0); config.dtx = on }

    /// Whether the last frame was coded as DTX silence.
    public var inDTX: Bool {
        var v: Int32 = 0
        return otshim_opus_encoder_get(enc, OPUS_GET_IN_DTX_REQUEST, &v) == OPUS_OK && v != 0
    }

    /// Encodes one frame of interleaved PCM (`samplesPerFrame × channels` samples) into `packet`
    /// (cleared first; its capacity is reused). Returns the packet length.
    @discardableResult
    public func encode(_ pcm: UnsafeBufferPointer<Int16>, into packet: inout [UInt8]) throws -> Int {
        let frameSize = config.samplesPerFrame
        guard pcm.count == frameSize * config.channels, let src = pcm.baseAddress else {
            throw OTError(.invalidParameter, "Opus frame needs \(frameSize * config.channels) samples, got \(pcm.count)")
        }
        packet.removeAll(keepingCapacity: true)
        packet.append(contentsOf: repeatElement(0, count: Self.maxPacketSize))
        let n = packet.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let dst = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
            return opus_encode(enc, src, Int32(frameSize), dst, Int32(out.count))
        }
        guard n > 0 else {
            packet.removeAll(keepingCapacity: true)
            throw CodecError(.opus, code: n, String(cString: opus_strerror(n)))
        }
        packet.removeLast(packet.count - Int(n))
        return Int(n)
    }

    /// Encodes one frame of interleaved PCM held in an array.
    @discardableResult
    public func encode(_ pcm: ArraySlice<Int16>, into packet: inout [UInt8]) throws -> Int {
        try pcm.withUnsafeBufferPointer { try encode($0, into: &packet) }
    }
}
