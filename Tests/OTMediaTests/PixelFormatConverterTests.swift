import OTBase
@testable import OTMedia
import XCTest

/// Every `PixelFormat` through `PixelFormatConverter`, against a reference conversion written out here.
final class PixelFormatConverterTests: XCTestCase {
    static let width = 14, height = 10  // even; odd sizes are covered by the converter tests

    /// A smooth, non-uniform picture.
    func reference() -> VideoFrame { movingPicture(width: Self.width, height: Self.height, t: 5) }

    /// RGB of a test pixel (varied so every channel matters).
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) { ((x * 17 + y * 3) % 256, (y * 23 + 40) % 256, (x * 5 + y * 11 + 90) % 256) }

    /// Packs the RGB test picture into a byte layout given as offsets of A (if any), R, G, B.
    func packed(bytesPerPixel: Int, a: Int?, r: Int, g: Int, b: Int, stride: Int) -> [UInt8] {
        var data = [UInt8](repeating: 0x77, count: stride * Self.height)
        for y in 0..<Self.height {
            for x in 0..<Self.width {
                let p = y * stride + x * bytesPerPixel, c = rgb(x, y)
                data[p + r] = UInt8(c.r); data[p + g] = UInt8(c.g); data[p + b] = UInt8(c.b)
                if let a { data[p + a] = 200 }
            }
        }
        return data
    }

    func testYUVFormatsReproduceThePlanesExactly() throws {
        let src = reference()
        let w = Self.width, h = Self.height, cw = w / 2, ch = h / 2
        let converter = PixelFormatConverter()
        var frames: [PixelFormat: CapturedFrame] = [:]
        frames[.i420] = CapturedFrame(format: .i420, width: w, height: h, planes: [src.y, src.u, src.v],
                                      strides: [w, cw, cw], timestampMicros: 9, rotation: .r180)
        var uv: [UInt8] = [], vu: [UInt8] = []
        for i in 0..<(cw * ch) { uv += [src.u[i], src.v[i]]; vu += [src.v[i], src.u[i]] }
        frames[.nv12] = CapturedFrame(format: .nv12, width: w, height: h, planes: [src.y, uv], strides: [w, 2 * cw], timestampMicros: 9, rotation: .r180)
        frames[.nv21] = CapturedFrame(format: .nv21, width: w, height: h, planes: [src.y, vu], strides: [w, 2 * cw], timestampMicros: 9, rotation: .r180)
        // 4:2:2 with equal chroma on both rows of a pair, rows padded by 6 bytes.
        let stride422 = cw * 4 + 6
        var yuy2 = [UInt8](repeating: 0, count: stride422 * h), uyvy = yuy2
        for y in 0..<h {
            for cx in 0..<cw {
                let o = y * stride422 + cx * 4
                let y0 = src.y[y * w + 2 * cx], y1 = src.y[y * w + 2 * cx + 1]
                let u = src.u[(y / 2) * cw + cx], v = src.v[(y / 2) * cw + cx]
                yuy2.replaceSubrange(o..<o + 4, with: [y0, u, y1, v])
                uyvy.replaceSubrange(o..<o + 4, with: [u, y0, v, y1])
            }
        }
        frames[.yuy2] = CapturedFrame(format: .yuy2, width: w, height: h, planes: [yuy2], strides: [stride422], timestampMicros: 9, rotation: .r180)
        frames[.uyvy] = CapturedFrame(format: .uyvy, width: w, height: h, planes: [uyvy], strides: [stride422], timestampMicros: 9, rotation: .r180)
        for (format, captured) in frames {
            XCTAssertNoThrow(try captured.validate(), "\(format)")
            let out = try converter.convertToI420(captured)
            XCTAssertEqual(out.y, src.y, "\(format) Y"); XCTAssertEqual(out.u, src.u, "\(format) U"); XCTAssertEqual(out.v, src.v, "\(format) V")
            XCTAssertEqual(out.timestampMicros, 9); XCTAssertEqual(out.rotation, .r180)
        }
    }

    func testPackedRGBFormatsMatchTheBT601Reference() throws {
        let w = Self.width, h = Self.height
        let converter = PixelFormatConverter()
        // The documented memory layouts of PixelFormat (libyuv naming): offsets of A, R, G, B.
        let layouts: [PixelFormat: (bpp: Int, a: Int?, r: Int, g: Int, b: Int)] = [
            .argb: (4, 3, 2, 1, 0),   // B G R A
            .bgra: (4, 0, 1, 2, 3),   // A R G B
            .rgb24: (3, nil, 2, 1, 0), // B G R
            .abgr: (4, 3, 0, 1, 2),   // R G B A
            .rgba: (4, 0, 3, 2, 1),   // A B G R
        ]
        XCTAssertEqual(Set(layouts.keys), Set(PixelFormat.allCases.filter { $0.packedRGBLayout != nil }))
        for (format, l) in layouts {
            let stride = w * l.bpp + 3
            let data = packed(bytesPerPixel: l.bpp, a: l.a, r: l.r, g: l.g, b: l.b, stride: stride)
            let out = try converter.convertToI420(CapturedFrame(format: format, width: w, height: h, planes: [data], strides: [stride], timestampMicros: 1))
            // Reference: BT.601 studio range in floating point, chroma from the 2×2 average.
            for y in 0..<h {
                for x in 0..<w {
                    let c = rgb(x, y)
                    let ref = 16 + (65.738 * Double(c.r) + 129.057 * Double(c.g) + 25.064 * Double(c.b)) / 256
                    XCTAssertEqual(Double(out.y[y * w + x]), ref, accuracy: 1.01, "\(format) Y at \(x),\(y)")
                }
            }
            for cy in 0..<(h / 2) {
                for cx in 0..<(w / 2) {
                    var r = 0.0, g = 0.0, b = 0.0
                    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let c = rgb(2 * cx + dx, 2 * cy + dy)
                        r += Double(c.r) / 4; g += Double(c.g) / 4; b += Double(c.b) / 4
                    }
                    let u = 128 + (-37.945 * r - 74.494 * g + 112.439 * b) / 256
                    let v = 128 + (112.439 * r - 94.154 * g - 18.285 * b) / 256
                    XCTAssertEqual(Double(out.u[cy * (w / 2) + cx]), u, accuracy: 1.51, "\(format) U at \(cx),\(cy)")
                    XCTAssertEqual(Double(out.v[cy * (w / 2) + cx]), v, accuracy: 1.51, "\(format) V at \(cx),\(cy)")
                }
            }
        }
    }

    func testCaptureSinkWithTheConverterAcceptsEveryFormat() throws {
        let sink = CaptureSink(converter: PixelFormatConverter()) { _ in }
        for format in PixelFormat.allCases where format != .mjpeg {
            let planes = format.planeGeometry(width: 6, height: 4).map { [UInt8](repeating: 100, count: $0.minStride * $0.rows) }
            let strides = format.planeGeometry(width: 6, height: 4).map(\.minStride)
            XCTAssertTrue(sink.consumeFrame(CapturedFrame(format: format, width: 6, height: 4, planes: planes, strides: strides, timestampMicros: 0)), "\(format)")
        }
        // MJPEG: one plane of JPEG bytes whose "stride" is the JPEG's length.
        XCTAssertTrue(sink.consumeFrame(CapturedFrame(format: .mjpeg, width: 32, height: 16, planes: [quadrantsJPEG + [0, 0]],
                                                      strides: [quadrantsJPEG.count], timestampMicros: 0)))
        XCTAssertFalse(sink.consumeFrame(CapturedFrame(format: .mjpeg, width: 32, height: 16, planes: [quadrantsJPEG],
                                                       strides: [quadrantsJPEG.count + 1], timestampMicros: 0)), "length beyond the plane")
        XCTAssertEqual(sink.counts.accepted, PixelFormat.allCases.count)
        XCTAssertEqual(sink.counts.refused, 1)
    }
}
