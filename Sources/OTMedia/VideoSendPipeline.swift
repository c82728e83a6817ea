import OTBase
import OTWire

/// Settings of a `VideoSendPipeline`.
public struct VideoSendConfig: Sendable {
    public var ssrc: UInt32
    public var payloadType: UInt8
    /// The payload format (and so the codec: `VideoCodecs.makeEncoder`) frames are sent in.
    public var format: any RTPPayloadFormat
    /// Encoder settings; the size follows the frames (the encoder is reopened when it changes).
    public var encoder: VideoEncoderConfig
    /// Path MTU; packets are sized so IPv4 + UDP + RTP + SRTP tag fit.
    public var mtu: Int
    /// Bytes SRTP adds per packet (16 for AEAD_AES_128_GCM, 10 for AES_CM_128_HMAC_SHA1_80).
    public var srtpOverhead: Int
    public var extensionIds: RTPHeaderExtensionIds
    /// The media id sent in the mid extension (when its id is set).
    public var mid: String?
    /// First sequence number and timestamp; random when nil (RFC 3550 §5.1).
    public var initialSequenceNumber: UInt16?
    public var initialTimestamp: UInt32?

    public init(ssrc: UInt32, payloadType: UInt8 = 96, format: any RTPPayloadFormat = PayloadFormats.vp8, encoder: VideoEncoderConfig, mtu: Int = 1200, srtpOverhead: Int = 16,
                extensionIds: RTPHeaderExtensionIds = RTPHeaderExtensionIds(), mid: String? = nil,
                initialSequenceNumber: UInt16? = nil, initialTimestamp: UInt32? = nil) {
        self.ssrc = ssrc; self.payloadType = payloadType; self.format = format; self.encoder = encoder; self.mtu = mtu
        self.srtpOverhead = srtpOverhead; self.extensionIds = extensionIds; self.mid = mid
        self.initialSequenceNumber = initialSequenceNumber; self.initialTimestamp = initialTimestamp
    }
}

/// How a receiver asked for a keyframe.
public enum KeyframeRequestKind: Sendable {
    /// RTCP picture loss indication (RFC 4585 §6.3.1).
    case pli
    /// RTCP full intra request (RFC 5104 §4.3.1).
    case fir
}

/// Counters of a `VideoSendPipeline` (W3C `outbound-rtp` names where one exists).
public struct VideoSendStats: Sendable, Equatable {
    public var ssrc: UInt32 = 0
    /// Frames given to `send`.
    public var framesSubmitted = 0
    public var framesEncoded = 0
    public var keyFramesEncoded = 0
    /// Encoded bytes of all frames (after the transform).
    public var totalEncodedBytes = 0
    /// RTP packets and payload bytes the pipeline sent (first transmissions).
    public var packetsSent = 0
    public var bytesSent = 0
    public var headerBytesSent = 0
    /// Retransmissions, NACKed sequence numbers and those no longer held: the RTP session's
    /// (`RTPSession.retransmissionCounters`), filled in by the session layer.
    public var retransmittedPacketsSent = 0
    public var retransmittedBytesSent = 0
    public var nackCount = 0
    public var nackMisses = 0
    public var pliCount = 0
    public var firCount = 0
    public var frameWidth = 0
    public var frameHeight = 0
    public var targetBitrateKbps = 0
    public var targetFramerate = 0
    public init() {}
}

/// The publisher's video path, sans-IO: I420 frames in, RTP packets out.
///
/// VideoFrame → `VideoEncoder` (the format's codec) → `FrameTransform` → the format's `RTPPacketizer` → RTP (90 kHz timestamps from the capture
/// time, marker on a frame's last packet, RFC 8285 extensions) → `emit`. Retransmissions are not its business: the
/// transport's RTP session keeps the send history (`NACKResponder`). Not thread-safe: drive it from one thread.
public final class VideoSendPipeline {
    public private(set) var config: VideoSendConfig
    public private(set) var stats = VideoSendStats()
    private var encoder: any VideoEncoder
    private let transform: any FrameTransform
    private var extensions: RTPExtensionWriter
    private var packetizer: any RTPPacketizer
    private var sequence: UInt16
    private let timestampBase: UInt32
    private var firstCaptureMicros: Int64?
    private var transformed: [UInt8] = []
    private var scratch: [UInt8] = []

    /// Opens the encoder. `transportSequence` numbers packets transport-wide when the config has an id for it.
    public init(config: VideoSendConfig, transform: any FrameTransform = IdentityFrameTransform(),
                transportSequence: TransportSequenceCounter? = nil) throws {
        self.config = config
        encoder = try VideoCodecs.makeEncoder(config.format, config: config.encoder)
        self.transform = transform
        extensions = try RTPExtensionWriter(ids: config.extensionIds, mid: config.mid, transportCounter: transportSequence)
        let headerLength = 12 + config.extensionIds.maxBlockLength(midLength: config.mid?.utf8.count ?? 0)
        packetizer = config.format.makePacketizer(maxPayloadSize: config.format.maxPayloadSize(mtu: config.mtu, rtpHeaderLength: headerLength,
                                                                                               srtpOverhead: config.srtpOverhead))
        sequence = config.initialSequenceNumber ?? UInt16.random(in: 0...UInt16.max)
        timestampBase = config.initialTimestamp ?? UInt32.random(in: 0...UInt32.max)
        scratch.reserveCapacity(config.mtu)
        stats.ssrc = config.ssrc
        stats.frameWidth = config.encoder.width; stats.frameHeight = config.encoder.height
        stats.targetBitrateKbps = config.encoder.bitrateKbps; stats.targetFramerate = config.encoder.framerate
    }

    /// The sequence number the next packet gets.
    public var nextSequenceNumber: UInt16 { sequence }

    /// The RTP timestamp for a capture time (90 kHz, counted from the first frame's capture time).
    public func rtpTimestamp(captureMicros: Int64) -> UInt32 {
        let elapsed = captureMicros - (firstCaptureMicros ?? captureMicros)
        return timestampBase &+ UInt32(truncatingIfNeeded: elapsed * 9 / 100)
    }

    /// Encodes one frame and hands each RTP packet to `emit` (serialized, ready for SRTP; the buffer is reused
    /// after `emit` returns, which may protect it in place). Sends nothing when rate control drops the frame.
    /// A frame of a new size reopens the encoder (the next frame is a keyframe).
    public func send(_ frame: VideoFrame, now: Instant, emit: (inout [UInt8]) throws -> Void) throws {
        if frame.width != config.encoder.width || frame.height != config.encoder.height {
            var c = config.encoder
            c.width = frame.width; c.height = frame.height
            encoder = try VideoCodecs.makeEncoder(config.format, config: c)
            config.encoder = c
            stats.frameWidth = c.width; stats.frameHeight = c.height
        }
        stats.framesSubmitted += 1
        if firstCaptureMicros == nil { firstCaptureMicros = frame.timestampMicros }
        let timestamp = rtpTimestamp(captureMicros: frame.timestampMicros)
        try encoder.encode(frame, forceKeyframe: false) { encoded in
            stats.framesEncoded += 1
            if encoded.isKeyframe { stats.keyFramesEncoded += 1 }
            if transform.isIdentity {
                stats.totalEncodedBytes += encoded.data.count
                try packetize(encoded.data, encoded, timestamp: timestamp, now: now, emit)
            } else {
                let info = EncodedFrameInfo(kind: .video, ssrc: config.ssrc, rtpTimestamp: timestamp, isKeyframe: encoded.isKeyframe,
                                            format: config.format)
                try transform.transformOutgoing(encoded.data, info: info, into: &transformed)
                stats.totalEncodedBytes += transformed.count
                let data = transformed
                try data.withUnsafeBytes { try packetize($0, encoded, timestamp: timestamp, now: now, emit) }
            }
        }
    }

    private func packetize(_ data: UnsafeRawBufferPointer, _ encoded: EncodedVideoFrame, timestamp: UInt32, now: Instant,
                           _ emit: (inout [UInt8]) throws -> Void) throws {
        try packetizer.packetize(data, nonReference: encoded.nonReference, layer: encoded.layer) { payload, last in
            let packet = RTPPacket(marker: last, payloadType: config.payloadType, sequenceNumber: sequence, timestamp: timestamp,
                                   ssrc: config.ssrc, extensions: try extensions.block(now: now), payload: payload)
            scratch.removeAll(keepingCapacity: true)
            packet.write(into: &scratch)
            sequence &+= 1
            stats.packetsSent += 1
            stats.bytesSent += payload.count
            stats.headerBytesSent += packet.headerLength
            try emit(&scratch)
        }
    }

    /// Switches to `format` (the one the connection agreed): a new encoder and packetizer of the same sizes, so the
    /// next frame is a keyframe. Nothing changes when it is the current format; throws for a format without an encoder.
    public func setFormat(_ format: any RTPPayloadFormat) throws {
        guard format.name != config.format.name else { return }
        encoder = try VideoCodecs.makeEncoder(format, config: config.encoder)
        packetizer = format.makePacketizer(maxPayloadSize: packetizer.maxPayloadSize)
        config.format = format
    }

    /// Makes the next frame a keyframe, as a receiver asked with a PLI or FIR.
    public func requestKeyframe(_ kind: KeyframeRequestKind = .pli) {
        switch kind {
        case .pli: stats.pliCount += 1
        case .fir: stats.firCount += 1
        }
        encoder.requestKeyframe()
    }

    /// Changes the encoder's target bitrate (kbit/s), for example from congestion-control feedback.
    public func setTargetBitrate(kbps: Int) throws {
        try encoder.setRates(bitrateKbps: kbps, framerate: nil)
        config.encoder.bitrateKbps = kbps
        stats.targetBitrateKbps = kbps
    }

    /// Changes the frame rate the encoder budgets for.
    public func setFramerate(_ fps: Int) throws {
        try encoder.setRates(bitrateKbps: nil, framerate: fps)
        config.encoder.framerate = fps
        stats.targetFramerate = fps
    }
}
