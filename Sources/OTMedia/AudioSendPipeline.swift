import OTBase
import OTWire

#if canImport(Glibc)
import Glibc
#endif

/// Settings of an `AudioSendPipeline`.
public struct AudioSendConfig: Sendable {
    public var ssrc: UInt32
    public var payloadType: UInt8
    /// The payload format (and so the codec: `AudioCodecs.makeEncoder`) frames are sent in.
    public var format: any RTPPayloadFormat
    /// Encoder settings; the sample rate and channels follow the capture device.
    public var opus: OpusEncoderConfig
    public var extensionIds: RTPHeaderExtensionIds
    public var mid: String?
    /// Send DTX frames (1–2 bytes) too; off skips them as RFC 7587 §3.1.3 allows.
    public var sendDTXFrames: Bool
    public var initialSequenceNumber: UInt16?
    public var initialTimestamp: UInt32?

    public init(ssrc: UInt32, payloadType: UInt8 = 111, format: any RTPPayloadFormat = PayloadFormats.opus,
                opus: OpusEncoderConfig = OpusEncoderConfig(),
                extensionIds: RTPHeaderExtensionIds = RTPHeaderExtensionIds(), mid: String? = nil, sendDTXFrames: Bool = false,
                initialSequenceNumber: UInt16? = nil, initialTimestamp: UInt32? = nil) {
        self.ssrc = ssrc; self.payloadType = payloadType; self.format = format; self.opus = opus; self.extensionIds = extensionIds
        self.mid = mid; self.sendDTXFrames = sendDTXFrames
        self.initialSequenceNumber = initialSequenceNumber; self.initialTimestamp = initialTimestamp
    }
}

/// Counters of an `AudioSendPipeline` (W3C `outbound-rtp` names where one exists).
public struct AudioSendStats: Sendable, Equatable {
    public var ssrc: UInt32 = 0
    /// Samples per channel taken from the device.
    public var samplesCaptured = 0
    public var framesEncoded = 0
    public var packetsSent = 0
    public var bytesSent = 0
    public var headerBytesSent = 0
    /// DTX frames not sent.
    public var dtxFramesSkipped = 0
    public var targetBitrate = 0
    public init() {}
}

/// The publisher's audio path, sans-IO: PCM from the audio device in any chunk size → `PCMChunker` (20 ms) →
/// `AudioEncoder` (Opus) → `FrameTransform` → RTP (48 kHz clock, RFC 7587) → `emit`.
/// Not thread-safe: drive it from one thread (the device's capture callback).
public final class AudioSendPipeline {
    public private(set) var config: AudioSendConfig
    public private(set) var stats = AudioSendStats()
    private var encoder: any AudioEncoder
    private var chunker: PCMChunker
    private let transform: any FrameTransform
    private var extensions: RTPExtensionWriter
    private var sequence: UInt16
    private var timestamp: UInt32
    private var encoded: [UInt8] = []
    private var transformed: [UInt8] = []
    private var scratch: [UInt8] = []
    private var skippedSinceLastSend = true

    public init(config: AudioSendConfig = AudioSendConfig(ssrc: UInt32.random(in: 1...UInt32.max)),
                transform: any FrameTransform = IdentityFrameTransform(), transportSequence: TransportSequenceCounter? = nil) throws {
        self.config = config
        encoder = try AudioCodecs.makeEncoder(config.format, config: config.opus)
        chunker = PCMChunker(chunkSamples: config.opus.samplesPerFrame * config.opus.channels)
        self.transform = transform
        extensions = try RTPExtensionWriter(ids: config.extensionIds, mid: config.mid, transportCounter: transportSequence)
        sequence = config.initialSequenceNumber ?? UInt16.random(in: 0...UInt16.max)
        timestamp = config.initialTimestamp ?? UInt32.random(in: 0...UInt32.max)
        scratch.reserveCapacity(1500)
        stats.ssrc = config.ssrc
        stats.targetBitrate = config.opus.bitrateBps
    }

    /// The sequence number the next packet gets.
    public var nextSequenceNumber: UInt16 { sequence }
    /// The RTP timestamp the next frame gets.
    public var nextTimestamp: UInt32 { timestamp }

    /// Takes captured interleaved PCM (`settings` as the device reports them) and hands each complete
    /// packet to `emit` (serialized RTP, reused after `emit` returns). A change of rate or channels reopens
    /// the encoder (pending samples are dropped); rates Opus does not code throw `invalidParameter`.
    public func send(_ samples: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings, now: Instant,
                     emit: (inout [UInt8]) throws -> Void) throws {
        if settings.sampleRate != config.opus.sampleRate || settings.channels != config.opus.channels {
            var c = config.opus
            c.sampleRate = settings.sampleRate; c.channels = settings.channels
            encoder = try AudioCodecs.makeEncoder(config.format, config: c)
            config.opus = c
            chunker = PCMChunker(chunkSamples: c.samplesPerFrame * c.channels)
        }
        stats.samplesCaptured += samples.count / max(config.opus.channels, 1)
        var failure: (any Error)?
        chunker.append(samples) { chunk in
            guard failure == nil else { return }
            do { try encodeChunk(chunk, now: now, emit) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Takes captured PCM held in an array.
    public func send(_ samples: [Int16], settings: AudioDeviceSettings, now: Instant, emit: (inout [UInt8]) throws -> Void) throws {
        try samples.withUnsafeBufferPointer { try send($0, settings: settings, now: now, emit: emit) }
    }

    private func encodeChunk(_ chunk: UnsafeBufferPointer<Int16>, now: Instant, _ emit: (inout [UInt8]) throws -> Void) throws {
        try encoder.encode(chunk, into: &encoded)
        stats.framesEncoded += 1
        let frameTimestamp = timestamp
        // The RTP clock is 48 kHz whatever rate the encoder runs at (RFC 7587 §4.1).
        timestamp &+= UInt32(OpusPayload.clockRate * config.opus.frameMillis / 1000)
        if !config.sendDTXFrames, OpusPayload.isDTX(encoded[...]) {
            stats.dtxFramesSkipped += 1
            skippedSinceLastSend = true
            return
        }
        let level = config.extensionIds.audioLevel != nil ? Self.audioLevel(chunk, inDTX: encoder.inDTX) : nil
        let payload: ArraySlice<UInt8>
        if transform.isIdentity {
            payload = encoded[...]
        } else {
            let info = EncodedFrameInfo(kind: .audio, ssrc: config.ssrc, rtpTimestamp: frameTimestamp, isKeyframe: false)
            try encoded.withUnsafeBytes { try transform.transformOutgoing($0, info: info, into: &transformed) }
            payload = transformed[...]
        }
        // The marker starts a talkspurt: the first packet, and the first after skipped DTX frames.
        let packet = RTPPacket(marker: skippedSinceLastSend, payloadType: config.payloadType, sequenceNumber: sequence,
                               timestamp: frameTimestamp, ssrc: config.ssrc,
                               extensions: try extensions.block(now: now, audioLevel: level), payload: payload)
        skippedSinceLastSend = false
        scratch.removeAll(keepingCapacity: true)
        packet.write(into: &scratch)
        sequence &+= 1
        stats.packetsSent += 1
        stats.bytesSent += payload.count
        stats.headerBytesSent += packet.headerLength
        try emit(&scratch)
    }

    /// RFC 6464 level: -dBov of the chunk's RMS (0 loudest, 127 silent); voice activity unless DTX.
    static func audioLevel(_ chunk: UnsafeBufferPointer<Int16>, inDTX: Bool) -> (voiceActivity: Bool, levelDBov: UInt8) {
        guard !chunk.isEmpty else { return (false, 127) }
        var sum = 0.0
        for s in chunk { let v = Double(s); sum += v * v }
        let rms = (sum / Double(chunk.count)).squareRoot()
        guard rms >= 1 else { return (false, 127) }
        let dbov = -20 * log10(rms / 32767)
        return (!inDTX, UInt8(min(max(dbov.rounded(), 0), 127)))
    }

    /// Changes the Opus bitrate (bit/s), for example from congestion-control feedback.
    public func setBitrate(_ bps: Int) throws {
        try encoder.setBitrate(bps)
        config.opus.bitrateBps = bps
        stats.targetBitrate = bps
    }

    /// Switches in-band FEC and the loss it is sized for (from receiver reports).
    public func setFEC(_ on: Bool, expectedLossPercent: Int? = nil) throws {
        try encoder.setFEC(on, expectedLossPercent: expectedLossPercent)
        config.opus.fec = on
        if let l = expectedLossPercent { config.opus.expectedLossPercent = l }
    }

    /// Switches DTX.
    public func setDTX(_ on: Bool) throws {
        try encoder.setDTX(on)
        config.opus.dtx = on
    }
}
