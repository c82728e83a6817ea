import OTBase

/// One picture as a capturer hands it over, in any `PixelFormat`, before conversion to I420.
public struct CapturedFrame: Sendable {
    public var format: PixelFormat
    public var width: Int
    public var height: Int
    /// The planes in format order (I420: Y, U, V; NV12/NV21: Y, UV; packed formats: one plane).
    public var planes: [[UInt8]]
    /// Bytes per row of each plane.
    public var strides: [Int]
    /// Capture time in microseconds (the capturer's clock).
    public var timestampMicros: Int64
    public var rotation: VideoRotation

    public init(format: PixelFormat, width: Int, height: Int, planes: [[UInt8]], strides: [Int],
                timestampMicros: Int64, rotation: VideoRotation = .r0) {
        self.format = format; self.width = width; self.height = height
        self.planes = planes; self.strides = strides
        self.timestampMicros = timestampMicros; self.rotation = rotation
    }

    /// A carrier for an I420 frame (no copy of the planes: arrays are copy-on-write).
    public init(_ frame: VideoFrame) {
        self.init(format: .i420, width: frame.width, height: frame.height,
                  planes: [frame.y, frame.u, frame.v], strides: [frame.strideY, frame.strideU, frame.strideV],
                  timestampMicros: frame.timestampMicros, rotation: frame.rotation)
    }

    /// Throws `invalidParameter` when the size is not positive or a plane is missing or too small
    /// for its stride and row count. Frames from user code must pass this before they are read.
    public func validate() throws {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw OTError(.invalidParameter, "frame size \(width)x\(height) is out of range 1...8192")
        }
        let geometry = format.planeGeometry(width: width, height: height)
        guard planes.count == geometry.count, strides.count == geometry.count else {
            throw OTError(.invalidParameter, "\(format) needs \(geometry.count) planes and strides, got \(planes.count) and \(strides.count)")
        }
        for (i, g) in geometry.enumerated() {
            guard strides[i] >= g.minStride else {
                throw OTError(.invalidParameter, "\(format) plane \(i) stride \(strides[i]) is below \(g.minStride)")
            }
            let needed = format.planeSpan(stride: strides[i], g) ?? Int.max
            guard planes[i].count >= needed else {
                throw OTError(.invalidParameter, "\(format) plane \(i) holds \(planes[i].count) bytes, needs \(needed)")
            }
        }
    }
}
