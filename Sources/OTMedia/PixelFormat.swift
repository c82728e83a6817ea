import OTBase

/// Pixel layouts a capturer may deliver. Raw values equal the C ABI's frame format numbers
/// (OpenTok's `otc_video_frame_format`: YUV420P 1 … MJPEG 10, RGBA32 11).
///
/// Packed RGB names follow libyuv and WebRTC, which OpenTok's native SDKs feed these formats to:
/// a name spells a little-endian 32-bit word from its high byte down, so `.argb` is B, G, R, A
/// at increasing addresses. `packedRGBLayout` gives the byte offsets.
public enum PixelFormat: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// Planar Y, U, V (4:2:0): the library's internal format.
    case i420 = 1
    /// Y plane, then interleaved U/V (4:2:0).
    case nv12 = 2
    /// Y plane, then interleaved V/U (4:2:0).
    case nv21 = 3
    /// Packed Y0 U Y1 V (4:2:2).
    case yuy2 = 4
    /// Packed U Y0 V Y1 (4:2:2).
    case uyvy = 5
    /// 32-bit pixels; bytes in memory B G R A.
    case argb = 6
    /// 32-bit pixels; bytes in memory A R G B.
    case bgra = 7
    /// 24-bit pixels; bytes in memory B G R.
    case rgb24 = 8
    /// 32-bit pixels; bytes in memory R G B A.
    case abgr = 9
    /// One JPEG picture per frame (an MJPEG camera's): one plane holding the compressed bytes, whose stride is
    /// the JPEG's length in bytes.
    case mjpeg = 10
    /// 32-bit pixels; bytes in memory A B G R.
    case rgba = 11

    /// For packed RGB formats: bytes per pixel and the byte offsets of red, green and blue within
    /// a pixel; nil for YUV formats.
    public var packedRGBLayout: (bytesPerPixel: Int, r: Int, g: Int, b: Int)? {
        switch self {
        case .argb: (4, 2, 1, 0)
        case .bgra: (4, 1, 2, 3)
        case .rgb24: (3, 2, 1, 0)
        case .abgr: (4, 0, 1, 2)
        case .rgba: (4, 3, 2, 1)
        case .i420, .nv12, .nv21, .yuy2, .uyvy, .mjpeg: nil
        }
    }

    /// How many planes a frame of this format carries.
    public var planeCount: Int {
        switch self {
        case .i420: 3
        case .nv12, .nv21: 2
        case .yuy2, .uyvy, .argb, .bgra, .rgb24, .abgr, .rgba, .mjpeg: 1
        }
    }

    /// The minimum stride (bytes per row) and row count of each plane for a picture size. MJPEG has one row whose
    /// "stride" is the JPEG's length (at least the 4 bytes of its start and end markers).
    public func planeGeometry(width: Int, height: Int) -> [(minStride: Int, rows: Int)] {
        let c = VideoFrame.chromaSize(width: width, height: height)
        switch self {
        case .i420: return [(width, height), (c.width, c.height), (c.width, c.height)]
        case .nv12, .nv21: return [(width, height), (c.width * 2, c.height)]
        case .yuy2, .uyvy: return [(c.width * 4, height)]
        case .rgb24: return [(width * 3, height)]
        case .argb, .bgra, .abgr, .rgba: return [(width * 4, height)]
        case .mjpeg: return [(4, 1)]
        }
    }

    /// How many bytes of a plane (`planeGeometry`'s entry) a frame reads at `stride`: full strides between rows, the
    /// last row only as wide as the picture (a cropped view of a larger buffer ends there); MJPEG's "stride" is the
    /// JPEG's length. nil when the stride is below the picture's row or the span overflows.
    public func planeSpan(stride: Int, _ plane: (minStride: Int, rows: Int)) -> Int? {
        if self == .mjpeg { return stride >= plane.minStride ? stride : nil }
        return VideoFrame.planeSpan(stride: stride, rowBytes: plane.minStride, rows: plane.rows)
    }

    public var description: String {
        switch self {
        case .i420: "I420"
        case .nv12: "NV12"
        case .nv21: "NV21"
        case .yuy2: "YUY2"
        case .uyvy: "UYVY"
        case .argb: "ARGB"
        case .bgra: "BGRA"
        case .rgb24: "RGB24"
        case .abgr: "ABGR"
        case .rgba: "RGBA"
        case .mjpeg: "MJPEG"
        }
    }
}
