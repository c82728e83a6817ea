import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTTransport
import OTWire

/// Where a publisher's video comes from.
public enum PublisherVideoSource: Sendable {
    /// The built-in moving test pattern at the settings' size and rate; each frame carries its number and
    /// capture time, readable after decoding with `TestPatternReader`.
    case testPattern
    /// A file of raw I420 frames of the settings' size, played at the settings' rate and looped.
    case rawFile(path: String)
    /// A custom capturer (for example `CallbackVideoCapturer`); frames in any `PixelFormat`, from any thread.
    case capturer(any VideoCapturer)
    /// A V4L2 camera (`V4L2Capturer`): a path such as /dev/video0, a camera's name, or nil for the first camera
    /// (`V4L2Cameras.list()`), in the mode closest to the settings' size and rate. If it fails or is unplugged,
    /// `publisher(_:deviceFailed:)` reports it and the stream carries black frames.
    case camera(device: String?)
    /// No video track.
    case none
}

/// The kind of video a stream carries (as OTStreamVideoType).
public enum StreamVideoType: String, Sendable, CaseIterable {
    case camera, screen, custom
}

/// The video codecs a publisher can send (as OTVideoCodecType).
public enum VideoCodecType: String, Sendable, CaseIterable {
    case vp8 = "VP8"
    case vp9 = "VP9"

    /// Its RTP payload format.
    public var format: any RTPPayloadFormat {
        switch self { case .vp8: PayloadFormats.vp8; case .vp9: PayloadFormats.vp9 }
    }

    /// The codec with this name (case-insensitive), or nil.
    public init?(name: String) {
        guard let c = Self.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
        self = c
    }
}

/// Settings of a `Publisher` (as OTPublisherSettings).
public struct PublisherSettings: Sendable {
    /// The stream's name others see.
    public var name: String
    public var videoSource: PublisherVideoSource
    /// The audio device captured from; nil uses a `HeadlessAudioDevice` capturing silence (no sound server needed).
    /// A `PulseAudioDevice` captures a microphone; its failures come to `publisher(_:deviceFailed:)`.
    public var audioDevice: (any AudioDevice)?
    /// Whether the stream has an audio track at all.
    public var audioTrack: Bool
    public var videoType: StreamVideoType
    /// Picture size and frame rate of the built-in sources (a custom capturer's own settings win).
    public var width: Int
    public var height: Int
    public var fps: Int
    /// Video bitrate bounds (kbit/s, 0 < min ≤ start ≤ max ≤ `maxVideoBitrateKbps`); the encoder starts at
    /// `startBitrateKbps` and adapts to receiver feedback.
    public var minBitrateKbps: Int
    public var startBitrateKbps: Int
    public var maxBitrateKbps: Int
    /// Opus bitrate (bit/s).
    public var audioBitrateBps: Int
    /// The highest `maxBitrateKbps` (100 Mbit/s): a bound for every rate derived from it (bit/s, libvpx's kbit/s).
    public static let maxVideoBitrateKbps = 100_000
    /// A per-frame transform of the encoded media between encoder and packetizer (end-to-end encryption plugs
    /// in here); subscribers need the matching `SubscriberSettings.frameTransform`.
    public var frameTransform: any FrameTransform
    /// Initial values of `publishAudio` / `publishVideo`.
    public var publishAudio: Bool
    public var publishVideo: Bool
    /// Whether subscribers' video of this stream may be dropped under sustained poor quality (audio fallback, as
    /// OTPublisherKit's `audioFallbackEnabled`). False: neither the media router nor a relayed subscriber ever
    /// disables it for quality. Travels with the stream (`StreamInfo.audioFallbackEnabled`).
    public var audioFallbackEnabled: Bool
    /// The video codecs to send, most preferred first (as OTPublisherSettings' video codec preference). The stream
    /// is encoded in one codec: the first of these its first connection agrees (the media router takes our first;
    /// relayed, the first subscriber's offer that lists one). Later connections are offered or answered with that
    /// codec only; a relayed subscriber without it gets no video. Empty or VP8 alone (the default): VP8.
    public var preferredVideoCodecs: [VideoCodecType] = [.vp8]

    public init(name: String = "", videoSource: PublisherVideoSource = .testPattern, audioDevice: (any AudioDevice)? = nil,
                audioTrack: Bool = true, videoType: StreamVideoType = .camera, width: Int = 640, height: Int = 480, fps: Int = 30,
                minBitrateKbps: Int = 100, startBitrateKbps: Int = 600, maxBitrateKbps: Int = 2000, audioBitrateBps: Int = 32_000,
                frameTransform: any FrameTransform = IdentityFrameTransform(), publishAudio: Bool = true, publishVideo: Bool = true,
                audioFallbackEnabled: Bool = true) {
        self.name = name; self.videoSource = videoSource; self.audioDevice = audioDevice; self.audioTrack = audioTrack
        self.videoType = videoType; self.width = width; self.height = height; self.fps = fps
        self.minBitrateKbps = minBitrateKbps; self.startBitrateKbps = startBitrateKbps; self.maxBitrateKbps = maxBitrateKbps
        self.audioBitrateBps = audioBitrateBps; self.frameTransform = frameTransform
        self.publishAudio = publishAudio; self.publishVideo = publishVideo
        self.audioFallbackEnabled = audioFallbackEnabled
    }

    /// Checks the numbers (`width` and `height` 1–4096, `fps` 1–120; video bitrates 1 ≤ min ≤ start ≤ max ≤
    /// `maxVideoBitrateKbps`; `audioBitrateBps` 6000–510000, Opus's range), the name (up to 1000 characters) and that
    /// there is audio or video; throws `.invalidParameter` naming what is wrong. `Publisher.init` calls it, and so does
    /// the C ABI, which passes `name` to give its own member names in the message.
    public func validate(naming name: (String) -> String = { $0 }) throws {
        try SettingsRange.check(width, 1...4096, name("width"))
        try SettingsRange.check(height, 1...4096, name("height"))
        try SettingsRange.check(fps, 1...120, name("fps"))
        try SettingsRange.check(minBitrateKbps, 1...Self.maxVideoBitrateKbps, name("minBitrateKbps"))
        try SettingsRange.check(maxBitrateKbps, minBitrateKbps...Self.maxVideoBitrateKbps, name("maxBitrateKbps"))
        try SettingsRange.check(startBitrateKbps, minBitrateKbps...maxBitrateKbps, name("startBitrateKbps"))
        try SettingsRange.check(audioBitrateBps, 6_000...510_000, name("audioBitrateBps"))
        guard self.name.count <= 1000 else { throw OTError(.invalidParameter, "\(name("name")) is over 1000 characters") }
        if case .none = videoSource, !audioTrack { throw OTError(.invalidParameter, "a publisher needs audio or video") }
    }
}

/// A publisher's sending counters (as OTPublisherKitVideoNetworkStats / AudioNetworkStats, merged).
public struct PublisherStats: Sendable, Equatable {
    /// Wall-clock milliseconds since 1970 when taken.
    public var timestampMillis: Int64 = 0
    /// Media connections that are up: subscribers (relayed) or the media router (routed).
    public var connections = 0
    public var videoPacketsSent = 0
    public var videoBytesSent = 0
    public var audioPacketsSent = 0
    public var audioBytesSent = 0
    public var framesEncoded = 0
    public var keyFramesEncoded = 0
    /// Video bits per second sent over the last second (to each connection).
    public var videoBitrateBps = 0.0
    /// The encoder's current target (kbit/s), adapted to receiver feedback.
    public var targetBitrateKbps = 0
    /// The send-side bandwidth estimate of the weakest connection (bits per second, from transport-wide feedback:
    /// min of the delay-based and loss-based rules), as W3C `availableOutgoingBitrate`; nil before feedback.
    public var availableOutgoingBitrate: Int?
    /// That connection's delay-based detector state: "normal", "overusing" (queues grow) or "underusing".
    public var bandwidthUsage: String?
    /// Keyframe requests (PLI/FIR) and NACKed packets received.
    public var pliCount = 0
    public var nackCount = 0
    /// The worst round-trip time and loss fraction (0…1) any receiver reports, when known.
    public var roundTripTimeMillis: Double?
    public var fractionLost = 0.0
    /// RTP bytes (whole packets, before SRTP) sent on all of the publisher's connections: media, and repair
    /// (packets resent in answer to NACKs, and FEC packets).
    public var rtpBytesSent = 0
    public var repairBytesSent = 0
    public init() {}
}

/// Messages a `Publisher` sends to its delegate, on the session's `apiQueue` in order with the session's messages.
/// Every method has an empty default.
public protocol PublisherDelegate: AnyObject {
    /// The stream was created: others see it (as `publisher:streamCreated:`).
    func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo)
    /// The stream ended (unpublish, disconnect, or after `didFailWithError`).
    func publisher(_ publisher: Publisher, streamDestroyed stream: StreamInfo)
    /// Publishing failed (the server refused the stream, or its media connection could not be made or re-established:
    /// 1541, 1610); the stream ends (`streamDestroyed` follows once it was created).
    func publisher(_ publisher: Publisher, didFailWithError error: OTError)
    /// Sending counters, about once a second while published.
    func publisher(_ publisher: Publisher, statsUpdated stats: PublisherStats)
    /// A moderator force-muted this stream (`forceMuteStream`, or a `forceMuteAll` that did not exclude it, or it was
    /// published while a mute all was active): audio is no longer sent and `publishAudio` is false until the app sets it
    /// again (as `publisher:muteForced:`). `active` is always true.
    func publisher(_ publisher: Publisher, muteForced active: Bool)
    /// The microphone or camera failed (could not be opened, or was lost while publishing). The stream continues:
    /// silence instead of the microphone, black frames instead of the camera.
    func publisher(_ publisher: Publisher, deviceFailed error: DeviceError)
}

extension PublisherDelegate {
    public func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) {}
    public func publisher(_ publisher: Publisher, streamDestroyed stream: StreamInfo) {}
    public func publisher(_ publisher: Publisher, didFailWithError error: OTError) {}
    public func publisher(_ publisher: Publisher, statsUpdated stats: PublisherStats) {}
    public func publisher(_ publisher: Publisher, muteForced active: Bool) {}
    public func publisher(_ publisher: Publisher, deviceFailed error: DeviceError) {}
}

/// Publishes one audio/video stream into a session (as OTPublisherKit): `Session.publish(_:)`, `Session.unpublish(_:)`.
/// Video from the settings' source is encoded once (VP8) and sent to the media router (routed sessions) or to each
/// subscriber (relayed sessions, one peer connection each); audio from the audio device (Opus). Thread-safe.
public final class Publisher: SessionMediaClient, @unchecked Sendable {
    public let settings: PublisherSettings
    /// The audio device captured from.
    public let audioDevice: any AudioDevice

    private let lock = StartStopLock(cancelled: "the publish was ended while it started")
    private weak var _delegate: PublisherDelegate?
    private weak var session: Session?
    private var _stream: StreamInfo?
    private var _publishAudio: Bool
    private var _publishVideo: Bool
    /// The microphone's and camera's failure reports, while published.
    private var deviceObservations: [DeviceObservation] = []

    /// Encoding, sending and peer management run here.
    let mediaQueue = DispatchQueue(label: "otsession.publisher.media")
    private let engine: PublisherEngine

    /// Creates a publisher; nothing is captured until `Session.publish`. Throws `invalidParameter` for bad settings.
    public init(delegate: PublisherDelegate?, settings: PublisherSettings = PublisherSettings()) throws {
        try settings.validate()
        self.settings = settings
        _delegate = delegate
        audioDevice = try settings.audioDevice ?? HeadlessAudioDevice(capture: .silence)
        _publishAudio = settings.publishAudio
        _publishVideo = settings.publishVideo
        engine = try PublisherEngine(settings: settings, queue: mediaQueue)
    }

    public var delegate: PublisherDelegate? {
        get { lock.withLock { _delegate } }
        set { lock.withLock { _delegate = newValue } }
    }

    /// The published stream, from `streamCreated` until `streamDestroyed`.
    public var stream: StreamInfo? { lock.withLock { _stream } }

    /// Whether audio is sent; others see the stream's `hasAudio` change.
    public var publishAudio: Bool {
        get { lock.withLock { _publishAudio } }
        set { setPublishing(audio: newValue) }
    }

    /// Whether video is sent; others see the stream's `hasVideo` change (subscribers: video disabled/enabled,
    /// reason `.publisherPropertyChanged`).
    public var publishVideo: Bool {
        get { lock.withLock { _publishVideo } }
        set { setPublishing(video: newValue) }
    }

    /// The capturer of the video source (the camera's `V4L2Capturer`, the test pattern's timed capturer, a custom
    /// one); nil without video.
    public var videoCapturer: (any VideoCapturer)? { engine.capturer }

    /// Sending counters now.
    public var stats: PublisherStats { mediaQueue.sync { engine.currentStats() } }

    /// The current peer connection to the media router and how many times the stream was republished (tests).
    var routerPeerId: String? { mediaQueue.sync { engine.routerPeerId } }
    var republishCount: Int { lock.withLock { session }?.onControl { linkControl?.republishCount } ?? 0 }
    /// Breaks every media connection as a failed network would (tests).
    func closeMediaConnectionsForTesting() { mediaQueue.sync { engine.closeLinksForTesting() } }

    /// The W3C-named RTC stats report (JSON array: `outbound-rtp`, `remote-inbound-rtp`).
    public func rtcStatsReport() -> String { mediaQueue.sync { engine.rtcStatsReport() } }

    private func setPublishing(audio: Bool? = nil, video: Bool? = nil) {
        let (s, stream, a, v): (Session?, StreamInfo?, Bool, Bool) = lock.withLock {
            if let audio { _publishAudio = audio }
            if let video { _publishVideo = video }
            if let audio { _stream?.hasAudio = audio && settings.audioTrack }
            if let video { _stream?.hasVideo = video && engine.hasVideo }
            return (session, _stream, _publishAudio, _publishVideo)
        }
        mediaQueue.async { [engine] in engine.setSending(audio: a, video: v) }
        guard let s, let stream else { return }
        s.media.setOwnStream(stream.id, stream)
        try? s.updateStream(stream.id, hasAudio: audio.map { $0 && settings.audioTrack }, hasVideo: video.map { $0 && engine.hasVideo })
    }

    // MARK: session side

    /// The connection to the media router (routed sessions), on the session's executor.
    private var linkControl: PublisherLinkControl?

    /// Called between the start's acceptance and the rest of it (tests: a stop landing there).
    var afterAcceptForTesting: (() -> Void)?

    /// Starts capture and announces the stream (from `Session.publish`); `onAccepted` runs under the publisher's lock
    /// once the session may have it, before any message of the publish (not at all when refused); what it throws
    /// refuses the publish. A stop while this runs cancels it: it undoes what it made (its capture included) and
    /// throws 1015.
    func start(in session: Session, onAccepted: () throws -> Void) throws {
        let transform = try session.mediaTransform(configured: settings.frameTransform)
        try lock.withLock {
            try lock.start(refusal: OTError(.illegalState, "this publisher is already published"), onAccepted: onAccepted)
            self.session = session
        }
        afterAcceptForTesting?()
        engine.onRouterLink = { [weak self, weak session] event in
            guard let self, let session else { return }
            session.control { self.routerLink(event, session: session) }
        }
        engine.onStats = { [weak self] st in self?.deliver { $0.publisher($1, statsUpdated: st) } }
        observeDevices()
        do {
            try lock.throwIfCancelled()
            try mediaQueue.sync { try engine.start(audioDevice: settings.audioTrack ? audioDevice : nil, session: session, transform: transform) }
            let (a, v) = lock.withLock { (_publishAudio, _publishVideo) }
            mediaQueue.async { [engine] in engine.setSending(audio: a, video: v) }
            let req = PublishRequest(name: settings.name, hasAudio: settings.audioTrack && a, hasVideo: engine.hasVideo && v,
                                     videoType: settings.videoType.rawValue, width: engine.videoWidth, height: engine.videoHeight,
                                     audioFallbackEnabled: settings.audioFallbackEnabled)
            try lock.throwIfCancelled()
            try session.publishStream(req) { [weak self, weak session] result in
                guard let session else { return }
                guard let self else {
                    // Dropped before the answer: take the stream back.
                    if case .success(let st) = result { try? session.unpublishStream(st.id) }
                    return
                }
                published(result, requested: req, session: session)
            }
        } catch {
            end(notify: false)
            throw error
        }
        guard lock.withLock({ lock.started() }) else {
            end(notify: true)
            throw lock.cancelled
        }
    }

    /// Executor: the server's answer to the publish request.
    private func published(_ result: Result<StreamInfo, OTError>, requested: PublishRequest, session s: Session) {
        switch result {
        case .failure(let e):
            stop(notify: false)
            deliver(on: s) { $0.publisher($1, didFailWithError: e) }
        case .success(let stream):
            // A mute all is active: the server made the stream without audio. Audio stays off until the app turns it on.
            let muted = requested.hasAudio && !stream.hasAudio
            let current = lock.withLock { () -> Bool in
                guard lock.isActive, session === s else { return false }
                _stream = stream
                if muted { _publishAudio = false }
                return true
            }
            guard current else {
                // Unpublished before the server answered: withdraw the stream it made.
                try? s.unpublishStream(stream.id)
                return
            }
            if muted { mediaQueue.async { [engine, v = publishVideo] in engine.setSending(audio: false, video: v) } }
            s.media.setOwnStream(stream.id, stream)
            s.media.setOfferHandler { [weak self] m in self?.offerReceived(m) }
            mediaQueue.async { [engine] in engine.streamCreated(stream) }
            deliver(on: s) { $0.publisher($1, streamCreated: stream) }
            if muted { deliver(on: s) { $0.publisher($1, muteForced: true) } }
            if !s.isRelayed {
                s.onControl {
                    var c = PublisherLinkControl(peerIdBase: UUID().uuidString.lowercased())
                    let out = c.start(now: MonotonicClock.now())
                    linkControl = c
                    applyLink(out, session: s)
                }
            }
        }
    }

    /// Executor: what happened to the connection to the router.
    private func routerLink(_ event: RouterLinkEvent, session: Session) {
        guard var c = linkControl else { return }
        // While the session is disconnecting, the router lets go of the connection: that is the stream's end, not a failure.
        if case .connected = event {} else if session.status != .connected { return }
        var out: [PublisherLinkControl.Output] = []
        switch event {
        case .connected(let id): c.linkConnected(id)
        case .failed(let id, let err): out = c.linkFailed(id, err, now: MonotonicClock.now())
        case .refused(let id, let err): out = c.refused(id, err)
        }
        linkControl = c
        applyLink(out, session: session)
    }

    /// Executor: carries out the link control's decisions.
    private func applyLink(_ outputs: [PublisherLinkControl.Output], session: Session) {
        for o in outputs {
            switch o {
            case .open(let id):
                mediaQueue.async { [engine, weak session] in if let session { engine.openRouterLink(id, session: session) } }
            case .close(let id):
                mediaQueue.async { [engine] in engine.closeRouterLink(id) }
            case .failed(let err):
                // The seeds' publisher failure: the error, then the stream ends (others see it destroyed).
                deliver(on: session) { $0.publisher($1, didFailWithError: err) }
                stop(notify: true)
            }
        }
    }

    var controlDeadline: Instant? { linkControl?.nextDeadline }

    func controlTick(now: Instant, session: Session) {
        guard var c = linkControl else { return }
        let out = c.tick(now: now)
        linkControl = c
        applyLink(out, session: session)
    }

    private func offerReceived(_ m: ServerMessage) {
        guard case .mediaOffer(let peerId, let streamId, let direction, let sdp, let from) = m, let s = lock.withLock({ session }) else { return }
        mediaQueue.async { [engine] in
            engine.answer(peerId: peerId, streamId: streamId, direction: direction, sdp: sdp, subscriber: from, session: s)
        }
    }

    /// Withdraws the stream (from `Session.unpublish`, a disconnect or a failure); `streamDestroyed` follows when
    /// `notify`. The server hears of the unpublish before the media connections close, so subscribers see the stream
    /// destroyed, not an interruption. A publish starting on another thread is cancelled, and (unless called on the
    /// session's executor, which the start may be waiting for) this returns once it has undone itself.
    package func stop(notify: Bool) {
        guard lock.withLock({ lock.stop(wait: session?.isOnExecutor != true) }) else { return }
        end(notify: notify)
    }

    /// Undoes a start, or ends a publish: the router link, the session's hold, the stream, the capture; then the
    /// publisher is idle.
    private func end(notify: Bool) {
        let (s, stream): (Session?, StreamInfo?) = lock.withLock {
            deviceObservations = []
            defer { session = nil; _stream = nil }
            return (session, _stream)
        }
        if let s {
            s.onControl { linkControl = nil }
            s.media.setOfferHandler(nil)
            if let stream {
                s.media.setOwnStream(stream.id, nil)
                if notify, s.status == .connected { try? s.unpublishStream(stream.id) }
            }
            s.media.clearPublisher(self)
        }
        mediaQueue.sync { engine.stop() }
        lock.withLock { lock.ended() }
        if let stream, notify, let s {
            // Strong: the last message must reach the delegate even when the app dropped the publisher.
            s.deliver { [self] in delegate?.publisher(self, streamDestroyed: stream) }
            // This client's own subscribers of the stream end too (the server tells only the others).
            s.onControl { s.media.sessionEvent(.streamDestroyed(stream), session: s) }
        }
    }

    /// Executor: the session ended, or a moderator muted this stream (one stream, or a mute all not excluding it).
    func sessionEvent(_ e: SessionEvent, session: Session) {
        switch e {
        case .disconnected:
            stop(notify: true)
        case .muteForced(let info):
            guard let own = stream, info.mutes(streamId: own.id) else { return }
            // Stop sending audio (others already see hasAudio false).
            let (updated, v) = lock.withLock { () -> (StreamInfo?, Bool) in
                _publishAudio = false
                _stream?.hasAudio = false
                return (_stream, _publishVideo)
            }
            if let updated { session.media.setOwnStream(updated.id, updated) }
            mediaQueue.async { [engine] in engine.setSending(audio: false, video: v) }
            deliver(on: session) { $0.publisher($1, muteForced: true) }
        default:
            break
        }
    }

    /// Forwards the microphone's and the camera's failures to the delegate while published.
    private func observeDevices() {
        var observations: [DeviceObservation] = []
        if settings.audioTrack, let mic = audioDevice as? any DeviceErrorReporting {
            observations.append(mic.observeErrors { [weak self] e in
                if e.kind == .microphone { self?.deliver { $0.publisher($1, deviceFailed: e) } }
            })
        }
        if let camera = engine.capturer as? any DeviceErrorReporting {
            observations.append(camera.observeErrors { [weak self] e in
                if e.kind == .camera { self?.deliver { $0.publisher($1, deviceFailed: e) } }
            })
        }
        lock.withLock { deviceObservations = observations }
    }

    private func deliver(on s: Session? = nil, _ body: @escaping @Sendable (PublisherDelegate, Publisher) -> Void) {
        guard let s = s ?? lock.withLock({ session }) else { return }
        s.deliver { [self] in
            guard let d = delegate else { return }
            body(d, self)
        }
    }
}

extension Session {
    /// Publishes a stream (as `[OTSession publish:error:]`). Throws 1010 when not connected, 1500 when the role
    /// cannot publish or this session already has a publisher (one per session), 1015 when the publisher is
    /// published elsewhere (or its publish is still ending), or when it was unpublished on another thread (or the
    /// session ended) before this returned. `publisher(_:streamCreated:)` follows; asynchronous failures go to the publisher's delegate.
    public func publish(_ publisher: Publisher) throws { try publish(publisher, onAccepted: {}) }

    /// `publish(_:)` that runs `onAccepted` once this session would accept the publisher, under the publisher's lock,
    /// before any message of the publish (its capture's start included); a refused publish (any of the errors above)
    /// never runs it, and what it throws refuses the publish too. The C ABI moves the publisher's callbacks there (and
    /// refuses a publisher being deleted).
    package func publish(_ publisher: Publisher, onAccepted: () throws -> Void) throws {
        guard status == .connected else { throw OTError(.notConnected) }
        guard capabilities?.canPublish == true else { throw OTError(.unableToPublish, "this token's role cannot publish") }
        try media.setPublisher(publisher)
        do { try publisher.start(in: self, onAccepted: onAccepted) } catch {
            media.clearPublisher(publisher)
            throw error
        }
    }

    /// Stops publishing (as `[OTSession unpublish:error:]`); `publisher(_:streamDestroyed:)` follows.
    /// Throws 1113 when the publisher is not published in this session.
    public func unpublish(_ publisher: Publisher) throws {
        guard media.isPublisher(publisher) else { throw OTError(.publisherNotFound, "this publisher is not published in this session") }
        publisher.stop(notify: true)
    }
}
