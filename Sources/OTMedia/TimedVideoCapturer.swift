import Dispatch
import OTBase
import Synchronization

/// A capturer that renders frames on a timer thread at the settings' frame rate, calling
/// `render(frameIndex, timestampMicros)` for each; the built-in synthetic sources use it.
/// Timestamps come from `clock` (the monotonic clock by default).
public final class TimedVideoCapturer: VideoCapturer {
    public typealias Render = @Sendable (_ frameIndex: Int64, _ timestampMicros: Int64) -> CapturedFrame?

    private struct State {
        var consumer: (any VideoFrameConsumer)?
        var timer: (any DispatchSourceTimer)?
        var frameIndex: Int64 = 0
        var generation: UInt64 = 0
    }
    public let captureSettings: VideoCaptureSettings
    private let render: Render
    private let clock: any TimeSource
    private let queue = DispatchQueue(label: "ot.capture.timer")
    private let onQueue = DispatchSpecificKey<Bool>()
    private let state = Mutex(State())

    public init(settings: VideoCaptureSettings, clock: any TimeSource = MonotonicClock(), render: @escaping Render) {
        self.captureSettings = settings
        self.clock = clock
        self.render = render
        queue.setSpecific(key: onQueue, value: true)
    }

    public func initCapture(consumer: any VideoFrameConsumer) throws {
        try captureSettings.validate()
        state.withLock { $0.consumer = consumer }
    }

    public var isCapturing: Bool { state.withLock { $0.timer != nil } }

    public func startCapture() throws {
        let interval = DispatchTimeInterval.microseconds(1_000_000 / captureSettings.fps)
        let outcome = state.withLock { s -> Bool? in
            guard s.consumer != nil else { return nil }
            guard s.timer == nil else { return false }
            s.generation += 1
            let generation = s.generation
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: interval, leeway: .milliseconds(1))
            timer.setEventHandler { [weak self] in self?.tick(generation) }
            timer.resume()
            s.timer = timer
            return true
        }
        guard outcome != nil else { throw OTError(.illegalState, "startCapture before initCapture") }
    }

    private func tick(_ generation: UInt64) {
        // A tick that raced with stopCapture (its timer no longer current) delivers nothing.
        let next = state.withLock { s -> (any VideoFrameConsumer, Int64)? in
            guard let c = s.consumer, s.timer != nil, s.generation == generation else { return nil }
            defer { s.frameIndex += 1 }
            return (c, s.frameIndex)
        }
        guard let (consumer, index) = next else { return }
        if let frame = render(index, clock.now().micros) { consumer.consumeFrame(frame) }
    }

    public func stopCapture() {
        guard let timer = state.withLock({ s -> (any DispatchSourceTimer)? in
            defer { s.timer = nil }; return s.timer
        }) else { return }
        timer.cancel()
        // Ticks run on `queue`: once this returns, a tick in flight has finished
        // (unless stop is called from a tick itself, which then is the last one).
        if DispatchQueue.getSpecific(key: onQueue) == nil { queue.sync {} }
    }

    public func releaseCapture() {
        stopCapture()
        state.withLock { $0.consumer = nil }
    }

    deinit { state.withLock { $0.timer }?.cancel() }
}
