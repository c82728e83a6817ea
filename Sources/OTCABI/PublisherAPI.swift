import COTABI
import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTSession
import Synchronization

/// The object behind an `ot_publisher *`: the Swift Publisher, its C callbacks, the custom capturer or audio device that
/// C code pushes into, and the session it is published in (its callbacks go where that session's go, in one order).
final class PublisherObject: @unchecked Sendable {
    let publisher: Publisher
    let owner = CallbackOwner()
    let callbacks: ot_publisher_callbacks
    /// Where its callbacks go (the sink of the session it was last published in), and whether it is being deleted (then
    /// no publish is accepted: one in flight on another thread is refused).
    private let attached = Mutex<(sink: CallbackSink?, closed: Bool)>((nil, false))
    let capturer: CallbackVideoCapturer?
    let customAudio: CustomAudioDevice?
    private let adapter: PublisherAdapter
    private let handleBits = Atomic<UInt>(0)

    init(settings: ot_publisher_settings, callbacks: ot_publisher_callbacks) throws {
        self.callbacks = callbacks
        var s = PublisherSettings(name: CArg.string(settings.name) ?? "")
        s.width = Int(settings.width); s.height = Int(settings.height); s.fps = Int(settings.fps)
        s.maxBitrateKbps = Int(settings.max_bitrate_kbps)
        s.startBitrateKbps = Int(settings.start_bitrate_kbps)
        s.minBitrateKbps = Int(settings.min_bitrate_kbps)
        s.audioBitrateBps = Int(settings.audio_bitrate_bps)
        // The numbers, before a capturer is made of them (Publisher.init checks all again once the sources are set).
        try s.validate(naming: CMemberNames.of)
        s.publishAudio = settings.publish_audio != 0
        s.publishVideo = settings.publish_video != 0
        s.audioFallbackEnabled = settings.audio_fallback_enabled != 0
        if settings.preferred_video_codecs != nil {
            guard let list = CArg.string(settings.preferred_video_codecs) else {
                throw OTError(.invalidParameter, "preferred_video_codecs is not UTF-8")
            }
            s.preferredVideoCodecs = try list.split(separator: ",").map { name in
                let n = String(name.filter { !$0.isWhitespace })
                guard let c = VideoCodecType(name: n) else { throw OTError(.invalidParameter, "unknown video codec \(n)") }
                return c
            }
        }
        switch settings.video_type {
        case Int32(OT_VIDEO_TYPE_CAMERA.rawValue): s.videoType = .camera
        case Int32(OT_VIDEO_TYPE_SCREEN.rawValue): s.videoType = .screen
        case Int32(OT_VIDEO_TYPE_CUSTOM.rawValue): s.videoType = .custom
        default: throw OTError(.invalidParameter, "video_type \(settings.video_type) is not an ot_video_type")
        }
        let ref = OwnerRef()
        switch settings.video_source {
        case Int32(OT_VIDEO_SOURCE_TEST_PATTERN.rawValue):
            s.videoSource = .testPattern; capturer = nil
        case Int32(OT_VIDEO_SOURCE_NONE.rawValue):
            s.videoSource = .none; capturer = nil
        case Int32(OT_VIDEO_SOURCE_CAMERA.rawValue):
            if settings.camera != nil, CArg.string(settings.camera) == nil { throw OTError(.invalidParameter, "camera is not UTF-8") }
            s.videoSource = .camera(device: CArg.string(settings.camera)); capturer = nil
        case Int32(OT_VIDEO_SOURCE_CUSTOM.rawValue):
            let c = try CallbackVideoCapturer(
                settings: VideoCaptureSettings(format: .i420, width: s.width, height: s.height, fps: s.fps),
                callbacks: .init(startCapture: { ref.post { o, cb in cb.on_capture_start?(o.handle, cb.user_data) }; return true },
                                 stopCapture: { ref.post { o, cb in cb.on_capture_stop?(o.handle, cb.user_data) }; return true }))
            s.videoSource = .capturer(c); capturer = c
        default:
            throw OTError(.invalidParameter, "video_source \(settings.video_source) is not an ot_video_source")
        }
        switch settings.audio_source {
        case Int32(OT_AUDIO_SOURCE_SILENCE.rawValue):
            s.audioDevice = try HeadlessAudioDevice(capture: .silence); customAudio = nil
        case Int32(OT_AUDIO_SOURCE_TONE.rawValue):
            guard settings.tone_hz > 0, settings.tone_hz < 24_000 else { throw OTError(.invalidParameter, "tone_hz \(settings.tone_hz) is not in (0, 24000)") }
            s.audioDevice = try HeadlessAudioDevice(capture: .tone(frequency: settings.tone_hz, amplitude: 0.3)); customAudio = nil
        case Int32(OT_AUDIO_SOURCE_CUSTOM.rawValue):
            let d = try CustomAudioDevice(captureSettings: AudioDeviceSettings(), renderSettings: AudioDeviceSettings())
            s.audioDevice = d; customAudio = d
        case Int32(OT_AUDIO_SOURCE_NONE.rawValue):
            s.audioTrack = false; customAudio = nil
        case Int32(OT_AUDIO_SOURCE_MICROPHONE.rawValue):
            if settings.microphone != nil, CArg.string(settings.microphone) == nil { throw OTError(.invalidParameter, "microphone is not UTF-8") }
            s.audioDevice = try PulseAudioDevice(source: CArg.string(settings.microphone)); customAudio = nil
        default:
            throw OTError(.invalidParameter, "audio_source \(settings.audio_source) is not an ot_audio_source")
        }
        publisher = try Publisher(delegate: nil, settings: s)
        adapter = PublisherAdapter(ref)
        ref.owner = self
        publisher.delegate = adapter
        handleBits.store(HandleRegistry.shared.insert(self), ordering: .releasing)
    }

    var handle: UnsafeMutablePointer<ot_publisher>? { Handle.pointer(handleBits.load(ordering: .acquiring), as: ot_publisher.self) }

    /// Publishes into `session`; once the session has accepted (a refused publish leaves everything as it was), the
    /// callbacks go where the session's go, before any callback of the publish (on_capture_start comes during it). A
    /// publish that the delete cancels while it starts is refused as one the delete came before (OT_ERR_INVALID_HANDLE).
    func publish(in session: SessionObject) throws {
        let deleting = OTError(.invalidHandle, "the publisher is being deleted")
        do {
            try session.session.publish(publisher) {
                try attached.withLock { a in
                    guard !a.closed else { throw deleting }
                    a = (session.sink, false)
                }
            }
        } catch where attached.withLock({ $0.closed }) {
            throw deleting
        }
    }
    var sink: CallbackSink? { attached.withLock { $0.sink } }

    /// Unpublishes it if published or publishing (a publish accepted on another thread is cancelled and undone before
    /// this returns), and stops callbacks (waiting for the one in flight).
    func close() {
        publisher.delegate = nil
        attached.withLock { $0.closed = true }
        publisher.stop(notify: true)
        owner.close()
    }
}

/// A weak way back to the publisher object for callbacks made before it finished initializing.
private final class OwnerRef: @unchecked Sendable {
    weak var owner: PublisherObject?
    func post(_ body: @escaping @Sendable (PublisherObject, ot_publisher_callbacks) -> Void) {
        guard let o = owner, let sink = CallbackSink.sinkForCallbackRaisedNow(attached: o.sink) else { return }
        sink.post(o.owner) { body(o, o.callbacks) }
    }
}

/// Forwards the Swift publisher delegate messages to the C callbacks, where its session's callbacks go.
private final class PublisherAdapter: PublisherDelegate, @unchecked Sendable {
    let ref: OwnerRef
    init(_ ref: OwnerRef) { self.ref = ref }

    private func post(_ body: @escaping @Sendable (PublisherObject, ot_publisher_callbacks) -> Void) { ref.post(body) }
    func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) {
        post { o, cb in withBorrowedHandle(StreamObject(stream, own: true), as: ot_stream.self) { cb.on_stream_created?(o.handle, cb.user_data, $0) } }
    }
    func publisher(_ publisher: Publisher, streamDestroyed stream: StreamInfo) {
        post { o, cb in withBorrowedHandle(StreamObject(stream, own: true), as: ot_stream.self) { cb.on_stream_destroyed?(o.handle, cb.user_data, $0) } }
    }
    func publisher(_ publisher: Publisher, didFailWithError error: OTError) {
        post { o, cb in error.message.withCString { cb.on_error?(o.handle, cb.user_data, ot_status(error.code.rawValue), $0) } }
    }
    func publisher(_ publisher: Publisher, statsUpdated stats: PublisherStats) {
        post { o, cb in
            var c = cStats(stats)
            cb.on_stats?(o.handle, cb.user_data, &c)
        }
    }
    func publisher(_ publisher: Publisher, muteForced active: Bool) {
        post { o, cb in cb.on_mute_forced?(o.handle, cb.user_data, CArg.bool(active)) }
    }
    func publisher(_ publisher: Publisher, deviceFailed error: DeviceError) {
        post { o, cb in
            error.error.message.withCString { cb.on_device_error?(o.handle, cb.user_data, error.kind.rawValue, Status.of(error.error.code), $0) }
        }
    }
}

private func cStats(_ s: PublisherStats) -> ot_publisher_stats {
    ot_publisher_stats(timestamp_ms: s.timestampMillis, connections: Int32(clamping: s.connections),
                       video_packets_sent: Int64(s.videoPacketsSent), video_bytes_sent: Int64(s.videoBytesSent),
                       audio_packets_sent: Int64(s.audioPacketsSent), audio_bytes_sent: Int64(s.audioBytesSent),
                       frames_encoded: Int64(s.framesEncoded), video_bitrate_bps: s.videoBitrateBps,
                       target_bitrate_kbps: Int32(clamping: s.targetBitrateKbps), round_trip_time_ms: s.roundTripTimeMillis ?? -1,
                       fraction_lost: s.fractionLost)
}

private func withPublisher(_ p: UnsafeMutablePointer<ot_publisher>?, _ body: (PublisherObject) throws -> ot_status) -> ot_status {
    withObject(UnsafePointer(p), as: PublisherObject.self, body)
}

/// Fills `settings` with the defaults: test pattern 640x480 at 30 fps, camera, 100..2000 kbit/s starting at 600, silent
/// headless audio at 32 kbit/s, audio and video published, audio fallback enabled; no camera or microphone named; VP8.
@c(ot_publisher_settings_default) public func ot_publisher_settings_default(_ settings: UnsafeMutablePointer<ot_publisher_settings>?) -> ot_status {
    guard let settings else { return Status.invalidParam }
    let d = PublisherSettings()
    settings.pointee = ot_publisher_settings(name: nil, video_source: Int32(OT_VIDEO_SOURCE_TEST_PATTERN.rawValue),
                                             video_type: Int32(OT_VIDEO_TYPE_CAMERA.rawValue), width: Int32(d.width), height: Int32(d.height),
                                             fps: Int32(d.fps), max_bitrate_kbps: Int32(d.maxBitrateKbps),
                                             audio_source: Int32(OT_AUDIO_SOURCE_SILENCE.rawValue),
                                             tone_hz: 440, publish_audio: 1, publish_video: 1, audio_fallback_enabled: 1,
                                             min_bitrate_kbps: Int32(d.minBitrateKbps), start_bitrate_kbps: Int32(d.startBitrateKbps),
                                             audio_bitrate_bps: Int32(d.audioBitrateBps), camera: nil, microphone: nil,
                                             preferred_video_codecs: nil)
    return Status.ok
}

/// Creates a publisher (NULL settings: the defaults); NULL when `callbacks` is NULL, a setting is out of range, or
/// OT_VIDEO_SOURCE_CAMERA names no camera (or there is none). Nothing is captured until ot_session_publish.
@c(ot_publisher_new) public func ot_publisher_new(_ settings: UnsafePointer<ot_publisher_settings>?,
                                                  _ callbacks: UnsafePointer<ot_publisher_callbacks>?) -> UnsafeMutablePointer<ot_publisher>? {
    guard let callbacks else { return nil }
    var s = ot_publisher_settings()
    if let settings { s = settings.pointee } else { _ = ot_publisher_settings_default(&s) }
    if s.name != nil, CArg.string(s.name) == nil { return nil }
    do { return try PublisherObject(settings: s, callbacks: callbacks.pointee).handle } catch {
        Log.warn("capi", "ot_publisher_new: \((error as? OTError)?.message ?? "\(error)")")
        return nil
    }
}

/// Deletes a publisher: unpublishes it if published, waits for its callback in flight (unless called from
/// inside one); no callback of it fires after this returns.
@c(ot_publisher_delete) public func ot_publisher_delete(_ publisher: UnsafeMutablePointer<ot_publisher>?) -> ot_status {
    deleteObject(publisher, as: PublisherObject.self) { $0.close() }
}

/// Publishes into a connected session (one publisher per session). OT_ERR_NOT_CONNECTED, OT_ERR_UNABLE_TO_PUBLISH
/// (role, or a second publisher), OT_ERR_ILLEGAL_STATE (published elsewhere), OT_ERR_INVALID_HANDLE (the publisher is
/// deleted meanwhile: nothing is left running); on_stream_created follows. From now on the publisher's callbacks come where the session's do, in one order with them.
@c(ot_session_publish) public func ot_session_publish(_ session: UnsafeMutablePointer<ot_session>?,
                                                      _ publisher: UnsafeMutablePointer<ot_publisher>?) -> ot_status {
    withSession(session, and: publisher, as: PublisherObject.self) { s, p in try p.publish(in: s) }
}

/// Stops publishing; on_stream_destroyed follows. OT_ERR_PUBLISHER_NOT_FOUND when not published in this session.
@c(ot_session_unpublish) public func ot_session_unpublish(_ session: UnsafeMutablePointer<ot_session>?,
                                                          _ publisher: UnsafeMutablePointer<ot_publisher>?) -> ot_status {
    withSession(session, and: publisher, as: PublisherObject.self) { s, p in try s.session.unpublish(p.publisher) }
}

/// Starts or stops sending audio; others see the stream's has-audio change.
@c(ot_publisher_set_publish_audio) public func ot_publisher_set_publish_audio(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                                            _ on: ot_bool) -> ot_status {
    withPublisher(publisher) { p in p.publisher.publishAudio = on != 0; return Status.ok }
}

/// Whether audio is sent now into `on`: false after ot_publisher_set_publish_audio(0) or a moderator's force mute
/// (on_mute_forced), until set again.
@c(ot_publisher_get_publish_audio) public func ot_publisher_get_publish_audio(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                                            _ on: UnsafeMutablePointer<ot_bool>?) -> ot_status {
    withPublisher(publisher) { p in
        guard let on else { return Status.invalidParam }
        on.pointee = CArg.bool(p.publisher.publishAudio)
        return Status.ok
    }
}

/// The publisher's stream as it is now (as OTPublisherKit.stream) into `stream`: a copy the caller releases with
/// ot_stream_delete. OT_ERR_ILLEGAL_STATE while it is not publishing (before on_stream_created, after
/// on_stream_destroyed).
@c(ot_publisher_get_stream) public func ot_publisher_get_stream(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                              _ stream: UnsafeMutablePointer<UnsafeMutablePointer<ot_stream>?>?) -> ot_status {
    withPublisher(publisher) { p in
        guard let stream else { return Status.invalidParam }
        guard let info = p.publisher.stream else { return Status.of(.illegalState) }
        stream.pointee = Handle.pointer(HandleRegistry.shared.insert(StreamObject(info, own: true)), as: ot_stream.self)
        return Status.ok
    }
}

/// Whether video is sent now into `on`.
@c(ot_publisher_get_publish_video) public func ot_publisher_get_publish_video(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                                            _ on: UnsafeMutablePointer<ot_bool>?) -> ot_status {
    withPublisher(publisher) { p in
        guard let on else { return Status.invalidParam }
        on.pointee = CArg.bool(p.publisher.publishVideo)
        return Status.ok
    }
}

/// Starts or stops sending video; others see the stream's has-video change.
@c(ot_publisher_set_publish_video) public func ot_publisher_set_publish_video(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                                            _ on: ot_bool) -> ot_status {
    withPublisher(publisher) { p in p.publisher.publishVideo = on != 0; return Status.ok }
}

/// Pushes one captured frame (OT_VIDEO_SOURCE_CUSTOM), from any thread. `planes` and `strides` hold
/// `plane_count` entries in the format's order (I420: Y, U, V; NV12/NV21: Y, UV; packed formats: 1; MJPEG: the
/// JPEG, its length as the stride); the data is copied before this returns. Of each plane it reads `stride` bytes
/// per row but only the picture's width of the last row (a cropped view may end there); a stride is at most 1 MiB
/// (a JPEG 64 MiB). OT_ERR_ILLEGAL_STATE when the publisher is not capturing (not published, or not a custom
/// source); OT_ERR_INVALID_PARAM for a bad format, size or plane layout.
@c(ot_publisher_provide_video_frame) public func ot_publisher_provide_video_frame(
    _ publisher: UnsafeMutablePointer<ot_publisher>?, _ format: Int32, _ width: Int32, _ height: Int32,
    _ planes: UnsafePointer<UnsafePointer<UInt8>?>?, _ strides: UnsafePointer<Int32>?, _ plane_count: Int32,
    _ timestamp_us: Int64
) -> ot_status {
    withPublisher(publisher) { p in
        guard let capturer = p.capturer else { return Status.of(.illegalState) }
        guard let pf = PixelFormat(rawValue: format), pf.planeCount == Int(plane_count), let planes, let strides,
              width > 0, height > 0, width <= 8192, height <= 8192 else { return Status.invalidParam }
        var copies: [[UInt8]] = [], strideList: [Int] = []
        let geometry = pf.planeGeometry(width: Int(width), height: Int(height))
        for i in 0..<Int(plane_count) {
            // A stride beyond any real layout (a row of 1 MiB, a JPEG of 64 MiB) is refused, not read.
            guard let base = planes[i], strides[i] <= (pf == .mjpeg ? 1 << 26 : 1 << 20),
                  let span = pf.planeSpan(stride: Int(strides[i]), geometry[i]) else { return Status.invalidParam }
            copies.append(Array(UnsafeBufferPointer(start: base, count: span)))
            strideList.append(Int(strides[i]))
        }
        let frame = CapturedFrame(format: pf, width: Int(width), height: Int(height), planes: copies, strides: strideList,
                                  timestampMicros: timestamp_us)
        return capturer.provideFrame(frame) ? Status.ok : Status.of(.illegalState)
    }
}

/// Writes captured 48 kHz mono int16 PCM (OT_AUDIO_SOURCE_CUSTOM), from any thread; `count` samples.
/// OT_ERR_ILLEGAL_STATE when not capturing (not published, or not a custom audio source).
@c(ot_publisher_write_audio) public func ot_publisher_write_audio(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                                  _ samples: UnsafePointer<Int16>?, _ count: UInt) -> ot_status {
    withPublisher(publisher) { p in
        guard let device = p.customAudio else { return Status.of(.illegalState) }
        guard let samples, count > 0, count <= 48_000 * 10 else { return Status.invalidParam }
        return device.writeCaptureData(UnsafeBufferPointer(start: samples, count: Int(count))) == Int(count) ? Status.ok : Status.of(.illegalState)
    }
}

/// The publisher's sending counters now.
@c(ot_publisher_get_stats) public func ot_publisher_get_stats(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                              _ stats: UnsafeMutablePointer<ot_publisher_stats>?) -> ot_status {
    withPublisher(publisher) { p in
        guard let stats else { return Status.invalidParam }
        stats.pointee = cStats(p.publisher.stats)
        return Status.ok
    }
}

/// Copies the W3C-named RTC stats report (JSON) into `buf`; OT_ERR_BUFFER_TOO_SMALL when it does not fit
/// (64 KiB is plenty).
@c(ot_publisher_get_rtc_stats_report) public func ot_publisher_get_rtc_stats_report(_ publisher: UnsafeMutablePointer<ot_publisher>?,
                                                                                  _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withPublisher(publisher) { p in CArg.copy(p.publisher.rtcStatsReport(), to: buf, size: size) }
}
