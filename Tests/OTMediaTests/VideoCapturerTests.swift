import Foundation
import OTBase
import Synchronization
import XCTest
@testable import OTMedia

/// Stands in for the format converters: turns NV12 into I420 by de-interleaving the chroma.
private struct NV12Splitter: FrameConverter {
    func convertToI420(_ f: CapturedFrame) throws -> VideoFrame {
        guard f.format == .nv12 else { throw OTError(.invalidParameter, "NV12 only") }
        let c = VideoFrame.chromaSize(width: f.width, height: f.height)
        var u = [UInt8](), v = [UInt8]()
        for r in 0..<c.height { for x in 0..<c.width { u.append(f.planes[1][r * f.strides[1] + 2 * x]); v.append(f.planes[1][r * f.strides[1] + 2 * x + 1]) } }
        return VideoFrame(width: f.width, height: f.height, y: f.planes[0], u: u, v: v, strideY: f.strides[0],
                          strideU: c.width, strideV: c.width, timestampMicros: f.timestampMicros, rotation: f.rotation)
    }
}

final class VideoCapturerTests: XCTestCase {
    func testPixelFormatNumbersMatchTheCABI() {
        XCTAssertEqual(PixelFormat.allCases.map(\.rawValue), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
        XCTAssertEqual(PixelFormat(rawValue: 10), .mjpeg)
        XCTAssertEqual(PixelFormat(rawValue: 12), nil)
    }

    func testPackedRGBLayoutsFollowLibyuvNaming() {
        // Red at each format's red offset: libyuv's ARGB is B,G,R,A in memory, its RGB24 is B,G,R.
        XCTAssertEqual(PixelFormat.argb.packedRGBLayout?.r, 2)
        XCTAssertEqual(PixelFormat.bgra.packedRGBLayout?.r, 1)
        XCTAssertEqual(PixelFormat.abgr.packedRGBLayout?.r, 0)
        XCTAssertEqual(PixelFormat.rgba.packedRGBLayout?.r, 3)
        XCTAssertEqual(PixelFormat.rgb24.packedRGBLayout?.bytesPerPixel, 3)
        for f in PixelFormat.allCases {
            guard let l = f.packedRGBLayout else { XCTAssertTrue([.i420, .nv12, .nv21, .yuy2, .uyvy, .mjpeg].contains(f)); continue }
            XCTAssertEqual(Set([l.r, l.g, l.b]).count, 3, "\(f)")
            XCTAssertTrue([l.r, l.g, l.b].allSatisfy { $0 < l.bytesPerPixel })
            XCTAssertEqual(f.planeGeometry(width: 7, height: 1)[0].minStride, 7 * l.bytesPerPixel)
        }
    }

    func testPlaneGeometryOfEveryFormat() {
        // 5×3: chroma is 3×2.
        XCTAssertEqual(PixelFormat.i420.planeGeometry(width: 5, height: 3).map(\.minStride), [5, 3, 3])
        XCTAssertEqual(PixelFormat.i420.planeGeometry(width: 5, height: 3).map(\.rows), [3, 2, 2])
        XCTAssertEqual(PixelFormat.nv21.planeGeometry(width: 5, height: 3).map(\.minStride), [5, 6])
        XCTAssertEqual(PixelFormat.yuy2.planeGeometry(width: 5, height: 3).map(\.minStride), [12])
        XCTAssertEqual(PixelFormat.rgb24.planeGeometry(width: 5, height: 3).map(\.minStride), [15])
        for f in [PixelFormat.argb, .bgra, .abgr, .rgba] {
            XCTAssertEqual(f.planeGeometry(width: 5, height: 3).map(\.minStride), [20])
            XCTAssertEqual(f.planeCount, 1)
        }
    }

    func testValidationRefusesShortPlanesAndBadSizes() {
        let ok = CapturedFrame(format: .rgb24, width: 4, height: 2, planes: [[UInt8](repeating: 0, count: 24)], strides: [12], timestampMicros: 0)
        XCTAssertNoThrow(try ok.validate())
        // A padded stride needs stride × (rows − 1) + row bytes.
        XCTAssertNoThrow(try CapturedFrame(format: .rgb24, width: 4, height: 2, planes: [[UInt8](repeating: 0, count: 28)],
                                           strides: [16], timestampMicros: 0).validate())
        let cases: [CapturedFrame] = [
            CapturedFrame(format: .rgb24, width: 4, height: 2, planes: [[UInt8](repeating: 0, count: 23)], strides: [12], timestampMicros: 0),
            CapturedFrame(format: .rgb24, width: 4, height: 2, planes: [[UInt8](repeating: 0, count: 24)], strides: [11], timestampMicros: 0),
            CapturedFrame(format: .i420, width: 4, height: 2, planes: [[0]], strides: [4], timestampMicros: 0),
            CapturedFrame(format: .rgb24, width: 0, height: 2, planes: [[]], strides: [0], timestampMicros: 0),
            CapturedFrame(format: .rgb24, width: -4, height: 2, planes: [[]], strides: [0], timestampMicros: 0),
            // A stride whose span overflows is refused, not trapped on.
            CapturedFrame(format: .rgb24, width: 4, height: 8, planes: [[UInt8](repeating: 0, count: 24)], strides: [Int.max / 4], timestampMicros: 0),
            // MJPEG: the "stride" is the JPEG's length, which the plane must hold.
            CapturedFrame(format: .mjpeg, width: 4, height: 2, planes: [[0xFF, 0xD8, 0xFF, 0xD9]], strides: [5], timestampMicros: 0),
        ]
        for c in cases {
            XCTAssertThrowsError(try c.validate()) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) }
        }
    }

    func testCaptureSinkPassesI420AndRefusesWhatItCannotConvert() throws {
        let got = Mutex<[VideoFrame]>([])
        let sink = CaptureSink { f in got.withLock { $0.append(f) } }
        var frame = VideoFrame(width: 4, height: 2, timestampMicros: 77, rotation: .r90)
        frame.y = [1, 2, 3, 4, 5, 6, 7, 8]
        XCTAssertTrue(sink.consumeFrame(CapturedFrame(frame)))
        let out = try XCTUnwrap(got.withLock { $0.first })
        XCTAssertEqual(out.y, frame.y); XCTAssertEqual(out.timestampMicros, 77); XCTAssertEqual(out.rotation, .r90)
        let rgb = CapturedFrame(format: .rgb24, width: 4, height: 2, planes: [[UInt8](repeating: 0, count: 24)], strides: [12], timestampMicros: 0)
        XCTAssertFalse(sink.consumeFrame(rgb), "no converter for RGB24")
        XCTAssertFalse(sink.consumeFrame(CapturedFrame(format: .i420, width: 4, height: 2, planes: [[1]], strides: [4], timestampMicros: 0)))
        XCTAssertEqual(sink.counts.accepted, 1)
        XCTAssertEqual(sink.counts.refused, 2)
        XCTAssertEqual(sink.counts.lastError?.code, .invalidParameter)
        sink.detach()
        XCTAssertFalse(sink.consumeFrame(CapturedFrame(frame)))
        XCTAssertEqual(got.withLock { $0.count }, 1)
    }

    func testCaptureSinkUsesTheConverterHookAndTakesFramesFromManyThreads() {
        let count = Mutex(0)
        let sink = CaptureSink(converter: NV12Splitter()) { f in
            XCTAssertEqual(f.u, [10, 12]); XCTAssertEqual(f.v, [11, 13])
            count.withLock { $0 += 1 }
        }
        let nv12 = CapturedFrame(format: .nv12, width: 4, height: 2, planes: [[UInt8](repeating: 50, count: 8), [10, 11, 12, 13]],
                                 strides: [4, 4], timestampMicros: 5)
        DispatchQueue.concurrentPerform(iterations: 200) { _ in sink.consumeFrame(nv12) }
        XCTAssertEqual(count.withLock { $0 }, 200)
        XCTAssertEqual(sink.counts.accepted, 200)
    }

    func testRawFileSourceLoopsOverTheFileFrames() throws {
        let dir = try pipelineTempDirectory(self)
        let path = dir.appendingPathComponent("clip.yuv").path
        // Three 6×4 frames, each plane filled with a value naming frame and plane.
        var bytes: [UInt8] = []
        for f in 0..<3 {
            bytes += [UInt8](repeating: UInt8(10 * f + 1), count: 24)
            bytes += [UInt8](repeating: UInt8(10 * f + 2), count: 6)
            bytes += [UInt8](repeating: UInt8(10 * f + 3), count: 6)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let source = try RawFileSource(path: path, width: 6, height: 4)
        XCTAssertEqual(source.frameCount, 3)
        for (index, f) in [(0, 0), (1, 1), (2, 2), (3, 0), (7, 1), (-1, 2)] {
            let frame = try source.frame(at: Int64(index), timestampMicros: 9)
            XCTAssertEqual(Set(frame.y), [UInt8(10 * f + 1)], "frame \(index)")
            XCTAssertEqual(Set(frame.u), [UInt8(10 * f + 2)]); XCTAssertEqual(Set(frame.v), [UInt8(10 * f + 3)])
            XCTAssertEqual(frame.timestampMicros, 9)
        }
        XCTAssertThrowsError(try RawFileSource(path: path, width: 5, height: 4), "size is not a whole number of frames")
        XCTAssertThrowsError(try RawFileSource(path: dir.appendingPathComponent("missing.yuv").path, width: 6, height: 4))
    }

    func testRawFileSourceReplaysRecordedTestPattern() throws {
        let dir = try pipelineTempDirectory(self)
        let path = dir.appendingPathComponent("pattern.yuv").path
        let pattern = try TestPatternSource(width: 160, height: 120)
        var bytes: [UInt8] = []
        for n: UInt32 in 0..<4 {
            let f = pattern.render(frameNumber: n, timestampMicros: Int64(n) * 1000)
            bytes += f.y + f.u + f.v
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let source = try RawFileSource(path: path, width: 160, height: 120)
        let capturer = source.capturer(fps: 30)
        XCTAssertEqual(capturer.captureSettings, VideoCaptureSettings(format: .i420, width: 160, height: 120, fps: 30))
        for i in 0..<8 {
            let f = try source.frame(at: Int64(i), timestampMicros: 0)
            XCTAssertEqual(TestPatternReader.read(f)?.frameNumber, UInt32(i % 4))
        }
    }

    func testCallbackCapturerForwardsPushedFramesOnlyWhileStarted() throws {
        let calls = Mutex<[String]>([])
        let refuseStart = Mutex(true)
        let capturer = try CallbackVideoCapturer(
            settings: VideoCaptureSettings(format: .nv12, width: 4, height: 2, fps: 15),
            callbacks: .init(initCapture: { calls.withLock { $0.append("init") }; return true },
                             releaseCapture: { calls.withLock { $0.append("release") }; return true },
                             startCapture: { calls.withLock { $0.append("start") }; return !refuseStart.withLock { $0 } },
                             stopCapture: { calls.withLock { $0.append("stop") }; return true }))
        let got = Mutex(0)
        let sink = CaptureSink(converter: NV12Splitter()) { _ in got.withLock { $0 += 1 } }
        let nv12 = CapturedFrame(format: .nv12, width: 4, height: 2, planes: [[UInt8](repeating: 1, count: 8), [1, 2, 3, 4]],
                                 strides: [4, 4], timestampMicros: 0)
        XCTAssertThrowsError(try capturer.startCapture(), "before init")
        try capturer.initCapture(consumer: sink)
        XCTAssertFalse(capturer.provideFrame(nv12), "not started")
        XCTAssertThrowsError(try capturer.startCapture(), "refused by the user")
        refuseStart.withLock { $0 = false }
        try capturer.startCapture()
        DispatchQueue.concurrentPerform(iterations: 50) { _ in capturer.provideFrame(nv12) }
        XCTAssertEqual(got.withLock { $0 }, 50)
        capturer.releaseCapture()
        capturer.releaseCapture()
        XCTAssertFalse(capturer.provideFrame(nv12))
        XCTAssertEqual(calls.withLock { $0 }, ["init", "start", "start", "stop", "release"])
        XCTAssertThrowsError(try CallbackVideoCapturer(settings: VideoCaptureSettings(width: 0)))
    }
}
