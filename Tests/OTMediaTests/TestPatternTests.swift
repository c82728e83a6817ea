import COTShims
import CVPX
import Foundation
import OTBase
import Synchronization
import XCTest
@testable import OTMedia

final class TestPatternTests: XCTestCase {
    func testReadsBackStampFromCleanFrames() throws {
        for (w, h) in [(640, 480), (1280, 720), (320, 240), (176, 144), (104, 80)] {
            let source = try TestPatternSource(width: w, height: h)
            XCTAssertTrue(source.carriesStamp)
            for n: UInt32 in [0, 1, 77, 65_535, 4_294_967_295] {
                let ts = Int64(n) * 33_333 + 123_456_789_012
                let frame = source.render(frameNumber: n, timestampMicros: ts)
                XCTAssertEqual(frame.width, w); XCTAssertEqual(frame.height, h)
                XCTAssertEqual(TestPatternReader.read(frame), TestPatternStamp(frameNumber: n, timestampMicros: ts), "\(w)x\(h) #\(n)")
            }
        }
    }

    func testPatternMovesBetweenFrames() throws {
        let source = try TestPatternSource(width: 320, height: 240)
        let a = source.render(frameNumber: 10, timestampMicros: 0)
        let b = source.render(frameNumber: 11, timestampMicros: 0)
        // Compare below the barcode so only the moving picture counts.
        let start = 200 * 320
        let changed = zip(a.y[start...], b.y[start...]).filter { $0 != $1 }.count
        // 8 bar edges move 2 px in each of the 40 rows.
        XCTAssertGreaterThanOrEqual(changed, 8 * 2 * 40, "bars scroll")
    }

    func testTooSmallPictureCarriesNoStamp() throws {
        let source = try TestPatternSource(width: 64, height: 48)
        XCTAssertFalse(source.carriesStamp)
        XCTAssertNil(TestPatternReader.read(source.render(frameNumber: 3, timestampMicros: 9)))
        XCTAssertThrowsError(try TestPatternSource(width: 0, height: 10))
    }

    func testRejectsFramesWithoutOrWithDamagedCode() throws {
        XCTAssertNil(TestPatternReader.read(VideoFrame(width: 640, height: 480)), "black frame")
        let source = try TestPatternSource(width: 640, height: 480)
        var frame = source.render(frameNumber: 5, timestampMicros: 1_000)
        // Invert one cell (cell size is 16 at 640x480, origin 16): the CRC must catch it.
        for r in 16..<32 { for x in 16..<32 { frame.y[r * frame.strideY + x] = 255 - frame.y[r * frame.strideY + x] } }
        XCTAssertNil(TestPatternReader.read(frame))
    }

    func testSurvivesNoiseAndLevelChanges() throws {
        var rng = SeededRandom(seed: 42)
        let source = try TestPatternSource(width: 640, height: 480)
        for n: UInt32 in 0..<30 {
            let ts = 5_000_000 + Int64(n) * 33_333
            var frame = source.render(frameNumber: n, timestampMicros: ts)
            // Contrast loss, brightness offset and ±45 noise per pixel, clipped.
            let offset = Int.random(in: -20...20, using: &rng)
            for i in frame.y.indices {
                let v = (Int(frame.y[i]) - 128) * 7 / 10 + 128 + offset + Int.random(in: -45...45, using: &rng)
                frame.y[i] = UInt8(clamping: v)
            }
            XCTAssertEqual(TestPatternReader.read(frame), TestPatternStamp(frameNumber: n, timestampMicros: ts), "frame \(n)")
        }
    }

    /// Renders `count` frames, round-trips them through VP8 and reads every decoded one back.
    private func vp8RoundTrip(width w: Int, height h: Int, kbps target: UInt32, count: Int = 90,
                              file: StaticString = #filePath, line: UInt = #line) throws -> Double {
        let fps = 30
        let loop = try PipelineVP8Loop(width: w, height: h, kbps: target, fps: Int32(fps))
        let source = try TestPatternSource(width: w, height: h)
        var decoded = 0
        var renderMicros: Int64 = 0, readMicros: Int64 = 0
        for n in 0..<count {
            let ts = 987_654_321 + Int64(n) * 33_333
            let t0 = MonotonicClock.now()
            let frame = source.render(frameNumber: UInt32(n), timestampMicros: ts)
            renderMicros += (MonotonicClock.now() - t0).microseconds
            for out in try loop.roundTrip(frame, pts: Int64(n)) {
                decoded += 1
                let t1 = MonotonicClock.now()
                let stamp = TestPatternReader.read(out)
                readMicros += (MonotonicClock.now() - t1).microseconds
                XCTAssertEqual(stamp, TestPatternStamp(frameNumber: UInt32(n), timestampMicros: ts),
                               "\(w)x\(h) at \(target) kbit/s: decoded frame \(n)", file: file, line: line)
            }
        }
        XCTAssertEqual(decoded, count, "no frame dropped by the encoder", file: file, line: line)
        let kbps = Double(loop.encodedBytes * 8) * Double(fps) / Double(count) / 1000
        print("test pattern VP8 \(w)x\(h)@\(fps) target \(target) kbit/s: \(loop.encodedBytes) bytes for \(count) frames = \(Int(kbps)) kbit/s;"
              + " render \(renderMicros / Int64(count)) µs/frame, read \(readMicros / Int64(max(decoded, 1))) µs/frame (this build)")
        return kbps
    }

    func testReadsEveryFrameAfterVP8At300kbps() throws {
        let kbps = try vp8RoundTrip(width: 640, height: 480, kbps: 300)
        // The encoder really ran at a low rate (the keyframe costs extra in 3 s).
        XCTAssertLessThan(kbps, 450)
    }

    func testReadsEveryFrameAfterVP8AtStarvationRates() throws {
        XCTAssertLessThan(try vp8RoundTrip(width: 640, height: 480, kbps: 100), 200)
        XCTAssertLessThan(try vp8RoundTrip(width: 320, height: 240, kbps: 60), 120)
    }

    func testCapturerStampsIncreasingFramesAndStops() throws {
        final class Collector: VideoFrameConsumer {
            let frames = Mutex<[CapturedFrame]>([])
            let enough: XCTestExpectation
            init(_ e: XCTestExpectation) { enough = e }
            func consumeFrame(_ frame: CapturedFrame) -> Bool {
                let n = frames.withLock { $0.append(frame); return $0.count }
                if n == 5 { enough.fulfill() }
                return true
            }
        }
        let source = try TestPatternSource(width: 160, height: 120)
        let capturer = source.capturer(fps: 60)
        XCTAssertThrowsError(try capturer.startCapture(), "start before init")
        let collector = Collector(expectation(description: "5 frames"))
        try capturer.initCapture(consumer: collector)
        try capturer.startCapture()
        XCTAssertTrue(capturer.isCapturing)
        wait(for: [collector.enough], timeout: 10)
        capturer.stopCapture()
        XCTAssertFalse(capturer.isCapturing)
        let frames = collector.frames.withLock { $0 }
        let countAtStop = frames.count
        let stamps = try frames.map { f -> TestPatternStamp in
            try XCTUnwrap(TestPatternReader.read(try I420Passthrough().convertToI420(f)))
        }
        XCTAssertEqual(stamps.map(\.frameNumber), (0..<UInt32(stamps.count)).map { $0 })
        XCTAssertEqual(stamps.map(\.timestampMicros), frames.map(\.timestampMicros))
        XCTAssertEqual(stamps.map(\.timestampMicros), stamps.map(\.timestampMicros).sorted())
        // Nothing arrives after stopCapture returned.
        let settle = expectation(description: "settle")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { settle.fulfill() }
        wait(for: [settle], timeout: 5)
        XCTAssertEqual(collector.frames.withLock { $0.count }, countAtStop)
        capturer.releaseCapture()
    }
}
