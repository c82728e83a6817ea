import Dispatch
import OTBase
import Synchronization

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
