import OTBase

/// A source of video (OpenTok's custom video capturer): the library calls `initCapture` once
/// with the consumer, then `startCapture`/`stopCapture` as publishing starts and stops,
/// and `releaseCapture` when the publisher goes away. While started, the capturer pushes
/// frames into the consumer from any thread.
public protocol VideoCapturer: AnyObject, Sendable {
    /// What the capturer will deliver; read before `startCapture`.
    var captureSettings: VideoCaptureSettings { get }
    /// Remembers the consumer frames go to.
    func initCapture(consumer: any VideoFrameConsumer) throws
    /// Begins delivering frames.
    func startCapture() throws
    /// Stops delivering frames; after it returns no new frame is pushed.
    func stopCapture()
    /// Forgets the consumer and frees resources.
    func releaseCapture()
    /// True between `startCapture` and `stopCapture`.
    var isCapturing: Bool { get }
}
