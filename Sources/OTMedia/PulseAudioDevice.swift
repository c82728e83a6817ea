import CPulse
import Dispatch
import OTBase
import Synchronization

/// An audio device on PulseAudio (or PipeWire through pipewire-pulse): captures from a source and plays the
/// session's mix to a sink, 16-bit at the settings' rate, with low-latency buffering (10 ms capture fragments, a
/// playout buffer of `playoutLatencyMillis`).
///
/// A nil source or sink name means the system default, followed when the user changes it (the stream is not
/// pinned). A named device is pinned: when it disappears (unplugged, its module unloaded) the stream ends. Whenever
/// a direction cannot start (no sound server, no such device) or its device is lost, the device reports a
/// `DeviceError` to its observers and carries on with a `HeadlessAudioDevice` for that direction (silence in,
/// playout discarded), so the session keeps working; the next start tries the sound server again.
public final class PulseAudioDevice: AudioDevice, DeviceErrorReporting, @unchecked Sendable {
    public let captureSettings: AudioDeviceSettings
    public let renderSettings: AudioDeviceSettings
    /// The server (nil: libpulse's default) and the chosen source and sink (nil: the system default).
    public let server: String?
    public let sourceName: String?
    public let sinkName: String?
    /// The playout buffer's target length.
    public let playoutLatencyMillis: Int

    /// A `pa_stream`, used under the main loop's lock only.
    private struct Stream: @unchecked Sendable, Equatable { let pointer: OpaquePointer }

    /// One direction's stream, or its headless stand-in after a failure.
    private struct Direction {
        var running = false
        var stream: Stream?
        var fallback: HeadlessAudioDevice?
        /// Bumped at every start and stop, so a late failure of an old stream is ignored.
        var generation: UInt64 = 0
    }
    private struct State {
        var sink: (any AudioCaptureSink)?
        var source: (any AudioRenderSource)?
        var capture = Direction()
        var render = Direction()
        var connection: PulseContext?
        /// Captured samples gathered into 10 ms chunks.
        var chunk: [Int16] = []
        var chunkFill = 0
        var renderScratch: [Int16] = []
    }
    private let state = Mutex(State())
    private let observers = DeviceErrorObservers()
    /// Starts, stops and failure handling, one at a time, never on libpulse's thread.
    private let control = DispatchQueue(label: "ot.audio.pulse")
    private let onControl = DispatchSpecificKey<Bool>()

    /// A device on `server` capturing from `source` and playing to `sink` (nil: the defaults). Nothing connects
    /// until a direction starts. Throws `invalidParameter` for unsupported settings or a latency outside 10–500 ms.
    public init(server: String? = nil, source: String? = nil, sink: String? = nil,
                captureSettings: AudioDeviceSettings = AudioDeviceSettings(), renderSettings: AudioDeviceSettings = AudioDeviceSettings(),
                playoutLatencyMillis: Int = 30) throws {
        try captureSettings.validate()
        try renderSettings.validate()
        guard (10...500).contains(playoutLatencyMillis) else {
            throw OTError(.invalidParameter, "playout latency \(playoutLatencyMillis) ms is outside 10–500 ms")
        }
        for name in [server, source, sink] {
            if let name, name.isEmpty || name.utf8.count > 1024 || name.utf8.contains(0) {
                throw OTError(.invalidParameter, "a device or server name must be 1–1024 bytes without NUL")
            }
        }
        self.server = server; self.sourceName = source; self.sinkName = sink
        self.captureSettings = captureSettings; self.renderSettings = renderSettings
        self.playoutLatencyMillis = playoutLatencyMillis
        control.setSpecific(key: onControl, value: true)
    }

    deinit {
        // Streams call back with an unretained pointer to self: end them before self goes.
        let (connection, streams, fallbacks) = state.withLock { s in
            (s.connection, [s.capture.stream, s.render.stream], [s.capture.fallback, s.render.fallback])
        }
        if let connection {
            connection.withLock { for case let stream? in streams { Self.end(stream.pointer) } }
        }
        for f in fallbacks { f?.stopCapture(); f?.stopRender() }
    }

    // MARK: enumeration

    /// The server's sources (microphones and sinks' monitors). Throws `deviceUnavailable` without a sound server.
    public static func sources(server: String? = nil) throws -> [AudioDeviceInfo] { try PulseContext(server: server).list(.microphone) }
    /// The server's sinks (speakers). Throws `deviceUnavailable` without a sound server.
    public static func sinks(server: String? = nil) throws -> [AudioDeviceInfo] { try PulseContext(server: server).list(.speaker) }
    /// Whether a sound server answers at `server` (nil: the default one).
    public static func isServerReachable(server: String? = nil) -> Bool { (try? PulseContext(server: server)) != nil }

    // MARK: AudioDevice

    public func observeErrors(_ handler: @escaping @Sendable (DeviceError) -> Void) -> DeviceObservation { observers.observe(handler) }

    public func setCaptureSink(_ sink: (any AudioCaptureSink)?) {
        let fallback = state.withLock { s in s.sink = sink; return s.capture.fallback }
        fallback?.setCaptureSink(sink)
    }
    public func setRenderSource(_ source: (any AudioRenderSource)?) {
        let fallback = state.withLock { s in s.source = source; return s.render.fallback }
        fallback?.setRenderSource(source)
    }
    public var isCapturing: Bool { state.withLock { $0.capture.running } }
    public var isRendering: Bool { state.withLock { $0.render.running } }
    /// Whether a direction runs on its headless stand-in after a failure (tests, diagnostics).
    public var usingFallback: (capture: Bool, render: Bool) { state.withLock { ($0.capture.fallback != nil, $0.render.fallback != nil) } }

    /// Starts capturing. Never throws for a missing server or device: that is reported and silence is captured.
    public func startCapture() throws { onControl { start(capture: true) } }
    public func stopCapture() { onControl { stop(capture: true) } }
    public func startRender() throws { onControl { start(capture: false) } }
    public func stopRender() { onControl { stop(capture: false) } }

    private func onControl<T>(_ body: () -> T) -> T {
        DispatchQueue.getSpecific(key: onControl) == true ? body() : control.sync(execute: body)
    }

    // MARK: starting and stopping (on `control`)

    private func start(capture: Bool) {
        let already = state.withLock { s -> Bool in
            let running = capture ? s.capture.running : s.render.running
            if !running {
                if capture { s.capture.running = true; s.capture.generation += 1 } else { s.render.running = true; s.render.generation += 1 }
            }
            return running
        }
        guard !already else { return }
        do {
            try openStream(capture: capture)
        } catch {
            let e = error as? OTError ?? OTError(.deviceUnavailable, "\(error)")
            fallBack(capture: capture, DeviceError(kind: capture ? .microphone : .speaker, device: (capture ? sourceName : sinkName) ?? "",
                                                   error: OTError(.deviceUnavailable, e.message)))
        }
    }

    private func stop(capture: Bool) {
        let (stream, fallback, connection) = state.withLock { s -> (Stream?, HeadlessAudioDevice?, PulseContext?) in
            let d = capture ? s.capture : s.render
            if capture { s.capture = Direction(generation: d.generation + 1) } else { s.render = Direction(generation: d.generation + 1) }
            return (d.stream, d.fallback, s.connection)
        }
        if let stream, let connection { connection.withLock { Self.end(stream.pointer) } }
        if capture { fallback?.stopCapture() } else { fallback?.stopRender() }
        // With both directions stopped, let the connection (and libpulse's thread) go: released here, outside the
        // state's lock (closing takes the main loop's lock, which libpulse's thread holds while it waits for ours).
        let idle = state.withLock { s -> PulseContext? in
            guard !s.capture.running, !s.render.running else { return nil }
            defer { s.connection = nil }
            return s.connection
        }
        withExtendedLifetime(idle) {}
    }

    /// The connection, made (or remade after a failure) when needed.
    private func connection() throws -> PulseContext {
        if let c = state.withLock({ $0.connection }), c.isReady { return c }
        let c = try PulseContext(server: server, onFailure: { [weak self] in self?.connectionLost() })
        let old = state.withLock { s in defer { s.connection = c }; return s.connection }
        withExtendedLifetime(old) {}  // a failed connection is closed here, outside the state's lock
        return c
    }

    private func openStream(capture: Bool) throws {
        let c = try connection()
        let settings = capture ? captureSettings : renderSettings
        let name = capture ? sourceName : sinkName
        let generation = state.withLock { capture ? $0.capture.generation : $0.render.generation }
        if capture {
            state.withLock { s in
                s.chunk = [Int16](repeating: 0, count: settings.samples(millis: 10)); s.chunkFill = 0
            }
        }
        let ud = Unmanaged.passUnretained(self).toOpaque()
        try c.withLock {
            var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(settings.sampleRate), channels: UInt8(settings.channels))
            guard let stream = pa_stream_new(c.context, capture ? "libotsession capture" : "libotsession playout", &spec, nil) else {
                throw OTError(.deviceUnavailable, "libpulse refused the stream: \(c.errorText)")
            }
            let bytesPer10ms = UInt32(settings.samples(millis: 10) * 2)
            let none = UInt32.max
            var flags = PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue
            // A named device is pinned, so its loss ends the stream; the default one follows the system's default.
            if name != nil { flags |= PA_STREAM_DONT_MOVE.rawValue }
            // While connecting, wake the wait below.
            pa_stream_set_state_callback(stream, { _, ml in
                if let ml { pa_threaded_mainloop_signal(OpaquePointer(ml), 0) }
            }, UnsafeMutableRawPointer(c.mainloop))
            let rc: Int32
            if capture {
                var attr = pa_buffer_attr(maxlength: none, tlength: none, prebuf: none, minreq: none, fragsize: bytesPer10ms)
                pa_stream_set_read_callback(stream, { s, _, ud in
                    guard let s, let ud else { return }
                    Unmanaged<PulseAudioDevice>.fromOpaque(ud).takeUnretainedValue().readable(s)
                }, ud)
                rc = pa_stream_connect_record(stream, name, &attr, pa_stream_flags_t(rawValue: flags))
            } else {
                var attr = pa_buffer_attr(maxlength: none, tlength: bytesPer10ms * UInt32(playoutLatencyMillis) / 10, prebuf: none,
                                          minreq: bytesPer10ms, fragsize: none)
                pa_stream_set_write_callback(stream, { s, n, ud in
                    guard let s, let ud else { return }
                    Unmanaged<PulseAudioDevice>.fromOpaque(ud).takeUnretainedValue().writable(s, bytes: n)
                }, ud)
                rc = pa_stream_connect_playback(stream, name, &attr, pa_stream_flags_t(rawValue: flags), nil, nil)
            }
            guard rc >= 0, c.wait(until: { pa_stream_get_state(stream) != PA_STREAM_CREATING && pa_stream_get_state(stream) != PA_STREAM_UNCONNECTED }),
                  pa_stream_get_state(stream) == PA_STREAM_READY else {
                let why = c.errorText
                Self.end(stream)
                let what = name.map { "\(capture ? "source" : "sink") \($0)" } ?? "the default \(capture ? "source" : "sink")"
                throw OTError(.deviceUnavailable, "\(what) could not be opened: \(why)")
            }
            // From now on a failed or ended stream is a lost device.
            pa_stream_set_state_callback(stream, { s, ud in
                guard let s, let ud else { return }
                let device = Unmanaged<PulseAudioDevice>.fromOpaque(ud).takeUnretainedValue()
                let st = pa_stream_get_state(s)
                if st == PA_STREAM_FAILED || st == PA_STREAM_TERMINATED { device.streamEnded(s) }
            }, ud)
            let device = pa_stream_get_device_name(stream).map { String(cString: $0) } ?? "?"
            let wrapped = Stream(pointer: stream)
            let current = state.withLock { s -> Bool in
                if capture, s.capture.generation == generation { s.capture.stream = wrapped; return true }
                if !capture, s.render.generation == generation { s.render.stream = wrapped; return true }
                return false
            }
            if !current { Self.end(stream) } else { Log.info("audio", "PulseAudio \(capture ? "capture from" : "playout to") \(device)") }
        }
    }

    /// Disconnects and releases a stream (lock held); no callback of it runs afterwards.
    private static func end(_ stream: OpaquePointer) {
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_set_write_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
    }

    // MARK: failures

    /// libpulse's thread: a stream failed or ended while running.
    private func streamEnded(_ stream: OpaquePointer) {
        let capture: Bool? = state.withLock { s in
            if s.capture.stream?.pointer == stream { return true }
            if s.render.stream?.pointer == stream { return false }
            return nil
        }
        guard let capture else { return }
        let generation = state.withLock { capture ? $0.capture.generation : $0.render.generation }
        control.async { [weak self] in self?.lose(capture: capture, generation: generation, why: "its stream ended") }
    }

    /// libpulse's thread: the server connection failed; both running directions lose their device.
    private func connectionLost() {
        let generations = state.withLock { s in (s.capture.stream != nil ? s.capture.generation : nil, s.render.stream != nil ? s.render.generation : nil) }
        control.async { [weak self] in
            if let g = generations.0 { self?.lose(capture: true, generation: g, why: "the sound server went away") }
            if let g = generations.1 { self?.lose(capture: false, generation: g, why: "the sound server went away") }
        }
    }

    /// On `control`: ends the failed stream and moves the direction to its headless stand-in.
    private func lose(capture: Bool, generation: UInt64, why: String) {
        let (stream, connection) = state.withLock { s -> (Stream?, PulseContext?) in
            let d = capture ? s.capture : s.render
            guard d.running, d.generation == generation, d.fallback == nil, let stream = d.stream else { return (nil, nil) }
            if capture { s.capture.stream = nil } else { s.render.stream = nil }
            return (stream, s.connection)
        }
        guard let stream else { return }
        connection?.withLock { Self.end(stream.pointer) }
        // A failed connection is dropped (closed when `connection` goes, outside the state's lock).
        if connection?.isReady == false { state.withLock { s in if s.connection === connection { s.connection = nil } } }
        let name = (capture ? sourceName : sinkName) ?? ""
        fallBack(capture: capture, DeviceError(kind: capture ? .microphone : .speaker, device: name,
                                               error: OTError(.deviceLost, "the \(capture ? "microphone" : "speaker") \(name.isEmpty ? "(default)" : name) was lost: \(why)")))
    }

    /// On `control`: reports `error` and runs the direction on a headless device.
    private func fallBack(capture: Bool, _ error: DeviceError) {
        let headless = try? HeadlessAudioDevice(captureSettings: captureSettings, renderSettings: renderSettings, chunkMillis: 10)
        let wired = state.withLock { s -> (any AudioCaptureSink)?? in
            guard capture ? s.capture.running : s.render.running else { return .none }
            if capture { s.capture.fallback = headless } else { s.render.fallback = headless }
            return capture ? .some(s.sink) : .some(nil)
        }
        if case .some(let sink) = wired, let headless {
            if capture {
                headless.setCaptureSink(sink)
                try? headless.startCapture()
            } else {
                headless.setRenderSource(state.withLock { $0.source })
                try? headless.startRender()
            }
        }
        observers.report(error)
    }

    // MARK: moving audio (libpulse's thread, lock held)

    /// Captured data is ready: gather it into 10 ms chunks for the sink (holes become silence).
    private func readable(_ stream: OpaquePointer) {
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var bytes = 0
            guard pa_stream_peek(stream, &data, &bytes) == 0 else { return }
            if bytes == 0 { return }
            let samples = data.map { UnsafeBufferPointer(start: $0.assumingMemoryBound(to: Int16.self), count: bytes / 2) }
            deliver(samples, count: bytes / 2)
            pa_stream_drop(stream)
        }
    }

    private func deliver(_ samples: UnsafeBufferPointer<Int16>?, count: Int) {
        var offset = 0
        while offset < count {
            let full = state.withLock { s -> ([Int16], (any AudioCaptureSink)?)? in
                let n = min(count - offset, s.chunk.count - s.chunkFill)
                for i in 0..<n { s.chunk[s.chunkFill + i] = samples?[offset + i] ?? 0 }
                s.chunkFill += n
                offset += n
                guard s.chunkFill == s.chunk.count else { return nil }
                s.chunkFill = 0
                return (s.chunk, s.sink)
            }
            if let (chunk, sink) = full, let sink {
                chunk.withUnsafeBufferPointer { sink.audioCaptured($0, settings: captureSettings) }
            }
        }
    }

    /// The sink wants `bytes` more: render them from the source (silence without one).
    private func writable(_ stream: OpaquePointer, bytes: Int) {
        let frameBytes = 2 * renderSettings.channels
        let n = bytes / frameBytes * frameBytes
        guard n > 0 else { return }
        var buffer: UnsafeMutableRawPointer?
        var size = n
        guard pa_stream_begin_write(stream, &buffer, &size) == 0, let buffer, size >= frameBytes else { return }
        size = size / frameBytes * frameBytes
        let out = UnsafeMutableBufferPointer(start: buffer.assumingMemoryBound(to: Int16.self), count: size / 2)
        out.update(repeating: 0)
        if let source = state.withLock({ $0.source }) {
            _ = source.renderAudio(into: out, settings: renderSettings)
        }
        pa_stream_write(stream, buffer, size, nil, 0, PA_SEEK_RELATIVE)
    }
}
