import Dispatch
import OTBase
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Sample rate and channel count of one direction of an audio device.
public struct AudioDeviceSettings: Sendable, Equatable {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int = 48_000, channels: Int = 1) {
        self.sampleRate = sampleRate; self.channels = channels
    }

    /// Throws `invalidParameter` unless the rate is 8–192 kHz and there are 1 or 2 channels.
    public func validate() throws {
        guard (8_000...192_000).contains(sampleRate), (1...2).contains(channels) else {
            throw OTError(.invalidParameter, "audio settings \(sampleRate) Hz × \(channels) channels are not supported")
        }
    }

    /// Interleaved samples in `millis` milliseconds.
    public func samples(millis: Int) -> Int { sampleRate * millis / 1000 * channels }
}

/// Where a device delivers captured audio (the publisher's side). Called on the device's thread.
public protocol AudioCaptureSink: AnyObject, Sendable {
    /// Interleaved int16 samples just captured, in the device's capture settings.
    func audioCaptured(_ samples: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings)
}

/// Where a device fetches audio to play (the mixer of the subscribers). Called on the device's thread.
public protocol AudioRenderSource: AnyObject, Sendable {
    /// Fills `buffer` (interleaved, in the device's render settings) and returns how many samples are
    /// real audio; the rest of the buffer is left silent.
    func renderAudio(into buffer: UnsafeMutableBufferPointer<Int16>, settings: AudioDeviceSettings) -> Int
}

/// An audio device (OpenTok's audio device): captures int16 PCM into a sink, plays int16 PCM it
/// reads from a source. The library attaches the sink and source, then starts and stops each
/// direction as publishers and subscribers come and go.
public protocol AudioDevice: AnyObject, Sendable {
    var captureSettings: AudioDeviceSettings { get }
    var renderSettings: AudioDeviceSettings { get }
    /// Sets (or clears) where captured audio goes.
    func setCaptureSink(_ sink: (any AudioCaptureSink)?)
    /// Sets (or clears) where played audio comes from.
    func setRenderSource(_ source: (any AudioRenderSource)?)
    func startCapture() throws
    func stopCapture()
    func startRender() throws
    func stopRender()
    var isCapturing: Bool { get }
    var isRendering: Bool { get }
}

/// A phase-continuous sine generator.
public struct ToneGenerator: Sendable {
    public let frequency: Double
    /// Peak amplitude as a fraction of full scale (0…1).
    public let amplitude: Double
    public let settings: AudioDeviceSettings
    private var phase: Double = 0

    public init(frequency: Double, amplitude: Double, settings: AudioDeviceSettings) {
        self.frequency = frequency; self.amplitude = min(max(amplitude, 0), 1); self.settings = settings
    }

    /// Writes the next samples (every channel gets the same value).
    public mutating func fill(_ buffer: UnsafeMutableBufferPointer<Int16>) {
        let step = 2 * Double.pi * frequency / Double(settings.sampleRate)
        let peak = amplitude * 32767
        let ch = settings.channels
        var i = 0
        while i + ch <= buffer.count {
            let s = Int16(clamping: Int((sin(phase) * peak).rounded()))
            for c in 0..<ch { buffer[i + c] = s }
            phase += step
            if phase >= 2 * Double.pi { phase -= 2 * Double.pi }
            i += ch
        }
    }
}

/// An audio device that needs no sound server: capture is silence or a sine tone, render discards
/// or records what it is given. It is clocked either by its own timer thread (`.timer`, chunks of
/// 10 or 20 ms kept in step with the monotonic clock) or by the caller (`.manual`, one chunk per
/// `tick()`, for deterministic tests and for drivers with their own clock).
public final class HeadlessAudioDevice: AudioDevice {
    public enum CaptureSignal: Sendable, Equatable {
        case silence
        /// A sine at `frequency` Hz with peak `amplitude` (fraction of full scale).
        case tone(frequency: Double, amplitude: Double)
    }
    public enum RenderMode: Sendable, Equatable {
        case discard
        /// Keep the last `maxSamples` rendered samples, readable with `recordedSamples()`.
        case record(maxSamples: Int)
    }
    public enum Clocking: Sendable, Equatable { case timer, manual }

    public let captureSettings: AudioDeviceSettings
    public let renderSettings: AudioDeviceSettings
    /// Chunk length in milliseconds (10 or 20).
    public let chunkMillis: Int
    public let clocking: Clocking
    private let renderMode: RenderMode

    private struct State {
        var sink: (any AudioCaptureSink)?
        var source: (any AudioRenderSource)?
        var capturing = false
        var rendering = false
        var tone: ToneGenerator?
        var captureChunk: [Int16]
        var recorded: [Int16] = []
        var renderedSamples = 0
        var capturedSamples = 0
        var timer: (any DispatchSourceTimer)?
        var timerStart = Instant.zero
        var chunksDone: Int64 = 0
    }
    private let state: Mutex<State>
    private let queue = DispatchQueue(label: "ot.audio.headless")
    private let onQueue = DispatchSpecificKey<Bool>()

    /// Throws `invalidParameter` for unsupported settings or a chunk other than 10 or 20 ms.
    public init(capture: CaptureSignal = .silence, render: RenderMode = .discard,
                captureSettings: AudioDeviceSettings = AudioDeviceSettings(),
                renderSettings: AudioDeviceSettings = AudioDeviceSettings(),
                chunkMillis: Int = 10, clocking: Clocking = .timer) throws {
        try captureSettings.validate()
        try renderSettings.validate()
        guard chunkMillis == 10 || chunkMillis == 20 else {
            throw OTError(.invalidParameter, "chunk must be 10 or 20 ms, not \(chunkMillis)")
        }
        if case .record(let n) = render, n <= 0 { throw OTError(.invalidParameter, "record buffer must hold samples") }
        self.captureSettings = captureSettings; self.renderSettings = renderSettings
        self.chunkMillis = chunkMillis; self.clocking = clocking; self.renderMode = render
        var tone: ToneGenerator?
        if case .tone(let f, let a) = capture {
            guard f > 0, f < Double(captureSettings.sampleRate) / 2 else {
                throw OTError(.invalidParameter, "tone \(f) Hz is outside (0, Nyquist)")
            }
            tone = ToneGenerator(frequency: f, amplitude: a, settings: captureSettings)
        }
        state = Mutex(State(tone: tone,
                            captureChunk: [Int16](repeating: 0, count: captureSettings.samples(millis: chunkMillis))))
        queue.setSpecific(key: onQueue, value: true)
    }

    public func setCaptureSink(_ sink: (any AudioCaptureSink)?) { state.withLock { $0.sink = sink } }
    public func setRenderSource(_ source: (any AudioRenderSource)?) { state.withLock { $0.source = source } }
    public var isCapturing: Bool { state.withLock { $0.capturing } }
    public var isRendering: Bool { state.withLock { $0.rendering } }

    public func startCapture() throws { setRunning(capture: true) }
    public func stopCapture() { setRunning(capture: false) }
    public func startRender() throws { setRunning(render: true) }
    public func stopRender() { setRunning(render: false) }

    /// Samples captured and rendered so far.
    public var sampleCounts: (captured: Int, rendered: Int) { state.withLock { ($0.capturedSamples, $0.renderedSamples) } }

    /// The recorded render output (empty in `.discard` mode).
    public func recordedSamples() -> [Int16] { state.withLock { $0.recorded } }

    /// Runs one chunk: captures into the sink if capturing, renders from the source if rendering.
    /// The timer calls it in `.timer` mode; callers call it in `.manual` mode (from one thread).
    /// The sink and source are called without the device's lock held.
    public func tick() {
        let work = state.withLock { s -> (capture: [Int16]?, sink: (any AudioCaptureSink)?, render: (any AudioRenderSource)??) in
            var captured: [Int16]?
            if s.capturing {
                if var tone = s.tone {
                    s.captureChunk.withUnsafeMutableBufferPointer { tone.fill($0) }
                    s.tone = tone
                }
                captured = s.captureChunk
                s.capturedSamples += s.captureChunk.count
            }
            return (captured, s.sink, s.rendering ? .some(s.source) : .none)
        }
        if let chunk = work.capture, let sink = work.sink {
            chunk.withUnsafeBufferPointer { sink.audioCaptured($0, settings: captureSettings) }
        }
        guard case .some(let source) = work.render else { return }
        var out = [Int16](repeating: 0, count: renderSettings.samples(millis: chunkMillis))
        if let source {
            let settings = renderSettings
            _ = out.withUnsafeMutableBufferPointer { source.renderAudio(into: $0, settings: settings) }
        }
        state.withLock { s in
            s.renderedSamples += out.count
            if case .record(let maxSamples) = renderMode {
                s.recorded.append(contentsOf: out)
                if s.recorded.count > maxSamples { s.recorded.removeFirst(s.recorded.count - maxSamples) }
            }
        }
    }

    private func setRunning(capture: Bool? = nil, render: Bool? = nil) {
        let stopTimer = state.withLock { s -> (any DispatchSourceTimer)? in
            if let capture { s.capturing = capture }
            if let render { s.rendering = render }
            guard clocking == .timer else { return nil }
            let wanted = s.capturing || s.rendering
            if wanted && s.timer == nil {
                let timer = DispatchSource.makeTimerSource(queue: queue)
                s.timerStart = MonotonicClock.now()
                s.chunksDone = 0
                timer.schedule(deadline: .now(), repeating: .milliseconds(chunkMillis), leeway: .milliseconds(1))
                timer.setEventHandler { [weak self] in self?.timerFired() }
                timer.resume()
                s.timer = timer
            } else if !wanted, let t = s.timer {
                s.timer = nil
                return t
            }
            return nil
        }
        if let stopTimer {
            stopTimer.cancel()
            if DispatchQueue.getSpecific(key: onQueue) == nil { queue.sync {} }
        }
    }

    /// Runs as many chunks as the monotonic clock says are due, so timer jitter does not change the rate.
    private func timerFired() {
        let due = state.withLock { s -> Int64 in
            guard s.timer != nil else { return 0 }
            let elapsed = (MonotonicClock.now() - s.timerStart).microseconds
            let target = elapsed / Int64(chunkMillis * 1000) + 1
            // After a long stall, do not burst more than 5 chunks: skip the rest.
            let due = min(target - s.chunksDone, 5)
            s.chunksDone = target
            return max(due, 0)
        }
        for _ in 0..<due { tick() }
    }

    deinit { state.withLock { $0.timer }?.cancel() }
}

/// An audio device driven by user code (OpenTok's custom audio device): the library tells it to
/// start and stop through `callbacks`; the user's own thread moves samples with
/// `writeCaptureData` and `readRenderData`, as `otc_audio_device_write_capture_data` /
/// `otc_audio_device_read_render_data` do.
public final class CustomAudioDevice: AudioDevice {
    /// What the library asks of the user's device. Each returns false to refuse.
    public struct Callbacks: Sendable {
        public var startCapture: @Sendable () -> Bool
        public var stopCapture: @Sendable () -> Bool
        public var startRender: @Sendable () -> Bool
        public var stopRender: @Sendable () -> Bool
        public init(startCapture: @escaping @Sendable () -> Bool = { true },
                    stopCapture: @escaping @Sendable () -> Bool = { true },
                    startRender: @escaping @Sendable () -> Bool = { true },
                    stopRender: @escaping @Sendable () -> Bool = { true }) {
            self.startCapture = startCapture; self.stopCapture = stopCapture
            self.startRender = startRender; self.stopRender = stopRender
        }
    }

    public let captureSettings: AudioDeviceSettings
    public let renderSettings: AudioDeviceSettings
    private let callbacks: Callbacks
    private struct State {
        var sink: (any AudioCaptureSink)?
        var source: (any AudioRenderSource)?
        var capturing = false
        var rendering = false
    }
    private let state = Mutex(State())

    /// Throws `invalidParameter` for unsupported settings.
    public init(captureSettings: AudioDeviceSettings, renderSettings: AudioDeviceSettings,
                callbacks: Callbacks = Callbacks()) throws {
        try captureSettings.validate()
        try renderSettings.validate()
        self.captureSettings = captureSettings; self.renderSettings = renderSettings; self.callbacks = callbacks
    }

    public func setCaptureSink(_ sink: (any AudioCaptureSink)?) { state.withLock { $0.sink = sink } }
    public func setRenderSource(_ source: (any AudioRenderSource)?) { state.withLock { $0.source = source } }
    public var isCapturing: Bool { state.withLock { $0.capturing } }
    public var isRendering: Bool { state.withLock { $0.rendering } }

    public func startCapture() throws {
        guard !isCapturing else { return }
        guard callbacks.startCapture() else { throw OTError(.internalError, "the audio device refused to start capturing") }
        state.withLock { $0.capturing = true }
    }
    public func stopCapture() {
        guard state.withLock({ s in defer { s.capturing = false }; return s.capturing }) else { return }
        _ = callbacks.stopCapture()
    }
    public func startRender() throws {
        guard !isRendering else { return }
        guard callbacks.startRender() else { throw OTError(.internalError, "the audio device refused to start rendering") }
        state.withLock { $0.rendering = true }
    }
    public func stopRender() {
        guard state.withLock({ s in defer { s.rendering = false }; return s.rendering }) else { return }
        _ = callbacks.stopRender()
    }

    /// Hands captured interleaved samples to the library. Returns how many were taken:
    /// all of them while capturing with a sink attached, otherwise 0. The sink runs under the
    /// device's lock (so nothing is delivered after `stopCapture` returns) and must not call back
    /// into the device.
    @discardableResult
    public func writeCaptureData(_ samples: UnsafeBufferPointer<Int16>) -> Int {
        state.withLock { s in
            guard s.capturing, let sink = s.sink else { return 0 }
            sink.audioCaptured(samples, settings: captureSettings)
            return samples.count
        }
    }

    /// Fills `buffer` with interleaved samples to play. Returns how many are real audio; the rest of
    /// the buffer is silence (all of it when not rendering or with no source attached).
    public func readRenderData(into buffer: UnsafeMutableBufferPointer<Int16>) -> Int {
        buffer.update(repeating: 0)
        return state.withLock { s in
            guard s.rendering, let source = s.source else { return 0 }
            return min(source.renderAudio(into: buffer, settings: renderSettings), buffer.count)
        }
    }
}
