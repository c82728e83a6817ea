import XCTest
@testable import OTMedia

final class FrameConversionTests: XCTestCase {
    /// BT.601 studio-range values for pure colours.
    let expected: [(rgb: (UInt8, UInt8, UInt8), yuv: (UInt8, UInt8, UInt8))] = [
        ((255, 0, 0), (82, 90, 240)),
        ((0, 255, 0), (144, 54, 34)),
        ((0, 0, 255), (41, 240, 110)),
        ((255, 255, 255), (235, 128, 128)),
        ((0, 0, 0), (16, 128, 128)),
    ]

    func pack(_ rgb: (UInt8, UInt8, UInt8), _ format: PackedRGBFormat) -> [UInt8] {
        let (r, g, b) = rgb
        switch format {
        case .rgb24: return [r, g, b]
        case .bgr24: return [b, g, r]
        case .bgra: return [b, g, r, 255]
        case .argb: return [255, r, g, b]
        case .rgba: return [r, g, b, 255]
        case .abgr: return [255, b, g, r]
        }
    }

    func testPackedRGBFormatsGiveBT601Values() throws {
        for format in PackedRGBFormat.allCases {
            for (rgb, yuv) in expected {
                let w = 6, h = 4, stride = w * format.bytesPerPixel + 5  // padded rows
                var data = [UInt8](repeating: 0xEE, count: stride * h)
                for y in 0..<h { for x in 0..<w { for (i, b) in pack(rgb, format).enumerated() { data[y * stride + x * format.bytesPerPixel + i] = b } } }
                var f = VideoFrame(width: 2, height: 2)
                try data.withUnsafeBytes { try f.convertFromRGB(format, width: w, height: h, data: $0, stride: stride, timestampMicros: 5) }
                XCTAssertEqual(f.width, w); XCTAssertEqual(f.timestampMicros, 5)
                XCTAssertEqual(Set(f.y), [yuv.0], "\(format) \(rgb)")
                XCTAssertEqual(Set(f.u), [yuv.1], "\(format) \(rgb)")
                XCTAssertEqual(Set(f.v), [yuv.2], "\(format) \(rgb)")
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
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromRGB(.bgra, width: 4, height: 4, data: $0, stride: 16, timestampMicros: 0) })
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromYUY2(width: 4, height: 4, data: $0, stride: 4, timestampMicros: 0) },
                             "stride below the row size")
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromRGB(.rgb24, width: 0, height: 4, data: $0, stride: 0, timestampMicros: 0) })
        XCTAssertThrowsError(try small.withUnsafeBytes { try f.convertFromRGB(.rgb24, width: 4, height: 4, data: $0, stride: Int.max / 2, timestampMicros: 0) },
                             "an overflowing stride is rejected, not trapped on")
    }
}
