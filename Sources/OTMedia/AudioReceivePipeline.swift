import OTBase
import OTRTP
import OTWire

/// Settings of an `AudioReceivePipeline`.
public struct AudioReceiveConfig: Sendable {
    /// The payload type; packets with another are discarded. nil accepts any.
    public var payloadType: UInt8?
    /// The payload format (and so the codec: `AudioCodecs.makeDecoder`). The jitter buffer reads packet durations
    /// from the Opus TOC: Opus is the only audio format today.
    public var format: any RTPPayloadFormat = PayloadFormats.opus
    /// Decoder output: 48 kHz (or 8/12/16/24 kHz), mono or stereo, as the playout device wants.
    public var sampleRate: Int
    public var channels: Int
    public var jitter: AudioJitterConfig
    /// The sender codes in-band FEC (SDP `useinbandfec=1`): a lost frame is decoded from the next packet's
    /// FEC data when that packet is here and SILK or hybrid coded.
    public var useFEC: Bool

    public init(payloadType: UInt8? = 111, sampleRate: Int = 48_000, channels: Int = 1,
                jitter: AudioJitterConfig = AudioJitterConfig(), useFEC: Bool = false) {
        self.payloadType = payloadType; self.sampleRate = sampleRate; self.channels = channels
        self.jitter = jitter; self.useFEC = useFEC
    }
}

/// How the audio of one `pull` was made.
public enum AudioPlayoutKind: Sendable, Equatable {
    /// Decoded from its packet.
    case decoded
    /// Decoded from the next packet's in-band FEC (libopus conceals instead when that packet carries none).
    case fec
    /// Made up by the decoder's packet-loss concealment.
    case concealed(AudioConcealReason)
    /// Silence: playout has not started yet.
    case silence
}

/// Counters of an `AudioReceivePipeline` (W3C `inbound-rtp` names where one exists).
public struct AudioReceiveStats: Sendable, Equatable {
    public var ssrc: UInt32 = 0
    public var packetsReceived = 0
    public var bytesReceived = 0
    public var headerBytesReceived = 0
    public var packetsLost = 0
    /// Packets discarded: wrong payload type, malformed, duplicates, late or dropped by the jitter buffer.
    public var packetsDiscarded = 0
    /// Interarrival jitter in seconds.
    public var jitter = 0.0
    /// Samples per channel played out since playout began (decoded and concealed).
    public var totalSamplesReceived = 0
    /// Samples per channel made up by packet-loss concealment (W3C: synthesized locally; audio decoded from the next
    /// packet's FEC is not concealed, `fecSamples` counts it).
    public var concealedSamples = 0
    public var fecSamples = 0
    /// Runs of concealment (a run starts when concealment follows decoded audio).
    public var concealmentEvents = 0
    /// Frames made up by packet-loss concealment for missing audio, and lost frames decoded through the next packet's FEC
    /// (libopus 1.3 cannot tell whether a packet carries FEC data; without it, it conceals).
    public var plcFrames = 0
    public var fecFrames = 0
    public var decodeErrors = 0
    public var transformErrors = 0
    /// Frames the jitter buffer concealed to add delay, and packets it dropped to remove delay.
    public var insertedFramesForDeceleration = 0
    public var removedFramesForAcceleration = 0
    /// The jitter buffer's current target delay in seconds.
    public var jitterBufferTargetDelay = 0.0
    public init() {}
}

/// The subscriber's audio path, sans-IO: RTP packets in (`receive`), one frame of PCM out per playout
/// tick (`pull`, every 20 ms). RTP → `FrameTransform` → `AudioJitterBuffer` → `AudioDecoder` (Opus), with FEC
/// recovery or PLC for lost packets. The PCM goes to the mixer (through a `PCMFIFO`) and to a per-subscriber
/// audio callback. The transform runs before the jitter buffer so it reads the Opus TOC of the original
/// packet. Not thread-safe: drive it from one thread.
public final class AudioReceivePipeline {
    public let config: AudioReceiveConfig
    private let transform: any FrameTransform
    private let decoder: any AudioDecoder
    private var jitterBuffer: AudioJitterBuffer<[UInt8]>
    private var rtpStats = RTPReceiveStatistics(clockRate: OpusPayload.clockRate)
    private var counters = AudioReceiveStats()
    private var ssrc: UInt32?
    private var transformed: [UInt8] = []
    /// Recent payloads by RTP timestamp, to find the packet after a lost one for FEC.
    private var recent: [(timestamp: UInt32, payload: [UInt8])] = []
    private var recentIndex = 0
    private var playing = false
    private var concealing = false
    private var nextTimestamp: UInt32 = 0

    public init(config: AudioReceiveConfig = AudioReceiveConfig(), transform: any FrameTransform = IdentityFrameTransform()) throws {
        var config = config
        config.jitter.clockRate = OpusPayload.clockRate
        self.config = config
        self.transform = transform
        decoder = try AudioCodecs.makeDecoder(config.format, sampleRate: config.sampleRate, channels: config.channels)
        jitterBuffer = AudioJitterBuffer(config: config.jitter)
    }

    /// Handles one received RTP packet at `now`. Returns what the jitter buffer did with it, or nil when the
    /// packet was discarded before it (wrong payload type, malformed, transform failure).
    @discardableResult
    public func receive(_ packet: RTPPacket, now: Instant) -> AudioJitterInsertResult? {
        if let pt = config.payloadType, packet.payloadType != pt {
            counters.packetsDiscarded += 1
            return nil
        }
        if let s = ssrc, s != packet.ssrc {
            restart()
            rtpStats.rebase()
        }
        ssrc = packet.ssrc
        rtpStats.record(packet, now: now)
        var payload: [UInt8]
        if transform.isIdentity {
            payload = Array(packet.payload)
        } else {
            let info = EncodedFrameInfo(kind: .audio, ssrc: packet.ssrc, rtpTimestamp: packet.timestamp, isKeyframe: false)
            do {
                try packet.payload.withUnsafeBytes { try transform.transformIncoming($0, info: info, into: &transformed) }
            } catch {
                counters.transformErrors += 1
                counters.packetsDiscarded += 1
                return nil
            }
            payload = transformed
        }
        guard let info = try? OpusPayload.packetInfo(payload[...]) else {
            counters.packetsDiscarded += 1
            return nil
        }
        let result = jitterBuffer.insert(AudioJitterPacket(sequence: packet.sequenceNumber, timestamp: packet.timestamp,
                                                           duration: info.samples, payload: payload), now: now)
        if result == .accepted {
            if recent.count < 8 { recent.append((packet.timestamp, payload)) } else {
                recent[recentIndex] = (packet.timestamp, payload)
                recentIndex = (recentIndex + 1) % recent.count
            }
        }
        return result
    }

    /// Produces the next frame of interleaved PCM (`pcm` is replaced, its capacity reused); call once per
    /// playout tick. Returns how the audio was made.
    @discardableResult
    public func pull(now: Instant, into pcm: inout [Int16]) -> AudioPlayoutKind {
        switch jitterBuffer.pull(now: now) {
        case .packet(let p):
            nextTimestamp = p.timestamp &+ UInt32(truncatingIfNeeded: p.duration)
            playing = true
            do {
                let n = try decoder.decode(p.payload[...], into: &pcm)
                concealing = false
                counters.totalSamplesReceived += n
                return .decoded
            } catch {
                counters.decodeErrors += 1
                return conceal(samples(p.duration), reason: .lost, into: &pcm)
            }
        case .conceal(let duration, let reason):
            let lostTimestamp = nextTimestamp
            nextTimestamp &+= UInt32(truncatingIfNeeded: duration)
            guard playing else {
                pcm.removeAll(keepingCapacity: true)
                pcm.append(contentsOf: repeatElement(0, count: samples(duration) * config.channels))
                return .silence
            }
            if reason == .lost, config.useFEC,
               let next = recent.first(where: { $0.timestamp == lostTimestamp &+ UInt32(truncatingIfNeeded: duration) }),
               let info = try? OpusPayload.packetInfo(next.payload[...]), info.mode != .celt,
               let n = try? decoder.recoverWithFEC(from: next.payload[...], samples: samples(duration), into: &pcm) {
                counters.fecFrames += 1
                counters.fecSamples += n
                counters.totalSamplesReceived += n
                concealing = false
                return .fec
            }
            return conceal(samples(duration), reason: reason, into: &pcm)
        }
    }

    /// Extra playout delay kept while packets are being lost, so NACK retransmissions arrive in time
    /// (`AudioJitterBuffer.repairAllowance`); set it from the path's round-trip time (`repairAllowance(rtt:legs:)`).
    public var repairAllowance: Duration {
        get { jitterBuffer.repairAllowance }
        set { jitterBuffer.repairAllowance = newValue }
    }

    /// The repair allowance for a path of round-trip time `rtt` whose repairs go through `legs` NACK loops in a row (two
    /// through a media router: a packet lost on the publisher's leg is repaired there before the router can answer the
    /// subscriber's NACK): a packet interval (the gap shows at the next packet), then per leg a NACK's round trip and
    /// one retry (`NACKGenerator.retryInterval(rtt:floor:)`).
    public static func repairAllowance(rtt: Duration, legs: Int) -> Duration {
        let retry = NACKGenerator.retryInterval(rtt: rtt)
        return .milliseconds(20) + (retry + retry) * max(1, legs)
    }

    /// Forgets held packets and the playout position (a new SSRC, audio disabled and re-enabled); counters are kept.
    public func restart() {
        jitterBuffer.restart()
        recent.removeAll(keepingCapacity: true)
        recentIndex = 0
        playing = false
        concealing = false
    }

    /// The receive counters now.
    public var stats: AudioReceiveStats {
        var s = counters
        s.ssrc = ssrc ?? 0
        s.packetsReceived = rtpStats.packetsReceived
        s.bytesReceived = rtpStats.bytesReceived
        s.headerBytesReceived = rtpStats.headerBytesReceived
        s.packetsLost = rtpStats.packetsLost
        s.jitter = rtpStats.jitterSeconds
        let j = jitterBuffer.stats
        s.packetsDiscarded += j.duplicates + j.late + j.overflowDropped + j.accelerated
        s.insertedFramesForDeceleration = j.stretched
        s.removedFramesForAcceleration = j.accelerated
        s.jitterBufferTargetDelay = Double(j.targetDelayMillis) / 1000
        return s
    }

    /// RTP clock ticks (48 kHz) to samples per channel at the decoder's rate.
    private func samples(_ ticks: Int) -> Int { max(1, ticks * config.sampleRate / OpusPayload.clockRate) }

    private func conceal(_ count: Int, reason: AudioConcealReason, into pcm: inout [Int16]) -> AudioPlayoutKind {
        let n: Int
        do {
            n = try decoder.concealLoss(samples: count, into: &pcm)
        } catch {
            pcm.removeAll(keepingCapacity: true)
            pcm.append(contentsOf: repeatElement(0, count: count * config.channels))
            n = count
        }
        if reason == .stretch {
            // Delay added on purpose (nothing was lost): W3C insertedSamplesForDeceleration, not concealment.
            counters.totalSamplesReceived += n
            return .concealed(reason)
        }
        counters.plcFrames += 1
        noteConcealment(n)
        return .concealed(reason)
    }

    private func noteConcealment(_ n: Int) {
        if !concealing { counters.concealmentEvents += 1 }
        concealing = true
        counters.concealedSamples += n
        counters.totalSamplesReceived += n
    }
}
