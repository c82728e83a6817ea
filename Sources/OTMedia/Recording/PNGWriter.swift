import CPNG
import OTBase

/// Saves an I420 frame as a PNG snapshot (RGB, 8 bits per channel) through libpng's simplified API.
public enum PNGWriter {
    /// Writes `frame` to `path`, converting BT.601 limited-range YUV to RGB.
    public static func write(_ frame: VideoFrame, to path: String) throws {
        try validate(frame)
        let rgb = rgb24(from: frame)
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        image.width = UInt32(frame.width)
        image.height = UInt32(frame.height)
        image.format = UInt32(PNG_FORMAT_RGB)
        let ok = rgb.withUnsafeBytes { buf in
            png_image_write_to_file(&image, path, 0, buf.baseAddress, Int32(frame.width * 3), nil)
        }
        guard ok != 0 else {
            let message = withUnsafeBytes(of: image.message) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            png_image_free(&image)
            throw OTError(.internalError, "writing PNG \(path) failed: \(message)")
        }
    }

    /// The frame as packed RGB24 rows (width × 3 bytes each), BT.601 limited range, chroma
    /// taken from the 2×2 block each pixel belongs to.
    public static func rgb24(from frame: VideoFrame) -> [UInt8] {
        let w = frame.width, h = frame.height
        var out = [UInt8](repeating: 0, count: max(0, w * h * 3))
        guard (try? validate(frame)) != nil else { return out }
        out.withUnsafeMutableBufferPointer { dst in
            frame.y.withUnsafeBufferPointer { yp in
                frame.u.withUnsafeBufferPointer { up in
                    frame.v.withUnsafeBufferPointer { vp in
                        for row in 0..<h {
                            let yRow = row * frame.strideY
                            let uRow = (row / 2) * frame.strideU
                            let vRow = (row / 2) * frame.strideV
                            var o = row * w * 3
                            for x in 0..<w {
                                let c = 298 * (Int(yp[yRow + x]) - 16)
                                let d = Int(up[uRow + x / 2]) - 128
                                let e = Int(vp[vRow + x / 2]) - 128
                                dst[o] = UInt8(clamping: (c + 409 * e + 128) >> 8)
                                dst[o + 1] = UInt8(clamping: (c - 100 * d - 208 * e + 128) >> 8)
                                dst[o + 2] = UInt8(clamping: (c + 516 * d + 128) >> 8)
                                o += 3
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    private static func validate(_ f: VideoFrame) throws {
        let c = VideoFrame.chromaSize(width: f.width, height: f.height)
        guard f.width > 0, f.height > 0, f.strideY >= f.width, f.strideU >= c.width, f.strideV >= c.width,
              f.y.count >= (f.height - 1) * f.strideY + f.width,
              f.u.count >= (c.height - 1) * f.strideU + c.width,
              f.v.count >= (c.height - 1) * f.strideV + c.width else {
            throw OTError(.invalidParameter, "frame planes do not match \(f.width)x\(f.height) with their strides")
        }
    }
}
