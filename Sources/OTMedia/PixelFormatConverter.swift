import OTBase

/// The converter a publisher uses by default: turns a captured frame of any `PixelFormat` (MJPEG included) into
/// I420 with the libyuv conversions of `FrameConversion.swift` (BT.601 studio range for RGB input).
public struct PixelFormatConverter: FrameConverter {
    public init() {}

    public func convertToI420(_ frame: CapturedFrame) throws -> VideoFrame {
        let geometry = frame.format.planeGeometry(width: frame.width, height: frame.height)
        guard frame.planes.count == geometry.count, frame.strides.count == geometry.count else {
            throw OTError(.invalidParameter, "\(frame.format) needs \(geometry.count) planes")
        }
        var out = VideoFrame(width: 1, height: 1)
        let w = frame.width, h = frame.height, ts = frame.timestampMicros, rot = frame.rotation
        let p = frame.planes, s = frame.strides
        switch frame.format {
        case .i420:
            try p[0].withUnsafeBytes { y in
                try p[1].withUnsafeBytes { u in
                    try p[2].withUnsafeBytes { v in
                        try out.convertFromI420(width: w, height: h, y: y, strideY: s[0], u: u, strideU: s[1], v: v, strideV: s[2],
                                                timestampMicros: ts, rotation: rot)
                    }
                }
            }
        case .nv12:
            try p[0].withUnsafeBytes { y in
                try p[1].withUnsafeBytes { uv in
                    try out.convertFromNV12(width: w, height: h, y: y, strideY: s[0], uv: uv, strideUV: s[1], timestampMicros: ts, rotation: rot)
                }
            }
        case .nv21:
            try p[0].withUnsafeBytes { y in
                try p[1].withUnsafeBytes { vu in
                    try out.convertFromNV21(width: w, height: h, y: y, strideY: s[0], vu: vu, strideVU: s[1], timestampMicros: ts, rotation: rot)
                }
            }
        case .yuy2:
            try p[0].withUnsafeBytes { try out.convertFromYUY2(width: w, height: h, data: $0, stride: s[0], timestampMicros: ts, rotation: rot) }
        case .uyvy:
            try p[0].withUnsafeBytes { try out.convertFromUYVY(width: w, height: h, data: $0, stride: s[0], timestampMicros: ts, rotation: rot) }
        case .mjpeg:
            try p[0].withUnsafeBytes { bytes in
                guard s[0] >= 0, s[0] <= bytes.count else { throw OTError(.invalidParameter, "MJPEG length \(s[0]) exceeds its plane") }
                try out.convertFromMJPEG(width: w, height: h, data: UnsafeRawBufferPointer(rebasing: bytes[0..<s[0]]),
                                         timestampMicros: ts, rotation: rot)
            }
        case .argb, .bgra, .rgb24, .abgr, .rgba:
            try p[0].withUnsafeBytes {
                try out.convertFromRGB(frame.format, width: w, height: h, data: $0, stride: s[0], timestampMicros: ts, rotation: rot)
            }
        }
        return out
    }
}
