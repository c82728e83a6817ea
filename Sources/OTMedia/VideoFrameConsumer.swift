/// Where a capturer pushes its frames. Safe to call from any thread.
public protocol VideoFrameConsumer: AnyObject, Sendable {
    /// Takes one captured frame. Returns false when the frame was refused (invalid or unconvertible).
    @discardableResult
    func consumeFrame(_ frame: CapturedFrame) -> Bool
}
