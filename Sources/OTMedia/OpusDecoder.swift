import COTShims
import COpus
import OTBase
import OTWire

/// An Opus decoder on libopus with packet-loss concealment and FEC recovery.
/// Named `OpusAudioDecoder` so it does not clash with libopus' `OpusDecoder`.
public final class OpusAudioDecoder: AudioDecoder {
    public var format: any RTPPayloadFormat { PayloadFormats.opus }
    public let sampleRate: Int
    public let channels: Int
    private let dec: OpaquePointer
    /// Longest packet duration (120 ms) in samples per channel.
    private var maxFrame: Int { sampleRate * 120 / 1000 }

    /// Opens a decoder; throws `CodecError` when libopus refuses the settings.
    public init(sampleRate: Int = 48_000, channels: Int = 1) throws {
        guard [8000, 12000, 16000, 24000, 48000].contains(sampleRate), (1...2).contains(channels) else {
            throw OTError(.invalidParameter, "invalid Opus decoder configuration")
        }
        var err: Int32 = 0
        guard let d = opus_decoder_create(Int32(sampleRate), Int32(channels), &err), err == OPUS_OK else {
            throw CodecError(.opus, code: err, String(cString: opus_strerror(err)))
        }
        dec = d
        self.sampleRate = sampleRate; self.channels = channels
    }

    deinit { opus_decoder_destroy(dec) }

    private func run(_ data: UnsafeRawBufferPointer?, frameSize: Int, fec: Bool, into pcm: inout [Int16]) throws -> Int {
        pcm.removeAll(keepingCapacity: true)
        pcm.append(contentsOf: repeatElement(0, count: frameSize * channels))
        let n = pcm.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let dst = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
            return opus_decode(dec, data?.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(data?.count ?? 0),
                               dst, Int32(frameSize), fec ? 1 : 0)
        }
        guard n >= 0 else {
            pcm.removeAll(keepingCapacity: true)
            throw CodecError(.opus, code: n, String(cString: opus_strerror(n)))
        }
        pcm.removeLast(pcm.count - Int(n) * channels)
        return Int(n)
    }

    /// Decodes one packet into interleaved PCM (`pcm` is cleared; its capacity reused). Returns samples per channel.
    /// Throws `CodecError` for a packet libopus rejects.
    @discardableResult
    public func decode(_ payload: ArraySlice<UInt8>, into pcm: inout [Int16]) throws -> Int {
        guard !payload.isEmpty else { throw CodecError(.opus, code: OPUS_INVALID_PACKET, "empty Opus packet") }
        // Size the output from the TOC (48 kHz samples) instead of the 120 ms maximum.
        let frameSize = (try? OpusPayload.packetInfo(payload)).map { $0.samples * sampleRate / 48_000 } ?? maxFrame
        return try payload.withUnsafeBytes { try run($0, frameSize: frameSize, fec: false, into: &pcm) }
    }

    /// Conceals `samples` per channel of lost audio (packet-loss concealment).
    @discardableResult
    public func concealLoss(samples: Int, into pcm: inout [Int16]) throws -> Int {
        try run(nil, frameSize: min(max(samples, 1), maxFrame), fec: false, into: &pcm)
    }

    /// Rebuilds the lost frame before `nextPayload` from its in-band FEC data (falls back to concealment
    /// inside libopus when the packet carries none). `samples` is the lost frame's duration per channel.
    @discardableResult
    public func recoverWithFEC(from nextPayload: ArraySlice<UInt8>, samples: Int, into pcm: inout [Int16]) throws -> Int {
        guard !nextPayload.isEmpty else { return try concealLoss(samples: samples, into: &pcm) }
        return try nextPayload.withUnsafeBytes { try run($0, frameSize: min(max(samples, 1), maxFrame), fec: true, into: &pcm) }
    }
}
