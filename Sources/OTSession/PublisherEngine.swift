import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTTransport
import OTWire

/// What happened to a routed publisher's connection to the media router (for `PublisherLinkControl`).
enum RouterLinkEvent: Sendable {
    case connected(peerId: String)
    /// The connection failed, or its offer was lost with a dropped signaling connection (1022).
    case failed(peerId: String, OTError)
    /// The router refused the offer, answered with SDP that cannot be used, or closed the connection.
    case refused(peerId: String, OTError)
}

/// The publisher's media work, confined to its serial `queue` (every method but the capture entry points
/// runs there): capture → send pipelines → RTP fanned out to every peer connection (the router, or each
/// relayed subscriber), RTCP feedback → keyframes and bitrate. Which connection to the media router to open or close
/// is the session executor's decision (`PublisherLinkControl`): the engine opens and closes it and reports what it
/// did (`onRouterLink`); a relayed subscriber whose connection fails offers again itself.
final class PublisherEngine: @unchecked Sendable {
    /// One peer connection: to the media router, or to one relayed subscriber.
    final class Peer: MediaSignalingPeer, @unchecked Sendable {
        let id: String
        let link: MediaLink
        /// The subscriber's connection (relayed), nil for the router.
        let subscriber: String?
        weak var engine: PublisherEngine?
        var connected = false
        var wantsAudio = true
        var wantsVideo = true
        var fractionLost = 0.0
        var rtt: Duration?
        /// Loss-based rule on RTCP receiver reports: the fallback while no transport-wide feedback arrives.
        var rate: LossBasedBitrate
        /// The connection's send-side estimate (delay- and loss-based, from transport-wide feedback).
        var estimate: BandwidthEstimate?
        /// What this receiver allows (kbit/s): the estimate when there is one, else the receiver-report rule.
        var allowedKbps: Int { estimate.map { $0.targetBitrateBps / 1000 } ?? rate.targetKbps }
        var videoReport: RemoteInboundReport?
        var audioReport: RemoteInboundReport?
        var rttTotal = Duration.zero
        var rttCount = 0
        /// What this peer negotiated for each kind (set once connected): the payload type and header extensions its
        /// copy of each packet carries.
        var audioOut: (payloadType: UInt8, extensions: RTPExtensionRewriter)?
        var videoOut: (payloadType: UInt8, extensions: RTPExtensionRewriter)?

        init(id: String, link: MediaLink, subscriber: String?, rate: LossBasedBitrate) {
            self.id = id; self.link = link; self.subscriber = subscriber; self.rate = rate
        }

        func mediaSignal(_ message: ServerMessage) {
            guard let engine else { return }
            engine.queue.async { engine.signal(message, peer: self) }
        }
    }

    let queue: DispatchQueue
    let settings: PublisherSettings
    let videoSSRC = UInt32.random(in: 1...UInt32.max)
    /// Video retransmissions go on this RTX stream where the receiver negotiated RTX (RFC 4588).
    let videoRTXSSRC = UInt32.random(in: 1...UInt32.max)
    let audioSSRC = UInt32.random(in: 1...UInt32.max)
    let hasVideo: Bool
    let videoWidth: Int
    let videoHeight: Int
    private let fps: Int

    /// What happened to the connection to the media router (called on `queue`).
    var onRouterLink: (@Sendable (RouterLinkEvent) -> Void)?
    var onStats: (@Sendable (PublisherStats) -> Void)?

    let capturer: (any VideoCapturer)?
    private var captureSink: CaptureSink?
    private var audioSink: PublisherAudioSink?
    private var audioDevice: (any AudioDevice)?
    private var video: VideoSendPipeline?
    private var audio: AudioSendPipeline?
    private var peers: [String: Peer] = [:]
    /// Connected peers that want video / audio (rebuilt when peers change).
    private var videoTargets: [Peer] = []
    private var audioTargets: [Peer] = []
    private var scratch: [UInt8] = []
    private var stream: StreamInfo?
    private var running = false
    private var sendingAudio = true
    private var sendingVideo = true
    private var targetKbps: Int
    private var videoRate = RateMeter()
    private var statsTimer: (any DispatchSourceTimer)?
    private var pliCount = 0
    private var nackCount = 0
    /// The loss (percent) the Opus encoder was last told.
    private var audioLossPercent = 0
    private let backlog = Lock()
    private var framesQueued = 0
    /// The current peer connection to the media router, if any (tests).
    var routerPeerId: String? { peers.values.first { $0.subscriber == nil }?.id }

    /// Closes every peer connection's transport without a word on signaling, as a failed network would look to the
    /// other sides (fault injection for tests). The peers stay until the other side reports the failure.
    func closeLinksForTesting() {
        for p in peers.values { p.link.close() }
    }

    init(settings: PublisherSettings, queue: DispatchQueue) throws {
        self.settings = settings
        self.queue = queue
        targetKbps = settings.startBitrateKbps
        switch settings.videoSource {
        case .testPattern:
            capturer = try TestPatternSource(width: settings.width, height: settings.height).capturer(fps: settings.fps)
        case .rawFile(let path):
            capturer = try RawFileSource(path: path, width: settings.width, height: settings.height).capturer(fps: settings.fps)
        case .capturer(let c):
            capturer = c
        case .camera(let device):
            capturer = try V4L2Capturer(device: device, width: settings.width, height: settings.height, fps: settings.fps)
        case .none:
            capturer = nil
        }
        hasVideo = capturer != nil
        videoWidth = capturer?.captureSettings.width ?? 0
        videoHeight = capturer?.captureSettings.height ?? 0
        fps = capturer?.captureSettings.fps ?? settings.fps
    }

    // MARK: lifecycle (on queue)

    /// Starts capture and the send pipelines; `transform` is the frame transform the session chose (end-to-end
    /// encryption, or the configured one).
    func start(audioDevice: (any AudioDevice)?, session: Session, transform: any FrameTransform) throws {
        guard !running else { throw OTError(.illegalState, "already publishing") }
        self.session = session
        if let capturer {
            var enc = VideoEncoderConfig(width: videoWidth, height: videoHeight, bitrateKbps: targetKbps, framerate: fps)
            enc.keyframeInterval = max(enc.keyframeInterval, fps * 10)
            // Packets carry a transport-wide sequence number (each connection renumbers it) for bandwidth estimation.
            video = try VideoSendPipeline(config: VideoSendConfig(ssrc: videoSSRC, format: preferredVideoFormats[0], encoder: enc,
                                                                  extensionIds: Self.extensionIds),
                                          transform: transform, transportSequence: TransportSequenceCounter())
            let sink = CaptureSink(converter: PixelFormatConverter()) { [weak self] frame in self?.frameCaptured(frame) }
            do {
                try capturer.initCapture(consumer: sink)
                try capturer.startCapture()
            } catch {
                capturer.releaseCapture()
                throw OTError(.unableToPublish, "the video capturer did not start: \(error)")
            }
            captureSink = sink
        }
        if let audioDevice {
            var opus = OpusEncoderConfig(sampleRate: audioDevice.captureSettings.sampleRate, channels: audioDevice.captureSettings.channels)
            opus.bitrateBps = settings.audioBitrateBps
            // In-band FEC (we offer and answer useinbandfec=1): libopus codes it once told of loss (`updateAudioFEC`).
            opus.fec = true
            audio = try AudioSendPipeline(config: AudioSendConfig(ssrc: audioSSRC, opus: opus, extensionIds: Self.extensionIds),
                                          transform: transform, transportSequence: TransportSequenceCounter())
            let sink = PublisherAudioSink(engine: self)
            audioDevice.setCaptureSink(sink)
            do { try audioDevice.startCapture() } catch {
                audioDevice.setCaptureSink(nil)
                stopCapture()
                throw OTError(.unableToPublish, "the audio device did not start capturing: \(error)")
            }
            audioSink = sink
            self.audioDevice = audioDevice
        }
        running = true
        let t = DispatchSource.makeTimerSource(queue: queue)
        t.schedule(deadline: .now() + 1, repeating: 1)
        t.setEventHandler { [weak self] in
            guard let self, running else { return }
            onStats?(currentStats())
        }
        t.resume()
        statsTimer = t
    }

    private func stopCapture() {
        capturer?.stopCapture()
        capturer?.releaseCapture()
        captureSink?.detach()
        captureSink = nil
    }

    /// Stops capture and closes every peer connection (telling the other sides).
    func stop() {
        guard running else { return }
        running = false
        statsTimer?.cancel()
        statsTimer = nil
        stopCapture()
        if let d = audioDevice {
            d.stopCapture()
            d.setCaptureSink(nil)
        }
        audioSink?.detach()
        audioSink = nil
        audioDevice = nil
        for p in peers.values {
            session?.media.unregister(peerId: p.id, answering: p.subscriber != nil)
            session?.sendMedia(.mediaClose(peerId: p.id))
            p.link.close()
        }
        peers = [:]
        rebuildTargets()
        stream = nil
    }

    func streamCreated(_ s: StreamInfo) { stream = s }

    func setSending(audio a: Bool, video v: Bool) {
        let resumeVideo = v && !sendingVideo
        sendingAudio = a
        sendingVideo = v
        if resumeVideo { video?.requestKeyframe() }
    }

    // MARK: peers (on queue)

    /// What the send pipelines write (each peer's copy is rewritten to what that peer negotiated): a transport-wide
    /// sequence number (each connection stamps its own) and the audio level.
    static let extensionIds = RTPHeaderExtensionIds(transportSequenceNumber: SDPNegotiation.transportCCExtensionId,
                                                    audioLevel: SDPNegotiation.audioLevelExtensionId)

    /// The publisher's video formats, most preferred first, without repeats (VP8 when none).
    private var preferredVideoFormats: [any RTPPayloadFormat] {
        var codecs: [VideoCodecType] = []
        for c in settings.preferredVideoCodecs where !codecs.contains(c) { codecs.append(c) }
        return (codecs.isEmpty ? [.vp8] : codecs).map(\.format)
    }

    /// Whether a connection has agreed the video codec (the encoder's, which later connections get alone).
    private var videoFormatAgreed = false

    /// The first connection to agree a video codec sets the encoder's.
    private func adoptVideoFormat(_ p: Peer) throws {
        guard !videoFormatAgreed, let video, let f = p.link.agreedFormat("video") else { return }
        try video.setFormat(f)
        videoFormatAgreed = true
    }

    private func linkConfig() -> PeerConnectionConfig {
        let sid = stream?.id ?? "ot"
        var c = PeerConnectionConfig(
            audioTrack: audio != nil ? SDPLocalTrack(ssrc: audioSSRC, streamID: sid, trackID: "audio-\(audioSSRC)", cname: "ot-\(sid)") : nil,
            videoTrack: video != nil ? SDPLocalTrack(ssrc: videoSSRC, rtxSSRC: videoRTXSSRC, streamID: sid, trackID: "video-\(videoSSRC)",
                                                     cname: "ot-\(sid)") : nil)
        if let video {
            c.videoFormats = videoFormatAgreed ? [video.config.format] : preferredVideoFormats
            // Relayed, a subscriber offers: answer with the codec we prefer, not the first it lists.
            c.answerInLocalOrder = true
            c.bandwidthEstimation = BandwidthEstimatorConfig(startBitrateBps: settings.startBitrateKbps * 1000,
                                                             minBitrateBps: settings.minBitrateKbps * 1000,
                                                             maxBitrateBps: settings.maxBitrateKbps * 1000)
        }
        return c
    }

    private func currentSettings() throws -> (SessionSettings, (servers: ResolvedICEServers, route: StreamRoute)) {
        guard let s = session else { throw OTError(.notConnected) }
        return (s.settings, s.mediaServers())
    }

    private func makePeer(id: String, subscriber: String?) throws -> Peer {
        let box = WeakPeer()
        let (sessionSettings, servers) = try currentSettings()
        let link = try MediaLink(config: linkConfig(), settings: sessionSettings, servers: servers, queue: queue) { [weak self] events in
            guard let self, let p = box.peer else { return }
            for e in events { linkEvent(e, peer: p) }
        }
        let p = Peer(id: id, link: link, subscriber: subscriber,
                     rate: LossBasedBitrate(minKbps: settings.minBitrateKbps, startKbps: settings.startBitrateKbps, maxKbps: settings.maxBitrateKbps))
        p.engine = self
        box.peer = p
        return p
    }

    /// Routed: a peer connection `peerId` to the media router, which we offer for the stream; what becomes of it goes
    /// to `onRouterLink`.
    func openRouterLink(_ peerId: String, session: Session) {
        guard running, let stream else { return }
        do {
            let p = try makePeer(id: peerId, subscriber: nil)
            peers[peerId] = p
            session.media.register(peerId: peerId, p)
            let offer = try p.link.createOffer()
            try session.sendMediaOffer(peerId: peerId, streamId: stream.id, direction: .publish, sdp: offer) { [weak self] err in
                guard let err, let self else { return }
                // Lost with a dropped signaling connection (1022): the control offers again (queued until it is back).
                queue.async {
                    self.onRouterLink?(err.code == .connectionDropped
                                       ? .failed(peerId: peerId, err)
                                       : .refused(peerId: peerId, OTError(err.code, "the media router refused the stream: \(err.message)")))
                }
            }
        } catch {
            onRouterLink?(.refused(peerId: peerId, OTError(.publisherWebRTC, "could not connect to the media router: \(error)")))
        }
    }

    /// Routed: closes the connection to the router `peerId` (telling the server).
    func closeRouterLink(_ peerId: String) { dropPeer(peerId, tellOtherSide: true) }

    /// Relayed: a subscriber's offer; we answer it with our tracks.
    func answer(peerId: String, streamId: String, direction: MediaDirection, sdp: String, subscriber: String, session: Session) {
        guard running, let stream, streamId == stream.id, direction == .subscribe, peers[peerId] == nil else {
            session.sendMedia(.mediaClose(peerId: peerId))
            return
        }
        do {
            let p = try makePeer(id: peerId, subscriber: subscriber)
            peers[peerId] = p
            session.media.register(peerId: peerId, p, answering: true)
            let answer = try p.link.createAnswer(offer: sdp)
            if let refusal = videoRefusal(p, offer: sdp) {
                // As the media router refuses it: the subscriber hears why instead of getting a stream without video.
                Log.warn("publisher", "refused an offer from \(subscriber): \(refusal)")
                dropPeer(peerId, tellOtherSide: false)
                session.sendMedia(.mediaClose(peerId: peerId, refusal: refusal))
                return
            }
            try adoptVideoFormat(p)
            session.sendMedia(.mediaAnswer(peerId: peerId, sdp: answer))
        } catch {
            Log.warn("publisher", "refused an offer from \(subscriber): \(error)")
            dropPeer(peerId, tellOtherSide: true)
        }
    }

    /// Why a subscriber's offer that asks for video cannot have ours (none of our codecs, or not the one our encoder
    /// already sends, is in it); nil when it can, or asks for none.
    private func videoRefusal(_ p: Peer, offer: String) -> String? {
        guard video != nil, p.link.agreedFormat("video") == nil,
              (try? SessionDescription.parse(offer))?.media.contains(where: { $0.kind == "video" && !$0.isRejected }) == true else { return nil }
        let ours = videoFormatAgreed ? video.map { [$0.config.format.name] } ?? [] : preferredVideoFormats.map(\.name)
        return "the stream's video is \(ours.joined(separator: " or ")), which the subscriber's offer does not list"
    }

    private weak var session: Session?

    private func dropPeer(_ id: String, tellOtherSide: Bool) {
        guard let p = peers.removeValue(forKey: id) else { return }
        session?.media.unregister(peerId: id, answering: p.subscriber != nil)
        if tellOtherSide { session?.sendMedia(.mediaClose(peerId: id)) }
        p.link.close()
        rebuildTargets()
    }

    fileprivate func signal(_ m: ServerMessage, peer p: Peer) {
        guard peers[p.id] === p else { return }
        switch m {
        case .mediaAnswer(_, let sdp):
            do { try p.link.setRemoteAnswer(sdp); try adoptVideoFormat(p) } catch {
                onRouterLink?(.refused(peerId: p.id, OTError(.publisherWebRTC, "bad answer from the media router: \(error)")))
            }
        case .mediaCandidate(_, let c, _, _):
            p.link.addRemoteCandidate(c)
        case .mediaClose where p.subscriber == nil:
            onRouterLink?(.refused(peerId: p.id, OTError(.publisherWebRTC, "the media router closed the stream's connection")))
        case .mediaClose:
            dropPeer(p.id, tellOtherSide: false)
        case .subscriberSettings(_, let a, let v):
            let resume = v && !p.wantsVideo
            p.wantsAudio = a
            p.wantsVideo = v
            rebuildTargets()
            if resume { video?.requestKeyframe() }
        default:
            break
        }
    }

    private func linkEvent(_ e: PeerConnectionEvent, peer p: Peer) {
        guard peers[p.id] === p else { return }
        switch e {
        case .localCandidate(let c):
            session?.sendMedia(p.link.candidateMessage(peerId: p.id, c.description))
        case .localCandidatesComplete:
            session?.sendMedia(p.link.candidateMessage(peerId: p.id, ""))
        case .connected:
            p.connected = true
            for m in p.link.negotiated?.media ?? [] {
                let out = (m.codec.payloadType, RTPExtensionRewriter(source: Self.extensionIds, target: m.extensionIds, mid: m.mid))
                if m.kind == "audio" { p.audioOut = out } else if m.kind == "video" { p.videoOut = out }
            }
            rebuildTargets()
            video?.requestKeyframe()
            if p.subscriber == nil { onRouterLink?(.connected(peerId: p.id)) }
        case .failed(let err) where p.subscriber == nil:
            onRouterLink?(.failed(peerId: p.id, OTError(.publisherWebRTC, err.message)))
        case .failed:
            dropPeer(p.id, tellOtherSide: true)
        case .keyframeRequested:
            pliCount += 1
            video?.requestKeyframe()
        case .nackRequested(_, let seqs):
            nackCount += seqs.count
        case .roundTripTime(let d):
            p.rtt = d
            p.rttTotal = p.rttTotal + d
            p.rttCount += 1
        case .receiverReport(let b):
            let clock = b.ssrc == videoSSRC ? 90_000 : 48_000
            let report = RemoteInboundReport(ssrc: b.ssrc, fractionLost8: b.fractionLost, packetsLost: Int(b.cumulativeLost),
                                             jitterTicks: b.jitter, clockRate: clock, roundTripTime: p.rtt,
                                             totalRoundTripTime: p.rttTotal, roundTripTimeMeasurements: p.rttCount)
            if b.ssrc == videoSSRC {
                p.videoReport = report
                p.fractionLost = report.fractionLost
                adaptBitrate(p, loss: report.fractionLost)
            } else if b.ssrc == audioSSRC {
                p.audioReport = report
                updateAudioFEC()
            }
        case .bandwidthEstimate(let e):
            p.estimate = e
            retarget(p)
            updateAudioFEC()
        case .iceStateChanged, .rtp, .transportFeedback, .bye, .packetsUnrecoverable, .retransmissionsRequested:
            break
        }
    }

    /// GCC's loss-based rule on receiver reports, for a receiver that sends no transport-wide feedback.
    private func adaptBitrate(_ p: Peer, loss: Double) {
        p.rate.report(fractionLost: loss)
        retarget(p)
    }

    /// The encoder follows the weakest receiver: each allows min(delay-based, loss-based) from its connection's
    /// send-side estimate (or the receiver-report rule without one).
    private func retarget(_ p: Peer) {
        let target = videoTargets.map(\.allowedKbps).min() ?? p.allowedKbps
        if target != targetKbps, let video {
            targetKbps = target
            do { try video.setTargetBitrate(kbps: target) } catch { Log.warn("publisher", "bitrate change refused: \(error)") }
        }
    }

    /// Tells the Opus encoder the loss its receivers see, so its in-band FEC is sized for it (libopus codes none at 0 %):
    /// the worst over the audio connections of the loss on the wire (transport-wide feedback, before retransmission)
    /// or, without it, of their receiver reports. Changes of less than 2 points are ignored.
    private func updateAudioFEC() {
        guard let audio else { return }
        let loss = audioTargets.map { max($0.estimate?.fractionLost ?? 0, $0.audioReport?.fractionLost ?? 0) }.max() ?? 0
        let percent = min(50, Int((loss * 100).rounded()))
        guard abs(percent - audioLossPercent) >= 2 || (percent == 0) != (audioLossPercent == 0) else { return }
        audioLossPercent = percent
        do { try audio.setFEC(true, expectedLossPercent: percent) } catch { Log.warn("publisher", "Opus FEC change refused: \(error)") }
    }

    private func rebuildTargets() {
        videoTargets = peers.values.filter { $0.connected && $0.wantsVideo }
        audioTargets = peers.values.filter { $0.connected && $0.wantsAudio }
    }

    // MARK: media

    /// On the capturer's thread: queue the frame for encoding unless two are already waiting.
    private func frameCaptured(_ frame: VideoFrame) {
        let accept = backlog.withLock { () -> Bool in
            guard framesQueued < 2 else { return false }
            framesQueued += 1
            return true
        }
        guard accept else { return }
        queue.async { [self] in
            backlog.withLock { framesQueued -= 1 }
            encode(frame)
        }
    }

    private var sentSize = (width: 0, height: 0)

    private func encode(_ frame: VideoFrame) {
        guard running, sendingVideo, !videoTargets.isEmpty, let video else { return }
        if (frame.width, frame.height) != sentSize, let stream {
            // A custom capturer changed size: others see the stream's dimensions change.
            if sentSize.width != 0 || (frame.width, frame.height) != (stream.width, stream.height) {
                try? session?.updateStream(stream.id, width: frame.width, height: frame.height)
            }
            sentSize = (frame.width, frame.height)
        }
        let now = MonotonicClock.now()
        do {
            try video.send(frame, now: now) { packet in
                videoRate.record(bytes: packet.count, at: now)
                fanOut(packet, to: videoTargets, now: now, \.videoOut)
            }
        } catch {
            Log.warn("publisher", "video encode failed: \(error)")
        }
    }

    /// On the audio device's thread: copies the chunk to the media queue.
    fileprivate func audioCaptured(_ samples: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings) {
        let copy = Array(samples)
        queue.async { [self] in
            guard running, sendingAudio, !audioTargets.isEmpty, let audio else { return }
            do {
                let now = MonotonicClock.now()
                try audio.send(copy, settings: settings, now: now) { packet in fanOut(packet, to: audioTargets, now: now, \.audioOut) }
            } catch {
                Log.warn("publisher", "audio encode failed: \(error)")
            }
        }
    }

    /// Sends one packet to every target: each gets its own copy, with the payload type and header extensions that
    /// peer negotiated, written into the reused `scratch` and protected in place by its connection.
    private func fanOut(_ packet: [UInt8], to targets: [Peer], now: Instant, _ negotiated: KeyPath<Peer, (payloadType: UInt8, extensions: RTPExtensionRewriter)?>) {
        for p in targets {
            guard let out = p[keyPath: negotiated], out.extensions.rewrite(packet, into: &scratch, now: now) else { continue }
            scratch[1] = scratch[1] & 0x80 | out.payloadType
            p.link.sendRTP(&scratch)
        }
    }

    // MARK: stats (on queue)

    func currentStats() -> PublisherStats {
        var s = PublisherStats()
        s.timestampMillis = wallClockMillis()
        s.connections = peers.values.filter(\.connected).count
        if let v = video?.stats {
            s.videoPacketsSent = v.packetsSent; s.videoBytesSent = v.bytesSent
            s.framesEncoded = v.framesEncoded; s.keyFramesEncoded = v.keyFramesEncoded
            s.targetBitrateKbps = v.targetBitrateKbps
        }
        let weakest = peers.values.filter(\.connected).compactMap(\.estimate).min { $0.targetBitrateBps < $1.targetBitrateBps }
        s.availableOutgoingBitrate = weakest?.targetBitrateBps
        s.bandwidthUsage = weakest?.usage.rawValue
        if let a = audio?.stats { s.audioPacketsSent = a.packetsSent; s.audioBytesSent = a.bytesSent }
        s.videoBitrateBps = videoRate.bitsPerSecond(at: MonotonicClock.now())
        s.pliCount = pliCount
        s.nackCount = nackCount
        for p in peers.values {
            let c = p.link.stats
            s.rtpBytesSent += c.bytesSent - c.fecBytesSent
            s.repairBytesSent += c.retransmittedBytesSent + c.fecBytesSent
        }
        s.roundTripTimeMillis = peers.values.compactMap { $0.rtt.map { Double($0.microseconds) / 1000 } }.max()
        s.fractionLost = peers.values.map(\.fractionLost).max() ?? 0
        return s
    }

    func rtcStatsReport() -> String {
        var b = RTCStatsReportBuilder()
        let worst = peers.values.max { $0.fractionLost < $1.fractionLost }
        if var v = video?.stats {
            // Retransmissions are the connections' (answered from each one's RTP session).
            for p in peers.values {
                guard let r = p.link.retransmissionCounters(ssrc: videoSSRC) else { continue }
                v.retransmittedPacketsSent += r.packets
                v.retransmittedBytesSent += r.bytes
                v.nackMisses += r.misses
            }
            v.nackCount = nackCount
            v.pliCount = pliCount
            let codec = peers.values.first { $0.connected }?.link.addCodec("video", to: &b)
            b.addOutbound(v, codecId: codec, framesPerSecond: nil, remote: worst?.videoReport)
        }
        if let a = audio?.stats {
            b.addOutbound(a, codecId: peers.values.first { $0.connected }?.link.addCodec("audio", to: &b), remote: worst?.audioReport)
        }
        for p in peers.values.sorted(by: { $0.id < $1.id }) where p.connected {
            p.link.addCandidatePair(to: &b, id: String(p.id.prefix(8)), availableOutgoingBitrate: p.estimate?.targetBitrateBps)
        }
        return b.json()
    }
}

/// The audio device's capture sink for a publisher.
final class PublisherAudioSink: AudioCaptureSink, @unchecked Sendable {
    private let lock = Lock()
    private weak var engine: PublisherEngine?
    init(engine: PublisherEngine) { self.engine = engine }
    func detach() { lock.withLock { engine = nil } }
    func audioCaptured(_ samples: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings) {
        lock.withLock { engine }?.audioCaptured(samples, settings: settings)
    }
}

private final class WeakPeer: @unchecked Sendable {
    weak var peer: PublisherEngine.Peer?
}
