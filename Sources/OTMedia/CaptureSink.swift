import OTBase
import Synchronization

/// The consumer end a publisher gives its capturer: validates frames from user code, converts
/// them to I420 and hands them to `handler`, counting what it refused.
public final class CaptureSink: VideoFrameConsumer {
    private struct State {
        var handler: (@Sendable (VideoFrame) -> Void)?
        var accepted: Int = 0
        var refused: Int = 0
        var lastError: OTError?
    }
    private let converter: any FrameConverter
    private let state: Mutex<State>

    /// `handler` receives every accepted frame, on the thread that pushed it.
    public init(converter: any FrameConverter = I420Passthrough(), handler: @escaping @Sendable (VideoFrame) -> Void) {
        self.converter = converter
        self.state = Mutex(State(handler: handler))
    }

    /// Drops the handler: later frames are refused. Used when the publisher is torn down.
    public func detach() { state.withLock { $0.handler = nil } }

    /// Frames accepted and refused so far, and why the last refusal happened.
    public var counts: (accepted: Int, refused: Int, lastError: OTError?) {
        state.withLock { ($0.accepted, $0.refused, $0.lastError) }
    }

    @discardableResult
    public func consumeFrame(_ frame: CapturedFrame) -> Bool {
        guard let handler = state.withLock({ $0.handler }) else { return false }
        do {
            try frame.validate()
            let i420 = try converter.convertToI420(frame)
            state.withLock { $0.accepted += 1 }
            handler(i420)
            return true
        } catch {
            let e = error as? OTError ?? OTError(.invalidParameter, "\(error)")
            let first = state.withLock { s -> Bool in
                s.refused += 1; defer { s.lastError = e }; return s.lastError != e
            }
            if first { Log.warn("capture", "refused a frame: \(e)") }
            return false
        }
    }
}
