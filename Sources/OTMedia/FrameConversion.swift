import CYUV
import OTBase

/// Conversions into I420 and scaling, all done by libyuv (SIMD row functions; BT.601 studio range for RGB input,
/// chroma from the 2×2 average). Each writes into the frame's existing planes when their size fits, so a frame
/// reused from one capture to the next allocates nothing.
extension VideoFrame {
    /// Sets the size and tight strides, keeping plane storage when its size already matches.
    public mutating func reshape(width: Int, height: Int) throws {
        guard width > 0, height > 0, width <= 16384, height <= 16384 else {
            throw OTError(.invalidParameter, "frame size \(width)x\(height) out of range")
        }
        let c = Self.chromaSize(width: width, height: height)
        self.width = width; self.height = height
        strideY = width; strideU = c.width; strideV = c.width
        if y.count != width * height { y = [UInt8](repeating: 0, count: width * height) }
        if u.count != c.width * c.height { u = [UInt8](repeating: 0, count: c.width * c.height) }
        if v.count != c.width * c.height { v = [UInt8](repeating: 0, count: c.width * c.height) }
    }

    /// Bytes a plane of `rows` rows at `stride` spans, or nil when that overflows.
    static func planeSpan(stride: Int, rowBytes: Int, rows: Int) -> Int? {
        guard stride >= rowBytes, rowBytes > 0, rows > 0 else { return nil }
        let (full, o1) = stride.multipliedReportingOverflow(by: rows - 1)
        let (span, o2) = full.addingReportingOverflow(rowBytes)
        return o1 || o2 ? nil : span
    }

    /// The buffer's start, once it is known to hold `rows` rows of `rowBytes` at `stride` (and the stride fits an
    /// `Int32`, as libyuv takes it).
    private static func checked(_ buffer: UnsafeRawBufferPointer, stride: Int, rowBytes: Int, rows: Int,
                                _ what: String) throws -> UnsafePointer<UInt8> {
        guard let base = buffer.baseAddress, stride <= Int(Int32.max),
              let span = planeSpan(stride: stride, rowBytes: rowBytes, rows: rows), buffer.count >= span else {
            throw OTError(.invalidParameter, "\(what) buffer of \(buffer.count) bytes too small for stride \(stride) × \(rows) rows")
        }
        return base.assumingMemoryBound(to: UInt8.self)
    }

    /// Reshapes to `width`×`height`, sets the time and rotation, and runs `body` with the destination planes.
    /// `body` returns libyuv's status (0 for success).
    private mutating func fill(width: Int, height: Int, timestampMicros: Int64, rotation: VideoRotation, _ what: String,
                               _ body: (_ y: UnsafeMutablePointer<UInt8>, _ u: UnsafeMutablePointer<UInt8>,
                                        _ v: UnsafeMutablePointer<UInt8>) -> Int32) throws {
        try reshape(width: width, height: height)
        self.timestampMicros = timestampMicros; self.rotation = rotation
        let status = y.withUnsafeMutableBufferPointer { py in
            u.withUnsafeMutableBufferPointer { pu in
                v.withUnsafeMutableBufferPointer { pv -> Int32 in
                    guard let dy = py.baseAddress, let du = pu.baseAddress, let dv = pv.baseAddress else { return -1 }
                    return body(dy, du, dv)
                }
            }
        }
        guard status == 0 else { throw OTError(.invalidParameter, "\(what) conversion failed (libyuv status \(status))") }
    }

    /// Fills this frame from NV12 (Y plane, then interleaved U/V at half resolution).
    public mutating func convertFromNV12(width: Int, height: Int, y srcY: UnsafeRawBufferPointer, strideY sY: Int,
                                         uv srcUV: UnsafeRawBufferPointer, strideUV sUV: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        let py = try Self.checked(srcY, stride: sY, rowBytes: width, rows: height, "NV12 Y")
        let puv = try Self.checked(srcUV, stride: sUV, rowBytes: c.width * 2, rows: c.height, "NV12 chroma")
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "NV12") { dy, du, dv in
            NV12ToI420(py, Int32(sY), puv, Int32(sUV), dy, w, du, cw, dv, cw, w, h)
        }
    }

    /// Fills this frame from NV21 (Y plane, then interleaved V/U at half resolution).
    public mutating func convertFromNV21(width: Int, height: Int, y srcY: UnsafeRawBufferPointer, strideY sY: Int,
                                         vu srcVU: UnsafeRawBufferPointer, strideVU sVU: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        let py = try Self.checked(srcY, stride: sY, rowBytes: width, rows: height, "NV21 Y")
        let pvu = try Self.checked(srcVU, stride: sVU, rowBytes: c.width * 2, rows: c.height, "NV21 chroma")
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "NV21") { dy, du, dv in
            NV21ToI420(py, Int32(sY), pvu, Int32(sVU), dy, w, du, cw, dv, cw, w, h)
        }
    }

    /// Fills this frame from YUY2 (packed Y0 U Y1 V, 4:2:2); chroma of two rows is averaged.
    public mutating func convertFromYUY2(width: Int, height: Int, data: UnsafeRawBufferPointer, stride: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        let src = try Self.checked(data, stride: stride, rowBytes: c.width * 4, rows: height, "YUY2")
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "YUY2") { dy, du, dv in
            YUY2ToI420(src, Int32(stride), dy, w, du, cw, dv, cw, w, h)
        }
    }

    /// Fills this frame from UYVY (packed U Y0 V Y1, 4:2:2); chroma of two rows is averaged.
    public mutating func convertFromUYVY(width: Int, height: Int, data: UnsafeRawBufferPointer, stride: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        let src = try Self.checked(data, stride: stride, rowBytes: c.width * 4, rows: height, "UYVY")
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "UYVY") { dy, du, dv in
            UYVYToI420(src, Int32(stride), dy, w, du, cw, dv, cw, w, h)
        }
    }

    /// Fills this frame from a packed RGB `format` (see `PixelFormat.packedRGBLayout`); throws `invalidParameter`
    /// for a YUV format.
    public mutating func convertFromRGB(_ format: PixelFormat, width: Int, height: Int, data: UnsafeRawBufferPointer,
                                        stride: Int, timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        guard let layout = format.packedRGBLayout else { throw OTError(.invalidParameter, "\(format) is not a packed RGB format") }
        let c = Self.chromaSize(width: width, height: height)
        let src = try Self.checked(data, stride: stride, rowBytes: width * layout.bytesPerPixel, rows: height, "\(format)")
        let (w, h, cw, s) = (Int32(width), Int32(height), Int32(c.width), Int32(stride))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "\(format)") { dy, du, dv in
            switch format {
            case .argb: ARGBToI420(src, s, dy, w, du, cw, dv, cw, w, h)
            case .bgra: BGRAToI420(src, s, dy, w, du, cw, dv, cw, w, h)
            case .abgr: ABGRToI420(src, s, dy, w, du, cw, dv, cw, w, h)
            case .rgba: RGBAToI420(src, s, dy, w, du, cw, dv, cw, w, h)
            case .rgb24: RGB24ToI420(src, s, dy, w, du, cw, dv, cw, w, h)
            case .i420, .nv12, .nv21, .yuy2, .uyvy, .mjpeg: -1
            }
        }
    }

    /// Fills this frame by decoding one JPEG picture (a frame of an MJPEG camera: baseline JPEG, any chroma
    /// subsampling). The JPEG must be `width`×`height`; a damaged or different picture throws `invalidParameter`.
    public mutating func convertFromMJPEG(width: Int, height: Int, data: UnsafeRawBufferPointer,
                                          timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        guard let base = data.baseAddress, data.count >= 4 else { throw OTError(.invalidParameter, "an MJPEG frame of \(data.count) bytes") }
        let src = base.assumingMemoryBound(to: UInt8.self)
        var jw: Int32 = 0, jh: Int32 = 0
        guard MJPGSize(src, data.count, &jw, &jh) == 0, Int(jw) == width, Int(jh) == height else {
            throw OTError(.invalidParameter, "the MJPEG frame is not a \(width)x\(height) JPEG picture (read \(jw)x\(jh))")
        }
        let c = Self.chromaSize(width: width, height: height)
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "MJPEG") { dy, du, dv in
            MJPGToI420(src, data.count, dy, w, du, cw, dv, cw, w, h, w, h)
        }
    }

    /// Fills this frame from I420 planes with any strides (copies rows).
    public mutating func convertFromI420(width: Int, height: Int,
                                         y srcY: UnsafeRawBufferPointer, strideY sY: Int,
                                         u srcU: UnsafeRawBufferPointer, strideU sU: Int,
                                         v srcV: UnsafeRawBufferPointer, strideV sV: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        let py = try Self.checked(srcY, stride: sY, rowBytes: width, rows: height, "I420 Y")
        let pu = try Self.checked(srcU, stride: sU, rowBytes: c.width, rows: c.height, "I420 U")
        let pv = try Self.checked(srcV, stride: sV, rowBytes: c.width, rows: c.height, "I420 V")
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try fill(width: width, height: height, timestampMicros: timestampMicros, rotation: rotation, "I420") { dy, du, dv in
            I420Copy(py, Int32(sY), pu, Int32(sU), pv, Int32(sV), dy, w, du, cw, dv, cw, w, h)
        }
    }

    /// How `scale(_:toWidth:height:filter:)` resamples (libyuv's filter modes).
    public enum ScaleFilter: Sendable {
        /// Nearest neighbour: fastest, blocky.
        case point
        /// Bilinear interpolation.
        case bilinear
        /// Area averaging: the best quality when scaling down.
        case box
    }

    /// Fills this frame with `source` resampled to `width`×`height` (time and rotation carried over).
    public mutating func scale(_ source: VideoFrame, toWidth width: Int, height: Int, filter: ScaleFilter = .box) throws {
        let sc = Self.chromaSize(width: source.width, height: source.height)
        guard let sy = Self.planeSpan(stride: source.strideY, rowBytes: source.width, rows: source.height), source.y.count >= sy,
              let su = Self.planeSpan(stride: source.strideU, rowBytes: sc.width, rows: sc.height), source.u.count >= su,
              let sv = Self.planeSpan(stride: source.strideV, rowBytes: sc.width, rows: sc.height), source.v.count >= sv,
              max(source.strideY, source.strideU, source.strideV) <= Int(Int32.max) else {
            throw OTError(.invalidParameter, "the source frame's planes do not match its size and strides")
        }
        let mode: FilterMode = switch filter {
        case .point: kFilterNone
        case .bilinear: kFilterBilinear
        case .box: kFilterBox
        }
        let c = Self.chromaSize(width: width, height: height)
        let (w, h, cw) = (Int32(width), Int32(height), Int32(c.width))
        try source.y.withUnsafeBufferPointer { py in
            try source.u.withUnsafeBufferPointer { pu in
                try source.v.withUnsafeBufferPointer { pv in
                    try fill(width: width, height: height, timestampMicros: source.timestampMicros, rotation: source.rotation,
                             "scaling") { dy, du, dv in
                        guard let y = py.baseAddress, let u = pu.baseAddress, let v = pv.baseAddress else { return -1 }
                        return I420Scale(y, Int32(source.strideY), u, Int32(source.strideU), v, Int32(source.strideV),
                                         Int32(source.width), Int32(source.height), dy, w, du, cw, dv, cw, w, h, mode)
                    }
                }
            }
        }
    }
}
