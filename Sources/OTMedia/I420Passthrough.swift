import OTBase

/// A converter that accepts frames already in I420 and refuses every other format.
public struct I420Passthrough: FrameConverter {
    public init() {}
    public func convertToI420(_ frame: CapturedFrame) throws -> VideoFrame {
        guard frame.format == .i420 else {
            throw OTError(.invalidParameter, "no converter for \(frame.format) frames")
        }
        return VideoFrame(width: frame.width, height: frame.height, y: frame.planes[0], u: frame.planes[1],
                          v: frame.planes[2], strideY: frame.strides[0], strideU: frame.strides[1],
                          strideV: frame.strides[2], timestampMicros: frame.timestampMicros,
                          rotation: frame.rotation)
    }
}
