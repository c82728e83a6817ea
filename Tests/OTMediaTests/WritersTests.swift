import CPNG
import Foundation
import OTBase
import XCTest
@testable import OTMedia

private func le16(_ d: [UInt8], _ o: Int) -> Int { Int(d[o]) | Int(d[o + 1]) << 8 }
private func le32(_ d: [UInt8], _ o: Int) -> Int { le16(d, o) | le16(d, o + 2) << 16 }
private func le64(_ d: [UInt8], _ o: Int) -> UInt64 { UInt64(le32(d, o)) | UInt64(le32(d, o + 4)) << 32 }
private func ascii(_ d: [UInt8], _ o: Int, _ n: Int) -> String { String(decoding: d[o..<(o + n)], as: UTF8.self) }

/// Reads a PNG with libpng's simplified API as packed RGB24.
private func readPNG(_ path: String) throws -> (width: Int, height: Int, rgb: [UInt8]) {
    var image = png_image()
    image.version = UInt32(PNG_IMAGE_VERSION)
    guard png_image_begin_read_from_file(&image, path) != 0 else { throw WireError("not a PNG") }
    image.format = UInt32(PNG_FORMAT_RGB)
    let w = Int(image.width), h = Int(image.height)
    var rgb = [UInt8](repeating: 0, count: w * h * 3)
    let ok = rgb.withUnsafeMutableBytes { png_image_finish_read(&image, nil, $0.baseAddress, Int32(w * 3), nil) }
    guard ok != 0 else { png_image_free(&image); throw WireError("PNG decode failed") }
    return (w, h, rgb)
}

final class WritersTests: XCTestCase {
    func testIVFHoldsDecodableVP8FramesWithTimestamps() throws {
        let dir = try pipelineTempDirectory(self)
        let path = dir.appendingPathComponent("out.ivf").path
        let vp8 = try PipelineVP8Loop(width: 320, height: 240, kbps: 300, fps: 30)
        let source = try TestPatternSource(width: 320, height: 240)
        let writer = try IVFWriter(path: path, width: 320, height: 240)
        var written: [[UInt8]] = []
        for n in 0..<20 {
            for data in try vp8.encode(source.render(frameNumber: UInt32(n), timestampMicros: Int64(n) * 33_333), pts: Int64(n)) {
                try writer.write(frame: data, timestamp: UInt64(n) * 3000)
                written.append(data)
            }
        }
        XCTAssertEqual(writer.frameCount, 20)
        try writer.close()
        try writer.close()  // idempotent
        XCTAssertThrowsError(try writer.write(frame: [1], timestamp: 0), "closed")

        let d = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertEqual(ascii(d, 0, 4), "DKIF")
        XCTAssertEqual(le16(d, 4), 0); XCTAssertEqual(le16(d, 6), 32)
        XCTAssertEqual(ascii(d, 8, 4), "VP80")
        XCTAssertEqual(le16(d, 12), 320); XCTAssertEqual(le16(d, 14), 240)
        XCTAssertEqual(le32(d, 16), 90_000); XCTAssertEqual(le32(d, 20), 1)
        XCTAssertEqual(le32(d, 24), 20, "frame count patched on close")
        // Walk the frames, decode them with a second decoder and read the pattern's counter back.
        let reader = try PipelineVP8Loop(width: 320, height: 240, kbps: 300, fps: 30)
        var o = 32, n = 0
        while o < d.count {
            let size = le32(d, o)
            XCTAssertEqual(le64(d, o + 4), UInt64(n) * 3000)
            let frame = Array(d[(o + 12)..<(o + 12 + size)])
            XCTAssertEqual(frame, written[n])
            let pictures = try reader.decode(frame)
            XCTAssertEqual(pictures.count, 1)
            XCTAssertEqual(pictures.first.flatMap(TestPatternReader.read)?.frameNumber, UInt32(n))
            o += 12 + size; n += 1
        }
        XCTAssertEqual(o, d.count)
        XCTAssertEqual(n, 20)
    }

    func testWAVHeaderAndSamplesReadBack() throws {
        let dir = try pipelineTempDirectory(self)
        let path = dir.appendingPathComponent("out.wav").path
        let writer = try WAVWriter(path: path, sampleRate: 48_000, channels: 2)
        let a: [Int16] = [0, 1, -1, 32_767, -32_768, 12_345]
        let b: [Int16] = (0..<960).map { Int16(truncatingIfNeeded: $0 * 77) }
        try writer.write(a)
        try writer.write(b)
        XCTAssertEqual(writer.frameCount, (a.count + b.count) / 2)
        try writer.close()

        let d = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertEqual(ascii(d, 0, 4), "RIFF"); XCTAssertEqual(le32(d, 4), d.count - 8)
        XCTAssertEqual(ascii(d, 8, 4), "WAVE"); XCTAssertEqual(ascii(d, 12, 4), "fmt ")
        XCTAssertEqual(le32(d, 16), 16); XCTAssertEqual(le16(d, 20), 1, "PCM")
        XCTAssertEqual(le16(d, 22), 2); XCTAssertEqual(le32(d, 24), 48_000)
        XCTAssertEqual(le32(d, 28), 48_000 * 4); XCTAssertEqual(le16(d, 32), 4); XCTAssertEqual(le16(d, 34), 16)
        XCTAssertEqual(ascii(d, 36, 4), "data"); XCTAssertEqual(le32(d, 40), (a.count + b.count) * 2)
        let samples = stride(from: 44, to: d.count, by: 2).map { Int16(bitPattern: UInt16(le16(d, $0))) }
        XCTAssertEqual(samples, a + b)
    }

    func testPNGSnapshotDecodesToTheConvertedPixels() throws {
        let dir = try pipelineTempDirectory(self)
        let path = dir.appendingPathComponent("snap.png").path
        let frame = try TestPatternSource(width: 320, height: 240).render(frameNumber: 12, timestampMicros: 99)
        try PNGWriter.write(frame, to: path)
        let png = try readPNG(path)
        XCTAssertEqual(png.width, 320); XCTAssertEqual(png.height, 240)
        XCTAssertEqual(png.rgb, PNGWriter.rgb24(from: frame), "PNG is lossless")
    }

    func testI420ToRGBKnownColoursAndPaddedStrides() throws {
        // 5×3 picture (odd sizes), strides wider than the picture, four known colours.
        let w = 5, h = 3, sy = 8, sc = 4
        var y = [UInt8](repeating: 0, count: sy * h), u = [UInt8](repeating: 0, count: sc * 2), v = u
        let colours: [(y: UInt8, u: UInt8, v: UInt8, rgb: (Int, Int, Int))] = [
            (235, 128, 128, (255, 255, 255)), (16, 128, 128, (0, 0, 0)),
            (81, 90, 240, (255, 0, 0)), (41, 240, 110, (0, 0, 255)),
        ]
        // Chroma block (cx, cy) gets colour index cx + 2·cy (only blocks 0–3 exist at x < 4, y < 2).
        for row in 0..<h { for x in 0..<w { y[row * sy + x] = colours[min(x / 2, 1) + 2 * min(row / 2, 1)].y } }
        for cy in 0..<2 { for cx in 0..<3 { let c = colours[min(cx, 1) + 2 * cy]; u[cy * sc + cx] = c.u; v[cy * sc + cx] = c.v } }
        let frame = VideoFrame(width: w, height: h, y: y, u: u, v: v, strideY: sy, strideU: sc, strideV: sc, timestampMicros: 0)
        let rgb = PNGWriter.rgb24(from: frame)
        XCTAssertEqual(rgb.count, w * h * 3)
        func px(_ x: Int, _ row: Int) -> (Int, Int, Int) {
            let o = (row * w + x) * 3
            return (Int(rgb[o]), Int(rgb[o + 1]), Int(rgb[o + 2]))
        }
        for (x, row, i) in [(0, 0, 0), (1, 1, 0), (2, 0, 1), (4, 1, 1), (0, 2, 2), (3, 2, 3)] {
            let got = px(x, row), want = colours[i].rgb
            XCTAssertEqual(got.0, want.0, accuracy: 3, "R at \(x),\(row)")
            XCTAssertEqual(got.1, want.1, accuracy: 3, "G at \(x),\(row)")
            XCTAssertEqual(got.2, want.2, accuracy: 3, "B at \(x),\(row)")
        }
        let dir = try pipelineTempDirectory(self)
        let path = dir.appendingPathComponent("small.png").path
        try PNGWriter.write(frame, to: path)
        XCTAssertEqual(try readPNG(path).rgb, rgb)
    }

    func testWritersReportUnwritablePathsAndBadFrames() throws {
        XCTAssertThrowsError(try IVFWriter(path: "/nonexistent-dir/x.ivf", width: 10, height: 10))
        XCTAssertThrowsError(try WAVWriter(path: "/nonexistent-dir/x.wav", sampleRate: 48_000, channels: 1))
        XCTAssertThrowsError(try PNGWriter.write(VideoFrame(width: 8, height: 8), to: "/nonexistent-dir/x.png"))
        var bad = VideoFrame(width: 8, height: 8)
        bad.y = [0, 1, 2]
        let dir = try pipelineTempDirectory(self)
        XCTAssertThrowsError(try PNGWriter.write(bad, to: dir.appendingPathComponent("bad.png").path)) { e in
            XCTAssertEqual((e as? OTError)?.code, .invalidParameter)
        }
    }
}
