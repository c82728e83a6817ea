import OTBase

/// What a capturer produces: size, format and frame rate (OpenTok's capture settings).
public struct VideoCaptureSettings: Sendable, Equatable {
    public var format: PixelFormat
    public var width: Int
    public var height: Int
    public var fps: Int
    /// The capturer's own delay from exposure to delivery, in milliseconds (informational).
    public var expectedDelayMillis: Int

    public init(format: PixelFormat = .i420, width: Int = 640, height: Int = 480, fps: Int = 30,
                expectedDelayMillis: Int = 0) {
        self.format = format; self.width = width; self.height = height; self.fps = fps
        self.expectedDelayMillis = expectedDelayMillis
    }

    /// Throws `invalidParameter` unless the size and rate are positive and plausible.
    public func validate() throws {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw OTError(.invalidParameter, "capture size \(width)x\(height) is out of range 1...8192")
        }
        guard fps > 0, fps <= 240 else {
            throw OTError(.invalidParameter, "capture rate \(fps) fps is out of range 1...240")
        }
    }
}
