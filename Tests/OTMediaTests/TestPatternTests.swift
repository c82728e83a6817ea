import COTShims
import CVPX
import Foundation
import OTBase
import Synchronization
import XCTest
@testable import OTMedia

/// Plain libvpx VP8 encoder + decoder for round-trip tests (realtime, CBR, no lag, one thread).
private final class RawVP8Loop {
    private var enc = vpx_codec_ctx_t()
    private var dec = vpx_codec_ctx_t()
    private var image: UnsafeMutablePointer<vpx_image_t>
    let width: Int, height: Int
    private(set) var encodedBytes = 0
    private(set) var encodedFrames = 0

    init(width: Int, height: Int, kbps: UInt32, fps: Int32) throws {
        self.width = width; self.height = height
        var cfg = vpx_codec_enc_cfg_t()
        guard vpx_codec_enc_config_default(ot_vpx_vp8_cx(), &cfg, 0) == VPX_CODEC_OK else { throw WireError("config") }
        cfg.g_w = UInt32(width); cfg.g_h = UInt32(height)
        cfg.g_timebase = vpx_rational(num: 1, den: fps)
        cfg.rc_target_bitrate = kbps
        cfg.rc_end_usage = VPX_CBR
        cfg.g_lag_in_frames = 0
        cfg.g_threads = 1
        cfg.rc_dropframe_thresh = 0
        cfg.kf_mode = VPX_KF_DISABLED
        cfg.rc_min_quantizer = 2; cfg.rc_max_quantizer = 56
        cfg.rc_buf_sz = 1000; cfg.rc_buf_initial_sz = 500; cfg.rc_buf_optimal_sz = 600
        guard ot_vpx_enc_init(&enc, &cfg, 0) == VPX_CODEC_OK else { throw WireError("enc init") }
        _ = ot_vpx_control_int(&enc, Int32(VP8E_SET_CPUUSED.rawValue), -6)
        guard ot_vpx_dec_init(&dec, nil, 0) == VPX_CODEC_OK else { throw WireError("dec init") }
        guard let img = vpx_img_alloc(nil, VPX_IMG_FMT_I420, UInt32(width), UInt32(height), 16) else { throw WireError("img") }
        image = img
    }

    deinit {
        vpx_img_free(image)
        vpx_codec_destroy(&enc)
        vpx_codec_destroy(&dec)
    }

    /// Encodes one frame and returns every picture the decoder produced from the output.
    func roundTrip(_ frame: VideoFrame, pts: Int64) throws -> [VideoFrame] {
        let c = VideoFrame.chromaSize(width: width, height: height)
        let img = image.pointee
        let planes: [(src: [UInt8], stride: Int, dst: UnsafeMutablePointer<UInt8>?, dstStride: Int32, w: Int, h: Int)] = [
            (frame.y, frame.strideY, img.planes.0, img.stride.0, width, height),
            (frame.u, frame.strideU, img.planes.1, img.stride.1, c.width, c.height),
            (frame.v, frame.strideV, img.planes.2, img.stride.2, c.width, c.height),
        ]
        for p in planes {
            guard let dst = p.dst else { throw WireError("plane") }
            p.src.withUnsafeBufferPointer { src in
                for r in 0..<p.h { (dst + r * Int(p.dstStride)).update(from: src.baseAddress! + r * p.stride, count: p.w) }
            }
        }
        let flags: vpx_enc_frame_flags_t = pts == 0 ? vpx_enc_frame_flags_t(VPX_EFLAG_FORCE_KF) : 0
        guard vpx_codec_encode(&enc, image, vpx_codec_pts_t(pts), 1, flags, UInt(VPX_DL_REALTIME)) == VPX_CODEC_OK else {
            throw WireError("encode")
        }
        var out: [VideoFrame] = []
        var iter: vpx_codec_iter_t? = nil
        while let pkt = vpx_codec_get_cx_data(&enc, &iter) {
            guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let f = pkt.pointee.data.frame
            encodedBytes += f.sz; encodedFrames += 1
            guard vpx_codec_decode(&dec, f.buf.assumingMemoryBound(to: UInt8.self), UInt32(f.sz), nil, 0) == VPX_CODEC_OK else {
                throw WireError("decode")
            }
            var diter: vpx_codec_iter_t? = nil
            while let d = vpx_codec_get_frame(&dec, &diter) {
                out.append(copy(d.pointee, timestamp: frame.timestampMicros))
            }
        }
        return out
    }

    private func copy(_ img: vpx_image_t, timestamp: Int64) -> VideoFrame {
        let w = Int(img.d_w), h = Int(img.d_h)
        let c = VideoFrame.chromaSize(width: w, height: h)
        func plane(_ p: UnsafeMutablePointer<UInt8>?, _ stride: Int32, _ rows: Int) -> [UInt8] {
            guard let p else { return [] }
            return Array(UnsafeBufferPointer(start: p, count: Int(stride) * rows))
        }
        return VideoFrame(width: w, height: h, y: plane(img.planes.0, img.stride.0, h),
                          u: plane(img.planes.1, img.stride.1, c.height), v: plane(img.planes.2, img.stride.2, c.height),
                          strideY: Int(img.stride.0), strideU: Int(img.stride.1), strideV: Int(img.stride.2),
                          timestampMicros: timestamp)
    }
}

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
        var rng = PipelineRandom(seed: 42)
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

    func testReadsEveryFrameAfterVP8At300kbps() throws {
        let w = 640, h = 480, fps = 30, count = 90
        let loop = try RawVP8Loop(width: w, height: h, kbps: 300, fps: Int32(fps))
        let source = try TestPatternSource(width: w, height: h)
        var decoded = 0
        var worstFrame: Int?
        for n in 0..<count {
            let ts = 987_654_321 + Int64(n) * 33_333
            for out in try loop.roundTrip(source.render(frameNumber: UInt32(n), timestampMicros: ts), pts: Int64(n)) {
                decoded += 1
                let stamp = TestPatternReader.read(out)
                XCTAssertEqual(stamp, TestPatternStamp(frameNumber: UInt32(n), timestampMicros: ts), "decoded frame \(n)")
                if stamp == nil && worstFrame == nil { worstFrame = n }
            }
        }
        XCTAssertEqual(decoded, count, "no frame dropped by the encoder")
        let kbps = Double(loop.encodedBytes * 8) * Double(fps) / Double(count) / 1000
        print("test pattern VP8 640x480@\(fps): \(loop.encodedBytes) bytes for \(count) frames = \(Int(kbps)) kbit/s")
        // The encoder really ran at a low rate (the keyframe costs extra in 3 s).
        XCTAssertLessThan(kbps, 450)
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
