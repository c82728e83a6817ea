import OTBase

/// Turns a captured frame of any supported format into I420. The format converters satisfy this;
/// `I420Passthrough` accepts I420 only.
public protocol FrameConverter: Sendable {
    /// The I420 picture for `frame`, which has passed `CapturedFrame.validate()`.
    /// Throws `invalidParameter` for a format the converter does not handle.
    func convertToI420(_ frame: CapturedFrame) throws -> VideoFrame
}
