import Dispatch
import FoundationEssentials
import OTBase
import OTRTP
import OTMedia
import OTTransport
import OTWire

/// What happened to a subscriber's peer connection (for `SubscriberControl`, on the session's executor).
enum SubscriberLinkEvent: Sendable {
    case connected(peerId: String)
    /// ICE failed, consent lost, DTLS closed, an answer that cannot be used, or the connection could not be made.
    case failed(peerId: String, OTError)
}

/// The subscriber's media work, confined to its serial `queue`: one receive-only peer connection (we offer),
/// RTP demultiplexed by payload type into the video and audio receive pipelines, a 10 ms tick for the video
/// jitter buffer's timers and 20 ms audio playout, the video enable/disable state and its events.
/// Which peer connection to open or close is the session executor's decision (`SubscriberControl`): the engine opens
/// and closes it, and reports what became of it (`onLink`).
final class SubscriberEngine: @unchecked Sendable {
    private weak var subscriber: Subscriber?
    private weak var session: Session?
    private let streamId: String
    private let settings: SubscriberSettings
    let queue: DispatchQueue
    /// The current peer connection's id.
    private(set) var peerId: String?
    /// What became of the current peer connection (called on `queue`).
    var onLink: (@Sendable (SubscriberLinkEvent) -> Void)?

    private var link: MediaLink?
    private var video: VideoReceivePipeline?
    private var audio: AudioReceivePipeline?
    private let playoutSettings: AudioDeviceSettings
    private var fifo: PCMFIFO?
    private let mixerId: Int
    private var running = false
    /// The current peer connection is up (audio is pulled for playout).
    private var connected = false
    private var videoSSRC: UInt32?
    /// The payload type of the video packets arriving (the codec the pipeline decodes).
    private var videoPayloadType: UInt8?

    private var wantsAudio = true
    private var wantsVideo = true
    private var publisherVideo: Bool
    private var qualityOff = false
    private var videoOn: Bool

    private var timer: (any DispatchSourceTimer)?
    private var nextAudioPull: Instant?
    private var pcm: [Int16] = []
    private var ticks = 0
    private var frameMeter = RateMeter()
    /// Since when the video decoder waits for a keyframe (nil while it decodes).
    private var keyframeWaitSince: Instant?
    private var rtt: Duration?

    // Audio fallback. Routed sessions: the media router judges the downlink and tells us (`mediaQuality`).
    // Relayed sessions: we judge the loss of each whole second ourselves, when the stream and settings allow it.
    private let routed: Bool
    private let localFallback: Bool
    /// The end-to-end encryption transform (encrypted sessions), its counters at the last check, and whether a
    /// mismatch was reported since frames last decrypted.
    private var e2ee: E2EEFrameTransform?
    private var lastDecryption = E2EEFrameTransform.Counters()
    private var mismatchReported = false
    private var lastCounts = (received: 0, lost: 0, wireReceived: 0, wireLost: 0)
    private var quality: QualityFallbackMonitor
    private var qualityWindow = LinkQualityWindow(intervals: LinkQualityWindow.defaultIntervals)

    private static let nextMixerId = Lock()
    nonisolated(unsafe) private static var mixerCounter = 0

    init(subscriber: Subscriber, session: Session, stream: StreamInfo, settings: SubscriberSettings, queue: DispatchQueue) {
        self.subscriber = subscriber
        self.session = session
        streamId = stream.id
        self.settings = settings
        self.queue = queue
        publisherVideo = stream.hasVideo
        videoOn = false
        routed = !session.isRelayed
        localFallback = !routed && settings.audioFallbackEnabled && stream.audioFallbackEnabled
        quality = QualityFallbackMonitor(config: Self.localFallbackConfig(settings))
        let rs = session.audioDevice.renderSettings
        let opusRates = [8_000, 12_000, 16_000, 24_000, 48_000]
        playoutSettings = AudioDeviceSettings(sampleRate: opusRates.contains(rs.sampleRate) ? rs.sampleRate : 48_000, channels: rs.channels)
        mixerId = Self.nextMixerId.withLock { Self.mixerCounter += 1; return Self.mixerCounter }
    }

    /// The relayed subscriber's fallback, judged once a second on a `LinkQualityWindow` like the media router's: warn
    /// after two poor windows (the default), drop video after `qualityWindowSeconds` of them, restore it after as many
    /// good ones (the 100 ms slack absorbs the once-a-second timer's drift).
    static func localFallbackConfig(_ settings: SubscriberSettings) -> QualityFallbackConfig {
        let window = Duration.seconds(max(1, settings.qualityWindowSeconds)) - .milliseconds(100)
        return QualityFallbackConfig(lossThreshold: settings.qualityLossThreshold, rttThreshold: nil, jitterThreshold: nil,
                                     disableAfter: window, recoverAfter: window)
    }

    // MARK: lifecycle (on queue)

    /// Starts the receive pipelines, the playout and the media tick; `transform` is the frame transform the session
    /// chose (end-to-end encryption, or the configured one). The peer connection comes with `openLink`.
    func start(audio a: Bool, video v: Bool, transform: any FrameTransform) throws {
        guard let session else { throw OTError(.notConnected) }
        e2ee = transform as? E2EEFrameTransform
        wantsAudio = a
        wantsVideo = v
        videoOn = publisherVideo && wantsVideo
        // The connection's RTP session NACKs gaps and says when it gives a packet up (`.packetsUnrecoverable`): the
        // depacketizer's own count of packets past a hole is only a backstop, so it is long.
        video = try VideoReceivePipeline(config: VideoReceiveConfig(payloadType: nil, reorderWindowPackets: 256),
                                         transform: transform)
        audio = try AudioReceivePipeline(config: AudioReceiveConfig(payloadType: nil, sampleRate: playoutSettings.sampleRate,
                                                                    channels: playoutSettings.channels, useFEC: true),
                                         transform: transform)
        running = true
        if settings.playAudio {
            // At most 100 ms waits for the device (a late device start or a stalled decoder is caught up to 40 ms).
            let f = PCMFIFO(capacity: playoutSettings.samples(millis: 200),
                            backlog: (playoutSettings.samples(millis: 100), playoutSettings.samples(millis: 40)))
            fifo = f
            session.media.addPlayout(f, id: mixerId)
        }
        let t = DispatchSource.makeTimerSource(queue: queue)
        t.schedule(deadline: .now() + .milliseconds(10), repeating: .milliseconds(10), leeway: .milliseconds(2))
        t.setEventHandler { [weak self] in self?.tick() }
        t.resume()
        timer = t
    }

    /// A new peer connection `pid` for the stream: offer it and tell our audio/video wishes; a later one (a media
    /// reconnection) restarts the receive pipelines (their counters are kept; video restarts at a keyframe).
    /// The server's refusal of the offer goes to the subscriber on the executor.
    func openLink(_ pid: String, restart: Bool) throws {
        guard running, let session else { return }
        if let old = link { old.close() }
        connected = false
        videoPayloadType = nil
        if restart {
            video?.restart()
            audio?.restart()
        }
        // Every video codec we decode, VP8 first; the publisher (or the router, the publisher's codec) picks.
        var config = PeerConnectionConfig(audio: true, video: true)
        config.videoFormats = PayloadFormats.video
        let l = try MediaLink(config: config, settings: session.settings,
                              servers: session.mediaServers(), queue: queue) { [weak self] events in
            // Late events of a connection already replaced are dropped.
            guard let self, peerId == pid else { return }
            for e in events { linkEvent(e) }
        }
        link = l
        peerId = pid
        let offer = try l.createOffer()
        try session.sendMediaOffer(peerId: pid, streamId: streamId, direction: .subscribe, sdp: offer) { [weak subscriber] err in
            guard let err else { return }
            subscriber?.offerRefused(pid, err)
        }
        if !wantsAudio || !(wantsVideo && !qualityOff) { sendSettings() }
    }

    /// `openLink`, reporting a failure to make the connection as the link's failure.
    func reopenLink(_ pid: String) {
        do { try openLink(pid, restart: true) } catch {
            onLink?(.failed(peerId: pid, OTError(.subscriberWebRTC, "could not reconnect the media connection: \(error)")))
        }
    }

    /// Closes peer connection `pid` (telling the other side), if it is the current one.
    func closeLink(_ pid: String) {
        guard peerId == pid, let l = link else { return }
        session?.sendMedia(.mediaClose(peerId: pid))
        l.close()
        link = nil
        connected = false
    }

    /// Asks the publisher for a keyframe (media resumed).
    func requestKeyframe() {
        if let ssrc = videoSSRC { link?.requestKeyframe(ssrc: ssrc) }
    }

    /// Ends the subscription's media: the tick stops, the playout leaves the mixer, the peer connection closes (telling
    /// the other side, so the publisher or the media router stops sending) and the receive pipelines (jitter buffers,
    /// decoders) are released. Returns the counters as they were just before.
    func stop() -> SubscriberStats {
        let final = currentStats()
        guard running || link != nil else { return final }
        running = false
        connected = false
        timer?.cancel()
        timer = nil
        if let session {
            if let pid = peerId, link != nil { session.sendMedia(.mediaClose(peerId: pid)) }
            if fifo != nil { session.media.removePlayout(id: mixerId) }
        }
        fifo = nil
        link?.close()
        link = nil
        video = nil
        audio = nil
        return final
    }

    // MARK: signaling (executor → queue)

    /// An answer, candidate or quality decision for the current peer connection.
    func mediaSignal(_ message: ServerMessage) {
        queue.async { [self] in
            guard running, let link, let pid = peerId, message.mediaPeerId == pid else { return }
            switch message {
            case .mediaAnswer(_, let sdp):
                do {
                    try link.setRemoteAnswer(sdp)
                    if let f = link.agreedFormat("video") { try video?.setFormat(f) }
                } catch {
                    onLink?(.failed(peerId: pid, OTError(.subscriberWebRTC, "bad answer: \(error)")))
                }
            case .mediaCandidate(_, let c, _, _):
                link.addRemoteCandidate(c)
            case .mediaQuality(_, let event) where routed:
                switch event {
                case .videoDisableWarning: subscriber?.deliver { $0.subscriberVideoDisableWarning($1) }
                case .videoDisableWarningLifted: subscriber?.deliver { $0.subscriberVideoDisableWarningLifted($1) }
                case .videoDisabled: qualityOff = true; updateVideo(reason: .qualityChanged)
                case .videoEnabled: qualityOff = false; updateVideo(reason: .qualityChanged)
                }
            default:
                break
            }
        }
    }

    private func linkEvent(_ e: PeerConnectionEvent) {
        guard running, let pid = peerId else { return }
        switch e {
        case .localCandidate(let c):
            if let link { session?.sendMedia(link.candidateMessage(peerId: pid, c.description)) }
        case .localCandidatesComplete:
            if let link { session?.sendMedia(link.candidateMessage(peerId: pid, "")) }
        case .connected:
            guard !connected else { return }
            connected = true
            updateRepairAllowance()
            onLink?(.connected(peerId: pid))
        case .failed(let err):
            connected = false
            onLink?(.failed(peerId: pid, OTError(.subscriberWebRTC, "media connection failed: \(err.message)")))
        case .rtp(let received):
            receive(received)
        case .roundTripTime(let d):
            rtt = d
            video?.setRoundTripTime(d)
        case .packetsUnrecoverable(let ssrc, let sequences):
            guard videoOn, let video, ssrc == videoSSRC else { return }
            let now = MonotonicClock.now()
            handle(video.packetsUnrecoverable(sequences, now: now), now: now)
        case .keyframeRequested, .nackRequested, .receiverReport, .transportFeedback, .bandwidthEstimate, .bye, .iceStateChanged:
            break
        }
    }

    /// A packet the transport parsed and assigned to a negotiated section by its payload type.
    private func receive(_ received: ReceivedRTP) {
        if let inj = settings.lossInjector, inj.shouldDrop() { return }
        let now = MonotonicClock.now()
        switch received.section?.kind {
        case .video:
            guard videoOn, let video else { return }
            videoSSRC = received.packet.ssrc
            if let section = received.section, section.payloadType != videoPayloadType {
                // The sender uses another of the agreed codecs: decode that one.
                videoPayloadType = section.payloadType
                if let f = section.format {
                    do { try video.setFormat(f) } catch { Log.warn("subscriber", "cannot decode \(f.name): \(error)") }
                }
            }
            handle(video.receive(received.packet, now: now), now: now)
        case .audio:
            guard wantsAudio, let audio else { return }
            _ = audio.receive(received.packet, now: now)
        case nil:
            break
        }
    }

    private func handle(_ events: [VideoReceiveEvent], now: Instant) {
        for e in events {
            switch e {
            case .frame(let f):
                frameMeter.record(bytes: f.encodedBytes, at: now)
                let info = EncodedFrameInfo(kind: .video, ssrc: videoSSRC ?? 0, rtpTimestamp: f.rtpTimestamp, isKeyframe: f.isKeyframe)
                subscriber?.deliverMedia { d, s in
                    f.encoded.withUnsafeBytes { d.subscriber(s, didReceiveEncodedVideoFrame: $0, info: info) }
                    d.subscriber(s, didReceiveVideoFrame: f.frame)
                }
            case .requestKeyframe:
                if let ssrc = videoSSRC { link?.requestKeyframe(ssrc: ssrc) }
            }
        }
    }

    // MARK: timers (on queue)

    private func tick() {
        guard running else { return }
        let now = MonotonicClock.now()
        if let video, let d = video.nextDeadline, d <= now { handle(video.poll(now: now), now: now) }
        askForKeyframeWhileWaiting(now: now)
        if connected, let audio {
            var due = nextAudioPull ?? now
            if now - due > .milliseconds(200) { due = now }  // stalled (e.g. suspended): do not burst
            while due <= now {
                if wantsAudio, audio.pull(now: now, into: &pcm) != .silence {
                    let frame = AudioFrame(samples: pcm, sampleRate: playoutSettings.sampleRate, channels: playoutSettings.channels,
                                           timestampMicros: due.micros)
                    if settings.playAudio { fifo?.write(pcm) }
                    subscriber?.deliverMedia { $0.subscriber($1, didReceiveAudio: frame) }
                }
                due = due + .milliseconds(20)
            }
            nextAudioPull = due
        }
        ticks += 1
        if ticks % 10 == 0 { checkDecryption() }
        if ticks % 100 == 0 { everySecond() }
    }

    /// While the decoder waits for a keyframe (at start, or after a loss that could not be repaired), keep asking for
    /// one: a request, or the keyframe it brought, may be lost too. The first waits `keyframeWait` for the keyframe the
    /// sender sends anyway (a new connection, or the pipeline's own request); the connection's pacer spaces the rest.
    private func askForKeyframeWhileWaiting(now: Instant) {
        guard connected, videoOn, let video, video.isWaitingForKeyframe,
              let ssrc = videoSSRC ?? link?.negotiated?.media.first(where: { $0.kind == "video" })?.remoteSSRCs.first else {
            keyframeWaitSince = nil
            return
        }
        let since = keyframeWaitSince ?? now
        keyframeWaitSince = since
        if now - since >= Self.keyframeWait { link?.requestKeyframe(ssrc: ssrc) }
    }

    static let keyframeWait: Duration = .milliseconds(200)

    /// Audio keeps enough delay, while packets are lost, for a NACKed packet to come back: through the router, over
    /// both legs (`AudioReceivePipeline.repairAllowance(rtt:legs:)`).
    private func updateRepairAllowance() {
        guard let audio, let rtt = link?.roundTripTime else { return }
        audio.repairAllowance = AudioReceivePipeline.repairAllowance(rtt: rtt, legs: routed ? 2 : 1)
    }

    /// End-to-end encrypted streams: reports `encryptionSecretMismatch` once when frames arrive that cannot be
    /// decrypted and none can (another secret); again after frames decrypted in between (the secrets changed).
    private func checkDecryption() {
        guard let e2ee else { return }
        let c = e2ee.counters
        defer { lastDecryption = c }
        if c.framesDecrypted > lastDecryption.framesDecrypted {
            mismatchReported = false
        } else if c.decryptionFailures > lastDecryption.decryptionFailures, !mismatchReported {
            mismatchReported = true
            let err = OTError(.encryptionSecretMismatch,
                              "stream \(streamId) cannot be decrypted: its publisher uses another encryption secret")
            subscriber?.deliver { $0.subscriber($1, didFailWithError: err) }
        }
    }

    private func everySecond() {
        updateRepairAllowance()
        let st = currentStats()
        subscriber?.deliver { $0.subscriber($1, statsUpdated: st) }
        guard localFallback, connected else { return }
        // Loss that stayed after repair (the pipelines' counts), and loss on the wire (transport-wide numbering).
        let received = st.videoPacketsReceived + st.audioPacketsReceived
        let lost = st.videoPacketsLost + st.audioPacketsLost
        let wire = link?.stats
        let wireReceived = wire?.transportPacketsReceived ?? 0, wireLost = wire?.transportPacketsLost ?? 0
        let dr = max(0, received - lastCounts.received), dl = max(0, lost - lastCounts.lost)
        let wr = max(0, wireReceived - lastCounts.wireReceived), wl = max(0, wireLost - lastCounts.wireLost)
        lastCounts = (received, lost, wireReceived, wireLost)
        guard dr + dl > 0,
              let loss = qualityWindow.add(LinkQualityWindow.Counts(lost: Double(dl), expected: Double(dr + dl),
                                                                    wireLost: Double(wl), wireTotal: Double(wr + wl)))
        else { return }
        let sample = LinkQualitySample(loss: loss.loss, rawLoss: loss.rawLoss)
        switch quality.observe(sample, now: MonotonicClock.now()) {
        case .warn: subscriber?.deliver { $0.subscriberVideoDisableWarning($1) }
        case .liftWarning: subscriber?.deliver { $0.subscriberVideoDisableWarningLifted($1) }
        case .disableVideo: setQuality(off: true)
        case .enableVideo: setQuality(off: false)
        case nil: break
        }
    }

    // MARK: video state (on queue)

    private func setQuality(off: Bool) {
        qualityOff = off
        sendSettings()
        updateVideo(reason: .qualityChanged)
    }

    func setWants(audio a: Bool?, video v: Bool?) {
        guard running else { return }
        if let a { wantsAudio = a }
        if let v { wantsVideo = v }
        sendSettings()
        if v != nil { updateVideo(reason: .subscriberPropertyChanged) }
    }

    func publisherVideo(_ on: Bool) {
        guard running else { return }
        publisherVideo = on
        updateVideo(reason: .publisherPropertyChanged)
    }

    /// Routed: the router owns the quality gate, so only our wishes go; relayed: the publisher stops video for both.
    private func sendSettings() {
        guard let peerId else { return }
        session?.sendMedia(.subscriberSettings(peerId: peerId, audio: wantsAudio, video: wantsVideo && (routed || !qualityOff)))
    }

    private func updateVideo(reason: SubscriberVideoEventReason) {
        let on = publisherVideo && wantsVideo && !qualityOff
        guard on != videoOn else { return }
        videoOn = on
        if on {
            video?.restart()
            if let ssrc = videoSSRC { link?.requestKeyframe(ssrc: ssrc) }
            subscriber?.deliver { $0.subscriber($1, videoEnabledWithReason: reason) }
        } else {
            subscriber?.deliver { $0.subscriber($1, videoDisabledWithReason: reason) }
        }
    }

    // MARK: stats (on queue)

    func currentStats() -> SubscriberStats {
        var s = SubscriberStats()
        s.timestampMillis = wallClockMillis()
        if let v = video?.stats {
            s.videoPacketsReceived = v.packetsReceived; s.videoBytesReceived = v.bytesReceived
            // Loss from the connection, which numbers FEC packets too (the pipeline sees media only).
            s.videoPacketsLost = videoSSRC.flatMap { link?.packetsLost(ssrc: $0) } ?? v.packetsLost
            s.framesDecoded = v.framesDecoded; s.framesDropped = v.framesDropped
            s.freezeCount = v.freezeCount; s.totalFreezesDurationSeconds = v.totalFreezesDuration
            s.videoJitter = v.jitter; s.frameWidth = v.frameWidth; s.frameHeight = v.frameHeight
        }
        if let a = audio?.stats {
            s.audioPacketsReceived = a.packetsReceived; s.audioBytesReceived = a.bytesReceived; s.audioPacketsLost = a.packetsLost
            s.audioJitter = a.jitter
        }
        let now = MonotonicClock.now()
        s.framesPerSecond = frameMeter.framesPerSecond(at: now)
        s.videoBitrateBps = frameMeter.bitsPerSecond(at: now)
        s.roundTripTimeMillis = rtt.map { Double($0.microseconds) / 1000 }
        return s
    }

    func rtcStatsReport() -> String {
        var b = RTCStatsReportBuilder()
        if let video {
            var v = video.stats
            // The connection's RTP session NACKs (the pipeline's own NACK is off).
            if let n = videoSSRC.flatMap({ link?.nackCounters(ssrc: $0) }) { v.nackCount = n.nacked; v.packetsRepaired = n.recovered }
            if let lost = videoSSRC.flatMap({ link?.packetsLost(ssrc: $0) }) { v.packetsLost = lost }
            // The codec being received (the agreed one until packets come).
            let codec = videoPayloadType.map { b.addCodec(video.config.format, payloadType: $0) }
                ?? link?.addCodec("video", to: &b)
            b.addInbound(v, codecId: codec, framesPerSecond: frameMeter.framesPerSecond(at: MonotonicClock.now()))
        }
        if let a = audio?.stats { b.addInbound(a, codecId: link?.addCodec("audio", to: &b)) }
        link?.addCandidatePair(to: &b, id: String((peerId ?? "").prefix(8)))
        return b.json()
    }
}
