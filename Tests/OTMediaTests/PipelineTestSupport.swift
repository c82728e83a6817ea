import COTShims
import CVPX
import Foundation
import OTBase
@testable import OTMedia
import XCTest

/// A fresh empty directory under the system temporary directory, removed by the test's teardown.
func pipelineTempDirectory(_ test: XCTestCase) throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("otmedia-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
    return dir
}

/// Plain libvpx VP8 encoder + decoder for round-trip tests (realtime, CBR, no lag, one thread).
final class PipelineVP8Loop {
    private var enc = vpx_codec_ctx_t()
    private var dec = vpx_codec_ctx_t()
    private var image: UnsafeMutablePointer<vpx_image_t>
    let width: Int, height: Int
    private(set) var encodedBytes = 0
    private(set) var encodedFrames = 0

    init(width: Int, height: Int, kbps: UInt32, fps: Int32) throws {
        self.width = width; self.height = height
        var cfg = vpx_codec_enc_cfg_t()
        guard vpx_codec_enc_config_default(otshim_vpx_vp8_cx(), &cfg, 0) == VPX_CODEC_OK else { throw WireError("config") }
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
        guard otshim_vpx_enc_init(&enc, otshim_vpx_vp8_cx(), &cfg, 0) == VPX_CODEC_OK else { throw WireError("enc init") }
        _ = otshim_vpx_control_int(&enc, Int32(VP8E_SET_CPUUSED.rawValue), -6)
        guard otshim_vpx_dec_init(&dec, otshim_vpx_vp8_dx(), nil, 0) == VPX_CODEC_OK else { throw WireError("dec init") }
        guard let img = vpx_img_alloc(nil, VPX_IMG_FMT_I420, UInt32(width), UInt32(height), 16) else { throw WireError("img") }
        image = img
    }

    deinit {
        vpx_img_free(image)
        vpx_codec_destroy(&enc)
        vpx_codec_destroy(&dec)
    }

    /// Encodes one frame (a keyframe at pts 0) into VP8 frames.
    func encode(_ frame: VideoFrame, pts: Int64) throws -> [[UInt8]] {
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
        var out: [[UInt8]] = []
        var iter: vpx_codec_iter_t? = nil
        while let pkt = vpx_codec_get_cx_data(&enc, &iter) {
            guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let f = pkt.pointee.data.frame
            encodedBytes += f.sz; encodedFrames += 1
            out.append(Array(UnsafeRawBufferPointer(start: f.buf, count: f.sz)))
        }
        return out
    }

    /// Decodes one VP8 frame into the pictures it produces.
    func decode(_ data: [UInt8], timestamp: Int64 = 0) throws -> [VideoFrame] {
        guard vpx_codec_decode(&dec, data, UInt32(data.count), nil, 0) == VPX_CODEC_OK else { throw WireError("decode") }
        var out: [VideoFrame] = []
        var iter: vpx_codec_iter_t? = nil
        while let d = vpx_codec_get_frame(&dec, &iter) { out.append(copy(d.pointee, timestamp: timestamp)) }
        return out
    }

    /// Encodes one frame and decodes what came out.
    func roundTrip(_ frame: VideoFrame, pts: Int64) throws -> [VideoFrame] {
        try encode(frame, pts: pts).flatMap { try decode($0, timestamp: frame.timestampMicros) }
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

