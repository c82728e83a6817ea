/// Borrowed I420 planes (e.g. a decoder's output): valid only while the call that lends them runs.
public struct I420PlanesView {
    public let width: Int
    public let height: Int
    public let y: UnsafeBufferPointer<UInt8>
    public let strideY: Int
    public let u: UnsafeBufferPointer<UInt8>
    public let strideU: Int
    public let v: UnsafeBufferPointer<UInt8>
    public let strideV: Int
    public let timestampMicros: Int64

    /// Copies the picture into an owned frame (planes resized only when the size changes).
    public func copy(into frame: inout VideoFrame) throws {
        try frame.convertFromI420(width: width, height: height,
                                  y: UnsafeRawBufferPointer(y), strideY: strideY,
                                  u: UnsafeRawBufferPointer(u), strideU: strideU,
                                  v: UnsafeRawBufferPointer(v), strideV: strideV,
                                  timestampMicros: timestampMicros)
    }
}
