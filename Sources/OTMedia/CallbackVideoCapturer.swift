import OTBase
import Synchronization

/// A capturer whose life cycle is driven by callbacks and whose frames are pushed with
/// `provideFrame` from any thread: the shape of the C API's custom capturer
/// (`otc_video_capturer_callbacks` + `otc_video_capturer_provide_frame`).
public final class CallbackVideoCapturer: VideoCapturer {
    /// The user's callbacks; each returns false to refuse (start refusals throw).
    public struct Callbacks: Sendable {
        public var initCapture: @Sendable () -> Bool
        public var releaseCapture: @Sendable () -> Bool
        public var startCapture: @Sendable () -> Bool
        public var stopCapture: @Sendable () -> Bool
        public init(initCapture: @escaping @Sendable () -> Bool = { true },
                    releaseCapture: @escaping @Sendable () -> Bool = { true },
                    startCapture: @escaping @Sendable () -> Bool = { true },
                    stopCapture: @escaping @Sendable () -> Bool = { true }) {
            self.initCapture = initCapture; self.releaseCapture = releaseCapture
            self.startCapture = startCapture; self.stopCapture = stopCapture
        }
    }

    private struct State {
        var consumer: (any VideoFrameConsumer)?
        var capturing = false
    }
    public let captureSettings: VideoCaptureSettings
    private let callbacks: Callbacks
    private let state = Mutex(State())

    /// Throws `invalidParameter` for implausible settings.
    public init(settings: VideoCaptureSettings, callbacks: Callbacks = Callbacks()) throws {
        try settings.validate()
        self.captureSettings = settings
        self.callbacks = callbacks
    }

    public func initCapture(consumer: any VideoFrameConsumer) throws {
        guard callbacks.initCapture() else { throw OTError(.internalError, "the capturer refused to initialize") }
        state.withLock { $0.consumer = consumer }
    }

    public var isCapturing: Bool { state.withLock { $0.capturing } }

    public func startCapture() throws {
        guard state.withLock({ $0.consumer != nil }) else { throw OTError(.illegalState, "startCapture before initCapture") }
        guard !isCapturing else { return }
        guard callbacks.startCapture() else { throw OTError(.internalError, "the capturer refused to start") }
        state.withLock { $0.capturing = true }
    }

    public func stopCapture() {
        guard state.withLock({ s in defer { s.capturing = false }; return s.capturing }) else { return }
        _ = callbacks.stopCapture()
    }

    public func releaseCapture() {
        stopCapture()
        guard state.withLock({ s in defer { s.consumer = nil }; return s.consumer != nil }) else { return }
        _ = callbacks.releaseCapture()
    }

    /// Pushes a frame (any thread). Returns false when not capturing or the consumer refused it.
    @discardableResult
    public func provideFrame(_ frame: CapturedFrame) -> Bool {
        guard let consumer = state.withLock({ $0.capturing ? $0.consumer : nil }) else { return false }
        return consumer.consumeFrame(frame)
    }
}
