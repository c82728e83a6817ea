import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTTransport
import OTWire

/// Why a subscriber's video was disabled or enabled (as OTSubscriberVideoEventReason).
public enum SubscriberVideoEventReason: Int32, Sendable {
    /// The publisher stopped or resumed sending video (`publishVideo`).
    case publisherPropertyChanged = 1
    /// This subscriber's `subscribeToVideo` changed.
    case subscriberPropertyChanged = 2
    /// The stream's quality changed: video is dropped under sustained loss, audio continues.
    case qualityChanged = 3
}

/// Settings of a `Subscriber`.
public struct SubscriberSettings: Sendable {
    /// Initial values of `subscribeToAudio` / `subscribeToVideo`.
    public var subscribeToAudio: Bool
    public var subscribeToVideo: Bool
    /// Mix this subscriber's audio into the session's audio device playout.
    public var playAudio: Bool
    /// Relayed sessions: drop video under sustained loss (`qualityLossThreshold` of packets for
    /// `qualityWindowSeconds`) and resume when loss stays below half the threshold as long; warning events come
    /// first. Needs the publisher's `audioFallbackEnabled` too. Routed sessions: the media router decides (with its
    /// own thresholds) and these three settings are not used.
    public var audioFallbackEnabled: Bool
    public var qualityLossThreshold: Double
    public var qualityWindowSeconds: Int
    /// Undoes the publisher's per-frame transform between jitter buffer and decoder (end-to-end encryption).
    public var frameTransform: any FrameTransform
    /// How long media may take to connect before `didFailWithError` with 1542.
    public var connectTimeout: Duration
    /// Drops received packets before the pipelines (tests of the quality fallback; not public API).
    var lossInjector: ReceiveLossInjector?

    public init(subscribeToAudio: Bool = true, subscribeToVideo: Bool = true, playAudio: Bool = true,
                audioFallbackEnabled: Bool = true, qualityLossThreshold: Double = 0.15, qualityWindowSeconds: Int = 3,
                frameTransform: any FrameTransform = IdentityFrameTransform(), connectTimeout: Duration = .seconds(15)) {
        self.subscribeToAudio = subscribeToAudio; self.subscribeToVideo = subscribeToVideo; self.playAudio = playAudio
        self.audioFallbackEnabled = audioFallbackEnabled; self.qualityLossThreshold = qualityLossThreshold
        self.qualityWindowSeconds = qualityWindowSeconds; self.frameTransform = frameTransform
        self.connectTimeout = connectTimeout
    }

    /// Checks the numbers (`qualityLossThreshold` in (0, 1), `qualityWindowSeconds` 1–60, `connectTimeout` 1 to
    /// 86400000 ms); throws `.invalidParameter` naming what is wrong. `Session.subscribe` calls it, and so does the C
    /// ABI, which passes `name` to give its own member names in the message.
    public func validate(naming name: (String) -> String = { $0 }) throws {
        guard qualityLossThreshold > 0, qualityLossThreshold < 1 else {
            throw OTError(.invalidParameter, "\(name("qualityLossThreshold")) \(qualityLossThreshold) is not in (0, 1)")
        }
        try SettingsRange.check(qualityWindowSeconds, 1...60, name("qualityWindowSeconds"))
        try SettingsRange.milliseconds(connectTimeout, 1...86_400_000, name("connectTimeout"))
    }
}

/// A subscriber's receive counters (as OTSubscriberKitVideoNetworkStats / AudioNetworkStats, merged).
public struct SubscriberStats: Sendable, Equatable {
    /// Wall-clock milliseconds since 1970 when taken.
    public var timestampMillis: Int64 = 0
    public var videoPacketsReceived = 0
    public var videoBytesReceived = 0
    public var videoPacketsLost = 0
    public var audioPacketsReceived = 0
    public var audioBytesReceived = 0
    public var audioPacketsLost = 0
    public var framesDecoded = 0
    public var framesDropped = 0
    public var freezeCount = 0
    public var totalFreezesDurationSeconds = 0.0
    /// Interarrival jitter (seconds) of the video and audio streams.
    public var videoJitter = 0.0
    public var audioJitter = 0.0
    public var framesPerSecond = 0.0
    public var videoBitrateBps = 0.0
    public var frameWidth = 0
    public var frameHeight = 0
    public var roundTripTimeMillis: Double?
    public init() {}
}

/// Messages a `Subscriber` sends to its delegate. Frame and audio callbacks run on the subscriber's media
/// thread (return quickly, copy what you keep); every other message runs on the session's `apiQueue`, in order with
/// the session's messages. Every method has an empty default.
///
/// As the seeds define them: `subscriberDidDisconnect(fromStream:)` and `subscriberDidReconnect(toStream:)` only frame
/// a temporary interruption. The subscription's end is not a subscriber message: the app's own `unsubscribe`, the
/// session's `streamDestroyed` (the publisher left, or the subscription could not be re-established within
/// `connectTimeout`) or `sessionDidDisconnect`.
public protocol SubscriberDelegate: AnyObject {
    /// Media flows (as `subscriberDidConnectToStream:`).
    func subscriberDidConnect(toStream subscriber: Subscriber)
    /// Media stopped for a while (as `subscriberDidDisconnectFromStream:`): this subscriber's connection failed and is
    /// being re-established, or (routed sessions) the publisher's connection to the media router dropped.
    /// `subscriberDidReconnect(toStream:)` follows when media flows again; if it cannot, the session reports the stream
    /// destroyed.
    func subscriberDidDisconnect(fromStream subscriber: Subscriber)
    /// Media flows again after an interruption (as `subscriberDidReconnectToStream:`).
    func subscriberDidReconnect(toStream subscriber: Subscriber)
    /// The first media connection failed (1600; 1542 when it did not connect within `connectTimeout`; 1604 when the
    /// server does not know the stream), or the stream cannot be decrypted (1620).
    func subscriber(_ subscriber: Subscriber, didFailWithError error: OTError)
    func subscriber(_ subscriber: Subscriber, videoDisabledWithReason reason: SubscriberVideoEventReason)
    func subscriber(_ subscriber: Subscriber, videoEnabledWithReason reason: SubscriberVideoEventReason)
    /// Loss is high: video may be dropped soon (quality). / Conditions recovered.
    func subscriberVideoDisableWarning(_ subscriber: Subscriber)
    func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber)
    /// A decoded frame (I420 with strides; `timestampMicros` from the stream's RTP clock). Media thread.
    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame)
    /// The encoded VP8 frame (frame transform undone) behind each decoded picture, lent just before the picture goes
    /// to `didReceiveVideoFrame`: the bytes are valid only during the call (for recording, e.g. with `IVFWriter`). Media thread.
    func subscriber(_ subscriber: Subscriber, didReceiveEncodedVideoFrame frame: UnsafeRawBufferPointer, info: EncodedFrameInfo)
    /// 20 ms of decoded interleaved PCM. Media thread.
    func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame)
    /// Receive counters, about once a second while subscribed.
    func subscriber(_ subscriber: Subscriber, statsUpdated stats: SubscriberStats)
}

extension SubscriberDelegate {
    public func subscriberDidConnect(toStream subscriber: Subscriber) {}
    public func subscriberDidDisconnect(fromStream subscriber: Subscriber) {}
    public func subscriberDidReconnect(toStream subscriber: Subscriber) {}
    public func subscriber(_ subscriber: Subscriber, didFailWithError error: OTError) {}
    public func subscriber(_ subscriber: Subscriber, videoDisabledWithReason reason: SubscriberVideoEventReason) {}
    public func subscriber(_ subscriber: Subscriber, videoEnabledWithReason reason: SubscriberVideoEventReason) {}
    public func subscriberVideoDisableWarning(_ subscriber: Subscriber) {}
    public func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber) {}
    public func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {}
    public func subscriber(_ subscriber: Subscriber, didReceiveEncodedVideoFrame frame: UnsafeRawBufferPointer, info: EncodedFrameInfo) {}
    public func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame) {}
    public func subscriber(_ subscriber: Subscriber, statsUpdated stats: SubscriberStats) {}
}

/// Receives one stream (as OTSubscriberKit): `Session.subscribe(_:)`, `Session.unsubscribe(_:)`. One peer
/// connection (to the media router, or to the publisher in relayed sessions); video through a jitter buffer and
/// VP8 decoder to `didReceiveVideoFrame`, audio through a jitter buffer and Opus decoder to `didReceiveAudio` and
/// the session's audio playout. Thread-safe.
public final class Subscriber: SessionMediaClient, MediaSignalingPeer, @unchecked Sendable {
    /// The stream subscribed to (kept current with its property changes).
    public var stream: StreamInfo { lock.withLock { _stream } }
    public let settings: SubscriberSettings

    private let lock = StartStopLock(cancelled: "the subscription was ended while it started")
    private weak var _delegate: SubscriberDelegate?
    private var _stream: StreamInfo
    private weak var session: Session?
    private var _subscribeToAudio: Bool
    private var _subscribeToVideo: Bool
    private var _lastStats = SubscriberStats()
    private var lastStats: SubscriberStats { lock.withLock { _lastStats } }
    let mediaQueue = DispatchQueue(label: "otsession.subscriber.media")
    private let onMediaQueue = DispatchSpecificKey<Bool>()
    private var engine: SubscriberEngine?

    /// Runs `body` on the media queue, inline when already there (a frame callback asking for stats).
    private func onMedia<T>(_ body: () throws -> T) rethrows -> T {
        DispatchQueue.getSpecific(key: onMediaQueue) == true ? try body() : try mediaQueue.sync(execute: body)
    }

    /// A subscriber for `stream` (from `session(_:streamCreated:)` or `Session.streams`).
    public init(stream: StreamInfo, delegate: SubscriberDelegate?, settings: SubscriberSettings = SubscriberSettings()) {
        _stream = stream
        _delegate = delegate
        self.settings = settings
        _subscribeToAudio = settings.subscribeToAudio
        _subscribeToVideo = settings.subscribeToVideo
        mediaQueue.setSpecific(key: onMediaQueue, value: true)
    }

    public var delegate: SubscriberDelegate? {
        get { lock.withLock { _delegate } }
        set { lock.withLock { _delegate = newValue } }
    }

    /// Whether audio is received and played; the publisher (or router) is told.
    public var subscribeToAudio: Bool {
        get { lock.withLock { _subscribeToAudio } }
        set {
            let e = lock.withLock { () -> SubscriberEngine? in _subscribeToAudio = newValue; return engine }
            mediaQueue.async { e?.setWants(audio: newValue, video: nil) }
        }
    }

    /// Whether video is received; a change gives video disabled/enabled with `.subscriberPropertyChanged`.
    public var subscribeToVideo: Bool {
        get { lock.withLock { _subscribeToVideo } }
        set {
            let e = lock.withLock { () -> SubscriberEngine? in _subscribeToVideo = newValue; return engine }
            mediaQueue.async { e?.setWants(audio: nil, video: newValue) }
        }
    }

    /// True while media flows: from `subscriberDidConnect(toStream:)` to the end of the subscription, except between
    /// an interruption's `subscriberDidDisconnect(fromStream:)` and `subscriberDidReconnect(toStream:)`.
    public var isConnected: Bool { lock.withLock { session }?.onControl { control?.isConnected } ?? false }

    /// The current media connection's peer id and how many times media was reconnected (tests).
    var mediaPeerId: String? { lock.withLock { session }?.onControl { control?.peerId } ?? nil }
    var mediaReconnections: Int { lock.withLock { session }?.onControl { control?.reconnections } ?? 0 }

    /// Receive counters now.
    public var stats: SubscriberStats { let e = lock.withLock { engine }; return onMedia { e?.currentStats() ?? lastStats } }

    /// The W3C-named RTC stats report (JSON array of `inbound-rtp` objects).
    public func rtcStatsReport() -> String { let e = lock.withLock { engine }; return onMedia { e?.rtcStatsReport() ?? "[]" } }

    // MARK: session side

    /// The subscription's control (`SubscriberControl`), on the session's executor.
    private var control: SubscriberControl?

    /// Called between the start's acceptance and the rest of it (tests: a stop landing there).
    var afterAcceptForTesting: (() -> Void)?

    /// Starts the subscription in `session`; `onAccepted` runs under the subscriber's lock once the session may have it,
    /// before any message of the subscription (not at all when refused); what it throws refuses the subscribe. A stop
    /// while this runs cancels it: it undoes what it made and throws 1015.
    func start(in session: Session, onAccepted: () throws -> Void) throws {
        try settings.validate()
        let transform = try session.mediaTransform(configured: settings.frameTransform)
        let (a, v, stream) = try lock.withLock { () -> (Bool, Bool, StreamInfo) in
            try lock.start(refusal: OTError(.illegalState, "this subscriber is already subscribed"), onAccepted: onAccepted)
            self.session = session
            return (_subscribeToAudio, _subscribeToVideo, _stream)
        }
        afterAcceptForTesting?()
        session.media.attach(self)
        let e = SubscriberEngine(subscriber: self, session: session, stream: stream, settings: settings, queue: mediaQueue)
        e.onLink = { [weak self, weak session] event in
            guard let self, let session else { return }
            session.control { self.linkEvent(event, session: session) }
        }
        lock.withLock { engine = e }
        do {
            try mediaQueue.sync { try e.start(audio: a, video: v, transform: transform) }
            // The first connection is made here, so that its errors (e.g. a relay policy without TURN) throw.
            try session.onControl {
                try lock.throwIfCancelled()
                var c = SubscriberControl(peerIdBase: UUID().uuidString.lowercased(), connectTimeout: settings.connectTimeout)
                let out = c.start(now: MonotonicClock.now())
                guard case .open(let pid)? = out.first else { return }
                session.media.register(peerId: pid, self)
                do { try mediaQueue.sync { try e.openLink(pid, restart: false) } } catch {
                    session.media.unregister(peerId: pid)
                    throw error
                }
                control = c
            }
        } catch {
            end(lock.withLock { taken() })
            throw error
        }
        if let cancelled = lock.withLock({ lock.started() ? nil : taken() }) {
            end(cancelled)
            throw lock.cancelled
        }
    }

    /// Ends the subscription (the app's unsubscribe, the stream's end, the session's end): no delegate message. One
    /// that is starting on another thread is cancelled, and (unless called on the session's executor or the media
    /// queue, which the start may be waiting for) this returns once it has undone itself.
    package func stop() {
        let wait = DispatchQueue.getSpecific(key: onMediaQueue) != true
        if let ending = lock.withLock({ lock.stop(wait: wait && session?.isOnExecutor != true) ? taken() : nil }) { end(ending) }
    }

    /// Lock held: the engine and session of the subscription being ended, taken from the subscriber (no media
    /// signaling, message or stats reach it any more).
    private func taken() -> (engine: SubscriberEngine?, session: Session?) {
        defer { engine = nil; session = nil }
        return (engine, session)
    }

    /// Undoes a start, or ends a subscription (what `taken` took): its control machine and peer connection, its
    /// engine, its place in the session; then the subscriber is idle.
    private func end(_ ending: (engine: SubscriberEngine?, session: Session?)) {
        let (e, s) = ending
        s?.onControl {
            if var c = control {
                _ = c.stop()
                if let pid = c.peerId { s?.media.unregister(peerId: pid) }
            }
            control = nil
        }
        let final = e.map { e in onMedia { e.stop() } }
        s?.media.detach(self)
        lock.withLock {
            if let final { _lastStats = final }
            lock.ended()
        }
    }

    /// Executor: the server's media signaling for our peer connection.
    func mediaSignal(_ message: ServerMessage) {
        guard let s = lock.withLock({ session }) else { return }
        let ending = s.status != .connected
        switch message {
        case .mediaClose(let pid, "refused", let message):
            // The relayed publisher refused the offer (no video codec in common): as the media router's refusal.
            offerRefused(pid, OTError(.invalidParameter, message ?? "the publisher refused the subscriber's offer"))
        case .mediaClose(let pid, let reason, _):
            // A destroyed stream or a departed client is reported by the session's own events; while the session is
            // disconnecting, connections close on their way out: its end, not an interruption.
            guard reason != "streamDestroyed" && reason != "connectionGone", !ending else { return }
            controlInput(s) { $0.linkFailed(pid, OTError(.subscriberWebRTC, "the other side closed the media connection (\(reason))"), now: $1) }
        case .publisherMedia(let pid, let state):
            guard !ending else { return }
            controlInput(s) { $0.publisherMedia(pid, state, now: $1) }
        default:
            lock.withLock { engine }?.mediaSignal(message)
        }
    }

    /// Executor: the server refused the offer of peer connection `pid`.
    func offerRefused(_ pid: String, _ error: OTError) {
        guard let s = lock.withLock({ session }) else { return }
        controlInput(s) { $0.offerRefused(pid, error, now: $1) }
    }

    /// Executor: what became of our peer connection.
    private func linkEvent(_ event: SubscriberLinkEvent, session s: Session) {
        switch event {
        case .connected(let pid): controlInput(s) { $0.linkConnected(pid, now: $1) }
        case .failed(let pid, let err) where s.status == .connected: controlInput(s) { $0.linkFailed(pid, err, now: $1) }
        case .failed: break  // the session is ending: not an interruption
        }
    }

    var controlDeadline: Instant? { control?.nextDeadline }

    func controlTick(now: Instant, session: Session) {
        controlInput(session, now: now) { $0.tick(now: $1) }
    }

    /// Executor: one input to the control machine, and its decisions carried out.
    private func controlInput(_ s: Session, now: Instant = MonotonicClock.now(),
                              _ input: (inout SubscriberControl, Instant) -> [SubscriberControl.Output]) {
        // Inline on the executor; then the session re-arms its timer for the machine's next deadline.
        s.onControl { apply(s, now: now, input) }
    }

    private func apply(_ s: Session, now: Instant, _ input: (inout SubscriberControl, Instant) -> [SubscriberControl.Output]) {
        guard var c = control else { return }
        let out = input(&c, now)
        control = c
        let e = lock.withLock { engine }
        for o in out {
            switch o {
            case .open(let pid):
                s.media.register(peerId: pid, self)
                mediaQueue.async { e?.reopenLink(pid) }
            case .close(let pid):
                s.media.unregister(peerId: pid)
                mediaQueue.async { e?.closeLink(pid) }
            case .requestKeyframe:
                mediaQueue.async { e?.requestKeyframe() }
            case .event(.connected):
                deliver(on: s) { $0.subscriberDidConnect(toStream: $1) }
            case .event(.disconnected):
                deliver(on: s) { $0.subscriberDidDisconnect(fromStream: $1) }
            case .event(.reconnected):
                deliver(on: s) { $0.subscriberDidReconnect(toStream: $1) }
            case .event(.failed(let err)):
                deliver(on: s) { $0.subscriber($1, didFailWithError: err) }
            case .event(.streamLost):
                Log.info("subscriber", "stream \(stream.id): the subscription could not be re-established within \(settings.connectTimeout)")
                s.streamLost(stream.id)
            }
        }
    }

    /// Executor: the session ended or the stream went away (the subscription ends), or the stream changed.
    func sessionEvent(_ ev: SessionEvent, session: Session) {
        switch ev {
        case .disconnected:
            stop()
        case .streamDestroyed(let s) where s.id == stream.id:
            stop()
        case .streamChanged(let s, let change) where s.id == stream.id:
            let e = lock.withLock { () -> SubscriberEngine? in _stream = s; return engine }
            if case .hasVideo(let v) = change { mediaQueue.async { e?.publisherVideo(v) } }
        default:
            break
        }
    }

    /// Runs a delegate message on the session's `apiQueue`.
    func deliver(on s: Session? = nil, _ body: @escaping @Sendable (SubscriberDelegate, Subscriber) -> Void) {
        guard let s = s ?? lock.withLock({ session }) else { return }
        s.deliver { [self] in
            guard let d = delegate else { return }
            body(d, self)
        }
    }

    /// Calls the delegate on the current (media) thread.
    func deliverMedia(_ body: (SubscriberDelegate, Subscriber) -> Void) {
        guard let d = delegate else { return }
        body(d, self)
    }
}

/// Drops every `everyNth` received RTP packet (0: none), as sustained loss would. For tests.
final class ReceiveLossInjector: @unchecked Sendable {
    private let lock = Lock()
    private var _everyNth = 0
    private var count = 0
    var everyNth: Int {
        get { lock.withLock { _everyNth } }
        set { lock.withLock { _everyNth = newValue } }
    }
    func shouldDrop() -> Bool {
        lock.withLock {
            guard _everyNth > 0 else { return false }
            count += 1
            return count % _everyNth == 0
        }
    }
}

extension Session {
    /// Starts subscribing (as `[OTSession subscribe:error:]`). Throws 1010 when not connected, 1535 when the role
    /// cannot subscribe, 1604 when the stream is not in this session (a stream of another session included),
    /// 1015 when the subscriber is already subscribed (or its subscription is still ending), or when it was unsubscribed
    /// on another thread (or the stream or session ended) before this returned, 1011 when its settings are out of range.
    /// `subscriberDidConnect(toStream:)` follows; asynchronous failures go to the subscriber's delegate.
    public func subscribe(_ subscriber: Subscriber) throws { try subscribe(subscriber, onAccepted: {}) }

    /// `subscribe(_:)` that runs `onAccepted` once this session would accept the subscriber, under the subscriber's
    /// lock, before any message of the subscription; a refused subscribe (any of the errors above) never runs it, and
    /// leaves a subscription the subscriber has elsewhere as it was; what `onAccepted` throws refuses the subscribe
    /// too. The C ABI moves the subscriber's callbacks there (and refuses a subscriber being deleted).
    package func subscribe(_ subscriber: Subscriber, onAccepted: () throws -> Void) throws {
        guard status == .connected else { throw OTError(.notConnected) }
        guard capabilities?.canSubscribe == true else { throw OTError(.forceUnpublishOrInvalidStream, "this token's role cannot subscribe") }
        let id = subscriber.stream.id
        guard streams[id] != nil || media.isOwnStream(id) else {
            throw OTError(.serverCannotFindStream, "stream \(id) is not in this session")
        }
        try subscriber.start(in: self, onAccepted: onAccepted)
    }

    /// Ends a subscription (as `[OTSession unsubscribe:error:]`): no subscriber message follows (the subscription is
    /// over when this returns). Throws 1112 when the subscriber is not subscribed in this session.
    public func unsubscribe(_ subscriber: Subscriber) throws {
        guard media.isAttached(subscriber) else { throw OTError(.subscriberNotFound, "this subscriber is not subscribed in this session") }
        subscriber.stop()
    }

    /// The device subscribers' audio plays on (default: a `HeadlessAudioDevice` that discards it). Set it before
    /// subscribing: changing it while audio plays throws 1015.
    public var audioDevice: any AudioDevice { media.audioDevice }

    /// Sets the playout device (see `audioDevice`), for example a `PulseAudioDevice` playing to a speaker; its
    /// failures come to `session(_:deviceFailed:)`.
    public func setAudioDevice(_ device: any AudioDevice) throws {
        try media.setAudioDevice(device) { [weak self] e in
            guard let self, e.kind == .speaker else { return }
            deliver { [self] in delegate?.session(self, deviceFailed: e) }
        }
    }
}
