import OTTestSupport
import XCTest
@testable import OTMedia

final class FrameConversionTests: XCTestCase {
    /// BT.601 studio-range values for pure colours (rounded from the exact ones).
    let expected: [(rgb: (UInt8, UInt8, UInt8), yuv: (UInt8, UInt8, UInt8))] = [
        ((255, 0, 0), (82, 90, 240)),
        ((0, 255, 0), (144, 54, 34)),
        ((0, 0, 255), (41, 240, 110)),
        ((255, 255, 255), (235, 128, 128)),
        ((0, 0, 0), (16, 128, 128)),
    ]

    /// One pixel of `rgb` in a packed format (libyuv names: `.argb` is B,G,R,A in memory).
    func pack(_ rgb: (UInt8, UInt8, UInt8), _ format: PixelFormat) -> [UInt8] {
        let (r, g, b) = rgb
        switch format {
        case .rgb24: return [b, g, r]
        case .argb: return [b, g, r, 255]
        case .bgra: return [255, r, g, b]
        case .abgr: return [r, g, b, 255]
        case .rgba: return [255, b, g, r]
        default: return []
        }
    }

    func testPackedRGBFormatsGiveBT601Values() throws {
        for format in PixelFormat.allCases {
            guard let layout = format.packedRGBLayout else { continue }
            for (rgb, yuv) in expected {
                let w = 6, h = 4, stride = w * layout.bytesPerPixel + 5  // padded rows
                var data = [UInt8](repeating: 0xEE, count: stride * h)
                for y in 0..<h { for x in 0..<w { for (i, b) in pack(rgb, format).enumerated() { data[y * stride + x * layout.bytesPerPixel + i] = b } } }
                var f = VideoFrame(width: 2, height: 2)
                try data.withUnsafeBytes { try f.convertFromRGB(format, width: w, height: h, data: $0, stride: stride, timestampMicros: 5) }
                XCTAssertEqual(f.width, w); XCTAssertEqual(f.timestampMicros, 5)
                XCTAssertEqual(Set(f.y), [yuv.0], "\(format) \(rgb)")
                // libyuv's SIMD chroma rounds down: saturated red's V is 239 where the exact value is 239.6.
                for (plane, want) in [(f.u, yuv.1), (f.v, yuv.2)] {
                    XCTAssertEqual(Set(plane).count, 1, "\(format) \(rgb)")
                    XCTAssertEqual(Double(plane[0]), Double(want), accuracy: 1, "\(format) \(rgb)")
                }
            }
        }
    }

    func testNV12AndYUY2KeepThePicture() throws {
        for (w, h) in [(64, 48), (5, 3)] {
            let src = movingPicture(width: w, height: h, t: 3)
            let (py, puv) = nv12Planes(src)
            var f = VideoFrame(width: 1, height: 1)
            try py.withUnsafeBytes { y in
                try puv.withUnsafeBytes { uv in
                    try f.convertFromNV12(width: w, height: h, y: y, strideY: w, uv: uv, strideUV: 2 * ((w + 1) / 2),
                                          timestampMicros: 1, rotation: .r90)
                }
            }
            XCTAssertEqual(f.y, src.y); XCTAssertEqual(f.u, src.u); XCTAssertEqual(f.v, src.v)
            XCTAssertEqual(f.rotation, .r90)

            // YUY2 with the same chroma on both rows of a pair reproduces the planes.
            let cw = (w + 1) / 2
            let stride = cw * 4
            var yuy2 = [UInt8](repeating: 0, count: stride * h)
            for y in 0..<h {
                for cx in 0..<cw {
                    let o = y * stride + cx * 4
                    yuy2[o] = src.y[y * w + 2 * cx]
                    yuy2[o + 1] = src.u[(y / 2) * cw + cx]
                    yuy2[o + 2] = 2 * cx + 1 < w ? src.y[y * w + 2 * cx + 1] : 0
                    yuy2[o + 3] = src.v[(y / 2) * cw + cx]
                }
            }
            var g = VideoFrame(width: 1, height: 1)
            try yuy2.withUnsafeBytes { try g.convertFromYUY2(width: w, height: h, data: $0, stride: stride, timestampMicros: 0) }
            XCTAssertEqual(g.y, src.y); XCTAssertEqual(g.u, src.u); XCTAssertEqual(g.v, src.v)
        }
    }

    func testTooSmallBuffersAreRejected() {
        var f = VideoFrame(width: 2, height: 2)
        let small = [UInt8](repeating: 0, count: 10)
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromRGB(.argb, width: 4, height: 4, data: $0, stride: 16, timestampMicros: 0) })
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromYUY2(width: 4, height: 4, data: $0, stride: 4, timestampMicros: 0) },
                             "stride below the row size")
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromRGB(.rgb24, width: 0, height: 4, data: $0, stride: 0, timestampMicros: 0) })
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromRGB(.rgb24, width: 4, height: 4, data: $0, stride: Int.max / 2, timestampMicros: 0) },
                             "an overflowing stride is rejected, not trapped on")
    }
    func testMJPEGDecodesTheKnownPicture() throws {
        var f = VideoFrame(width: 2, height: 2)
        try quadrantsJPEG.withUnsafeBytes { try f.convertFromMJPEG(width: 32, height: 16, data: $0, timestampMicros: 7, rotation: .r90) }
        XCTAssertEqual(f.width, 32); XCTAssertEqual(f.height, 16)
        XCTAssertEqual(f.timestampMicros, 7); XCTAssertEqual(f.rotation, .r90)
        XCTAssertLessThanOrEqual(FourQuadrants.largestError(f), 3, "\(FourQuadrants.means(f))")
    }

    /// Damaged, foreign or mis-sized JPEG data is refused with an error; nothing traps or exits (libjpeg's default
    /// error handler would call exit(): libyuv installs its own).
    func testDamagedMJPEGIsRefused() throws {
        var f = VideoFrame(width: 2, height: 2)
        func decode(_ bytes: [UInt8], width: Int = 32, height: Int = 16) throws {
            try bytes.withUnsafeBytes { try f.convertFromMJPEG(width: width, height: height, data: $0, timestampMicros: 0) }
        }
        XCTAssertThrowsError(try decode(quadrantsJPEG, width: 64, height: 32), "a picture of another size")
        XCTAssertThrowsError(try decode([]))
        XCTAssertThrowsError(try decode([0xFF, 0xD8, 0xFF, 0xD9]))
        XCTAssertThrowsError(try decode([UInt8](repeating: 0x5A, count: 700)))
        // Header intact, entropy-coded data overwritten or cut: refused or decoded to a picture of the right size.
        var random = SystemRandomNumberGenerator()
        for cut in stride(from: 20, to: quadrantsJPEG.count, by: 37) {
            var damaged = Array(quadrantsJPEG.prefix(cut))
            if cut % 2 == 0 { damaged += (0..<200).map { _ in UInt8.random(in: 0...255, using: &random) } }
            if (try? decode(damaged)) != nil { XCTAssertEqual(f.width * f.height, 32 * 16) }
        }
    }

    func testScalingKeepsThePicture() throws {
        var src = VideoFrame(width: 2, height: 2)
        try quadrantsJPEG.withUnsafeBytes { try src.convertFromMJPEG(width: 32, height: 16, data: $0, timestampMicros: 3) }
        for (w, h, filter) in [(16, 8, VideoFrame.ScaleFilter.box), (64, 32, .bilinear), (31, 15, .point)] {
            var out = VideoFrame(width: 1, height: 1)
            try out.scale(src, toWidth: w, height: h, filter: filter)
            XCTAssertEqual(out.width, w); XCTAssertEqual(out.height, h); XCTAssertEqual(out.timestampMicros, 3)
            XCTAssertLessThanOrEqual(FourQuadrants.largestError(out), 6, "\(w)x\(h) \(filter): \(FourQuadrants.means(out))")
        }
        var bad = src
        bad.y = [1, 2, 3]
        var out = VideoFrame(width: 1, height: 1)
        XCTAssertThrowsError(try out.scale(bad, toWidth: 8, height: 8), "planes smaller than the size and strides")
        XCTAssertThrowsError(try out.scale(src, toWidth: 0, height: 8))
    }
}
