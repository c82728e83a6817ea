import COTABI
import OTBase
import OTMedia
import OTSession
import Synchronization

/// The object behind an `ot_subscriber *`: the Swift Subscriber, its C callbacks, and the session it subscribes in (its
/// callbacks go where that session's go, in one order; deleting the subscriber ends the subscription there).
final class SubscriberObject: @unchecked Sendable {
    let subscriber: Subscriber
    let owner = CallbackOwner()
    let callbacks: ot_subscriber_callbacks
    /// Where its callbacks go (the sink of the session it was last subscribed in), whether the stream is this client's
    /// own (known once subscribed), and whether it is being deleted (then no subscribe is accepted: one in flight on
    /// another thread is refused).
    private let attached = Mutex<(sink: CallbackSink?, own: Bool, closed: Bool)>((nil, false, false))
    private let adapter: SubscriberAdapter
    private let handleBits = Atomic<UInt>(0)

    init(stream: StreamInfo, settings: SubscriberSettings, callbacks: ot_subscriber_callbacks) {
        self.callbacks = callbacks
        subscriber = Subscriber(stream: stream, delegate: nil, settings: settings)
        adapter = SubscriberAdapter()
        adapter.owner = self
        subscriber.delegate = adapter
        handleBits.store(HandleRegistry.shared.insert(self), ordering: .releasing)
    }

    var handle: UnsafeMutablePointer<ot_subscriber>? { Handle.pointer(handleBits.load(ordering: .acquiring), as: ot_subscriber.self) }
    var sink: CallbackSink? { attached.withLock { $0.sink } }

    /// Whether a callback queued on `sink` still belongs there: the subscriber is still in that session. Its callbacks
    /// queued in a session it has left (ot_session_unsubscribe, or a subscribe into another) are dropped: no
    /// subscriber callback follows ot_session_unsubscribe.
    func isAttached(to sink: CallbackSink) -> Bool { attached.withLock { $0.sink === sink } }

    /// After ot_session_unsubscribe from `session`: its callbacks still queued there are dropped.
    func detach(from session: SessionObject) { attached.withLock { if $0.sink === session.sink { $0.sink = nil } } }

    /// Subscribes in `session`; once the session has accepted (a refused subscribe leaves everything as it was), the
    /// callbacks go where the session's go, before any callback of the new subscription. A subscribe that the delete
    /// cancels while it starts is refused as one the delete came before (OT_ERR_INVALID_HANDLE).
    func subscribe(in session: SessionObject) throws {
        let own = session.session.isOwn(subscriber.stream)
        let deleting = OTError(.invalidHandle, "the subscriber is being deleted")
        do {
            try session.session.subscribe(subscriber) {
                try attached.withLock { a in
                    guard !a.closed else { throw deleting }
                    a = (session.sink, own, false)
                }
            }
        } catch where attached.withLock({ $0.closed }) {
            throw deleting
        }
    }

    /// The stream as a handle's object.
    func streamObject() -> StreamObject { StreamObject(subscriber.stream, own: attached.withLock { $0.own }) }

    /// Ends the subscription if it goes on or is starting (its receive pipelines and peer connection with it: nothing
    /// else could end it once the handle is gone; a subscribe accepted on another thread is cancelled and undone before
    /// this returns), and stops callbacks (waiting for the one in flight).
    func close() {
        subscriber.delegate = nil
        attached.withLock { $0.closed = true }
        subscriber.stop()
        owner.close()
    }
}

/// Forwards the Swift subscriber delegate messages to the C callbacks, where its session's callbacks go.
private final class SubscriberAdapter: SubscriberDelegate, @unchecked Sendable {
    weak var owner: SubscriberObject?

    private func post(_ body: @escaping @Sendable (SubscriberObject, ot_subscriber_callbacks) -> Void) {
        guard let o = owner, let sink = CallbackSink.sinkForCallbackRaisedNow(attached: o.sink) else { return }
        sink.post(o.owner) { if o.isAttached(to: sink) { body(o, o.callbacks) } }
    }
    func subscriberDidConnect(toStream subscriber: Subscriber) {
        post { o, cb in withBorrowedHandle(o.streamObject(), as: ot_stream.self) { cb.on_connected?(o.handle, cb.user_data, $0) } }
    }
    func subscriberDidDisconnect(fromStream subscriber: Subscriber) {
        post { o, cb in cb.on_disconnected?(o.handle, cb.user_data) }
    }
    func subscriberDidReconnect(toStream subscriber: Subscriber) {
        post { o, cb in cb.on_reconnected?(o.handle, cb.user_data) }
    }
    func subscriber(_ subscriber: Subscriber, didFailWithError error: OTError) {
        post { o, cb in error.message.withCString { cb.on_error?(o.handle, cb.user_data, ot_status(error.code.rawValue), $0) } }
    }
    func subscriber(_ subscriber: Subscriber, videoDisabledWithReason reason: SubscriberVideoEventReason) {
        post { o, cb in cb.on_video_disabled?(o.handle, cb.user_data, reason.rawValue) }
    }
    func subscriber(_ subscriber: Subscriber, videoEnabledWithReason reason: SubscriberVideoEventReason) {
        post { o, cb in cb.on_video_enabled?(o.handle, cb.user_data, reason.rawValue) }
    }
    func subscriberVideoDisableWarning(_ subscriber: Subscriber) {
        post { o, cb in cb.on_video_disable_warning?(o.handle, cb.user_data) }
    }
    func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber) {
        post { o, cb in cb.on_video_disable_warning_lifted?(o.handle, cb.user_data) }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {
        guard owner?.callbacks.on_render_frame != nil else { return }
        post { o, cb in withBorrowedHandle(VideoFrameObject(frame), as: ot_video_frame.self) { cb.on_render_frame?(o.handle, cb.user_data, $0) } }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame) {
        guard owner?.callbacks.on_audio_data != nil else { return }
        post { o, cb in
            audio.samples.withUnsafeBufferPointer { p in
                cb.on_audio_data?(o.handle, cb.user_data, p.baseAddress, audio.frameCount, Int32(audio.sampleRate), Int32(audio.channels))
            }
        }
    }
    func subscriber(_ subscriber: Subscriber, statsUpdated stats: SubscriberStats) {
        post { o, cb in
            var c = cStats(stats)
            cb.on_stats?(o.handle, cb.user_data, &c)
        }
    }
}

private func cStats(_ s: SubscriberStats) -> ot_subscriber_stats {
    ot_subscriber_stats(timestamp_ms: s.timestampMillis, video_packets_received: Int64(s.videoPacketsReceived),
                        video_bytes_received: Int64(s.videoBytesReceived), video_packets_lost: Int64(s.videoPacketsLost),
                        audio_packets_received: Int64(s.audioPacketsReceived), audio_bytes_received: Int64(s.audioBytesReceived),
                        audio_packets_lost: Int64(s.audioPacketsLost), frames_decoded: Int64(s.framesDecoded),
                        frames_dropped: Int64(s.framesDropped), freeze_count: Int64(s.freezeCount),
                        frames_per_second: s.framesPerSecond, video_bitrate_bps: s.videoBitrateBps,
                        frame_width: Int32(clamping: s.frameWidth), frame_height: Int32(clamping: s.frameHeight),
                        round_trip_time_ms: s.roundTripTimeMillis ?? -1)
}

private func withSubscriber(_ p: UnsafeMutablePointer<ot_subscriber>?, _ body: (SubscriberObject) throws -> ot_status) -> ot_status {
    withObject(UnsafePointer(p), as: SubscriberObject.self, body)
}

/// Creates a subscriber for a stream (a borrowed stream from on_stream_created, or a copy); NULL for a bad
/// stream handle or NULL callbacks. Nothing is received until ot_session_subscribe.
@c(ot_subscriber_new) public func ot_subscriber_new(_ stream: UnsafePointer<ot_stream>?,
                                                    _ callbacks: UnsafePointer<ot_subscriber_callbacks>?) -> UnsafeMutablePointer<ot_subscriber>? {
    ot_subscriber_new_with_settings(stream, nil, callbacks)
}

/// Fills `settings` with the defaults: audio and video subscribed and played, relayed audio fallback at 15% loss for
/// 3 s, 15 s to connect.
@c(ot_subscriber_settings_default) public func ot_subscriber_settings_default(_ settings: UnsafeMutablePointer<ot_subscriber_settings>?) -> ot_status {
    guard let settings else { return Status.invalidParam }
    let d = SubscriberSettings()
    settings.pointee = ot_subscriber_settings(subscribe_to_audio: 1, subscribe_to_video: 1, play_audio: 1, audio_fallback_enabled: 1,
                                              quality_loss_threshold: d.qualityLossThreshold,
                                              quality_window_seconds: Int32(d.qualityWindowSeconds),
                                              connect_timeout_ms: d.connectTimeout.microseconds / 1000)
    return Status.ok
}

/// The Swift settings described by C settings, checked by `SubscriberSettings.validate`, or why not (naming the C member).
private func subscriberSettings(_ c: ot_subscriber_settings) -> Result<SubscriberSettings, OTError> {
    let s = SubscriberSettings(subscribeToAudio: c.subscribe_to_audio != 0, subscribeToVideo: c.subscribe_to_video != 0,
                               playAudio: c.play_audio != 0, audioFallbackEnabled: c.audio_fallback_enabled != 0,
                               qualityLossThreshold: c.quality_loss_threshold, qualityWindowSeconds: Int(c.quality_window_seconds),
                               connectTimeout: .milliseconds(c.connect_timeout_ms))
    do { try s.validate(naming: CMemberNames.of) } catch { return .failure(error as? OTError ?? OTError(.invalidParameter, "\(error)")) }
    return .success(s)
}

/// ot_subscriber_new with settings (NULL: the defaults); NULL also for settings out of range (logged).
@c(ot_subscriber_new_with_settings) public func ot_subscriber_new_with_settings(
    _ stream: UnsafePointer<ot_stream>?, _ settings: UnsafePointer<ot_subscriber_settings>?,
    _ callbacks: UnsafePointer<ot_subscriber_callbacks>?
) -> UnsafeMutablePointer<ot_subscriber>? {
    guard let callbacks, let s = streamObject(stream) else { return nil }
    var swiftSettings = SubscriberSettings()
    if let settings {
        switch subscriberSettings(settings.pointee) {
        case .success(let v): swiftSettings = v
        case .failure(let e): Log.warn("capi", "ot_subscriber_new_with_settings: \(e.message)"); return nil
        }
    }
    return SubscriberObject(stream: s.info, settings: swiftSettings, callbacks: callbacks.pointee).handle
}

/// The subscriber's stream as it is now (its property changes included) into `stream`: a copy the caller releases
/// with ot_stream_delete.
@c(ot_subscriber_get_stream) public func ot_subscriber_get_stream(_ subscriber: UnsafeMutablePointer<ot_subscriber>?,
                                                                _ stream: UnsafeMutablePointer<UnsafeMutablePointer<ot_stream>?>?) -> ot_status {
    withSubscriber(subscriber) { s in
        guard let stream else { return Status.invalidParam }
        stream.pointee = Handle.pointer(HandleRegistry.shared.insert(s.streamObject()), as: ot_stream.self)
        return Status.ok
    }
}

/// Deletes a subscriber: ends its subscription if it is subscribed (as ot_session_unsubscribe: its media connection
/// closes and the publisher, or the media router, stops sending to it), waits for its callback in flight (unless
/// called from inside one); no callback of it fires after this returns.
@c(ot_subscriber_delete) public func ot_subscriber_delete(_ subscriber: UnsafeMutablePointer<ot_subscriber>?) -> ot_status {
    deleteObject(subscriber, as: SubscriberObject.self) { $0.close() }
}

/// Starts receiving the subscriber's stream; on_connected follows. OT_ERR_NOT_CONNECTED, OT_ERR_SERVER_CANNOT_FIND_STREAM
/// (not in this session), OT_ERR_FORCE_UNPUBLISH_OR_INVALID_STREAM (role), OT_ERR_ILLEGAL_STATE (already subscribed),
/// OT_ERR_INVALID_HANDLE (the subscriber is deleted meanwhile: nothing is left running). From now on the subscriber's callbacks come where the session's do, in one order with them.
@c(ot_session_subscribe) public func ot_session_subscribe(_ session: UnsafeMutablePointer<ot_session>?,
                                                          _ subscriber: UnsafeMutablePointer<ot_subscriber>?) -> ot_status {
    withSession(session, and: subscriber, as: SubscriberObject.self) { s, sub in try sub.subscribe(in: s) }
}

/// Ends a subscription (no subscriber callback follows: the subscription is over when this returns).
/// OT_ERR_SUBSCRIBER_NOT_FOUND when not subscribed in this session.
@c(ot_session_unsubscribe) public func ot_session_unsubscribe(_ session: UnsafeMutablePointer<ot_session>?,
                                                              _ subscriber: UnsafeMutablePointer<ot_subscriber>?) -> ot_status {
    withSession(session, and: subscriber, as: SubscriberObject.self) { s, sub in
        try s.session.unsubscribe(sub.subscriber)
        sub.detach(from: s)
    }
}

/// Starts or stops receiving audio.
@c(ot_subscriber_set_subscribe_to_audio) public func ot_subscriber_set_subscribe_to_audio(_ subscriber: UnsafeMutablePointer<ot_subscriber>?,
                                                                                        _ on: ot_bool) -> ot_status {
    withSubscriber(subscriber) { s in s.subscriber.subscribeToAudio = on != 0; return Status.ok }
}

/// Starts or stops receiving video; on_video_disabled / on_video_enabled follow with OT_VIDEO_REASON_SUBSCRIBE_TO_VIDEO.
@c(ot_subscriber_set_subscribe_to_video) public func ot_subscriber_set_subscribe_to_video(_ subscriber: UnsafeMutablePointer<ot_subscriber>?,
                                                                                        _ on: ot_bool) -> ot_status {
    withSubscriber(subscriber) { s in s.subscriber.subscribeToVideo = on != 0; return Status.ok }
}

/// The subscriber's receiving counters now.
@c(ot_subscriber_get_stats) public func ot_subscriber_get_stats(_ subscriber: UnsafeMutablePointer<ot_subscriber>?,
                                                                _ stats: UnsafeMutablePointer<ot_subscriber_stats>?) -> ot_status {
    withSubscriber(subscriber) { s in
        guard let stats else { return Status.invalidParam }
        stats.pointee = cStats(s.subscriber.stats)
        return Status.ok
    }
}

/// Copies the W3C-named RTC stats report (JSON) into `buf`; OT_ERR_BUFFER_TOO_SMALL when it does not fit.
@c(ot_subscriber_get_rtc_stats_report) public func ot_subscriber_get_rtc_stats_report(_ subscriber: UnsafeMutablePointer<ot_subscriber>?,
                                                                                    _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withSubscriber(subscriber) { s in CArg.copy(s.subscriber.rtcStatsReport(), to: buf, size: size) }
}
