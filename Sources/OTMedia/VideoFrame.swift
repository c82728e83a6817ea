/// How a frame must be turned to be shown upright, as capturers report it.
public enum VideoRotation: Int32, Sendable {
    case r0 = 0, r90 = 90, r180 = 180, r270 = 270
}

/// An I420 (YUV 4:2:0 planar) picture: the format every stage inside the library uses.
///
/// Planes are stored with strides that may exceed the visible width; chroma
/// planes are ceil(width/2) × ceil(height/2).
public struct VideoFrame: Sendable {
    public var width: Int
    public var height: Int
    public var y: [UInt8]
    public var u: [UInt8]
    public var v: [UInt8]
    public var strideY: Int
    public var strideU: Int
    public var strideV: Int
    /// Capture time in microseconds (the capturer's clock).
    public var timestampMicros: Int64
    public var rotation: VideoRotation

    /// Chroma plane width and height for a picture size.
    public static func chromaSize(width: Int, height: Int) -> (width: Int, height: Int) {
        ((width + 1) / 2, (height + 1) / 2)
    }

    /// A black frame with tight strides.
    public init(width: Int, height: Int, timestampMicros: Int64 = 0, rotation: VideoRotation = .r0) {
        precondition(width > 0 && height > 0, "frame size must be positive")
        let c = Self.chromaSize(width: width, height: height)
        self.width = width
        self.height = height
        self.y = [UInt8](repeating: 16, count: width * height)
        self.u = [UInt8](repeating: 128, count: c.width * c.height)
        self.v = [UInt8](repeating: 128, count: c.width * c.height)
        self.strideY = width
        self.strideU = c.width
        self.strideV = c.width
        self.timestampMicros = timestampMicros
        self.rotation = rotation
    }

    /// A frame over given planes; the caller guarantees the planes hold `stride × rows` bytes.
    public init(width: Int, height: Int, y: [UInt8], u: [UInt8], v: [UInt8],
                strideY: Int, strideU: Int, strideV: Int, timestampMicros: Int64, rotation: VideoRotation = .r0) {
        self.width = width; self.height = height
        self.y = y; self.u = u; self.v = v
        self.strideY = strideY; self.strideU = strideU; self.strideV = strideV
        self.timestampMicros = timestampMicros; self.rotation = rotation
    }
}
