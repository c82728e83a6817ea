import COTShims
import CVPX
import OTBase
import OTWire

/// The libvpx codecs: their interfaces, payload formats and realtime speed.
public enum LibvpxCodec: Sendable {
    case vp8, vp9

    public var format: any RTPPayloadFormat {
        switch self { case .vp8: PayloadFormats.vp8; case .vp9: PayloadFormats.vp9 }
    }
    var encoderInterface: OpaquePointer! {
        switch self { case .vp8: otshim_vpx_vp8_cx(); case .vp9: otshim_vpx_vp9_cx() }
    }
    var decoderInterface: OpaquePointer! {
        switch self { case .vp8: otshim_vpx_vp8_dx(); case .vp9: otshim_vpx_vp9_dx() }
    }

    /// libwebrtc's speed on x86 for a frame size (VP9: `LibvpxVp9Encoder`'s default performance flags, base layer).
    public func defaultCPUUsed(width: Int, height: Int) -> Int {
        switch self {
        case .vp8: return -6
        case .vp9:
            let pixels = width * height
            return pixels >= 1920 * 1080 ? 9 : pixels >= 352 * 288 ? 7 : 5
        }
    }

    /// The codec's own encoder controls, libwebrtc's realtime choices.
    func controls(_ config: VideoEncoderConfig) -> [(vp8e_enc_control_id, Int32)] {
        let speed = Int32(config.cpuUsed ?? defaultCPUUsed(width: config.width, height: config.height))
        // libwebrtc: optimal buffer (600 ms) × 0.5 × fps / 10.
        let intraPct = Int32(max(300, 600 * config.framerate / 20))
        switch self {
        case .vp8:
            return [(VP8E_SET_CPUUSED, speed), (VP8E_SET_NOISE_SENSITIVITY, 0), (VP8E_SET_STATIC_THRESHOLD, 1),
                    (VP8E_SET_TOKEN_PARTITIONS, Int32(VP8_ONE_TOKENPARTITION.rawValue)),
                    (VP8E_SET_MAX_INTRA_BITRATE_PCT, intraPct)]
        case .vp9:
            // Cyclic-refresh AQ, row-based multithreading with one tile column per thread, as libwebrtc.
            var log2Threads: Int32 = 0
            while 1 << (log2Threads + 1) <= config.effectiveThreads { log2Threads += 1 }
            return [(VP8E_SET_CPUUSED, speed), (VP9E_SET_AQ_MODE, 3), (VP9E_SET_ROW_MT, 1),
                    (VP9E_SET_TILE_COLUMNS, log2Threads), (VP8E_SET_STATIC_THRESHOLD, 1),
                    (VP8E_SET_MAX_INTRA_BITRATE_PCT, intraPct)]
        }
    }
}

/// An encoder on libvpx (VP8 or VP9) with realtime settings, runtime rate changes and forced keyframes.
public class LibvpxEncoder: VideoEncoder {
    public private(set) var config: VideoEncoderConfig
    public let codec: LibvpxCodec
    public var format: any RTPPayloadFormat { codec.format }
    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>
    private let cfg: UnsafeMutablePointer<vpx_codec_enc_cfg_t>
    private let image: UnsafeMutablePointer<vpx_image_t>
    private var keyframeRequested = false
    private var patternIndex = 0
    private var lastPts: Int64 = -1

    /// Opens an encoder; throws `CodecError` when libvpx refuses the configuration.
    public init(_ codec: LibvpxCodec, config: VideoEncoderConfig) throws {
        guard config.width > 0, config.height > 0, config.width <= 16384, config.height <= 16384,
              config.bitrateKbps > 0, config.framerate > 0,
              (1...(codec == .vp8 ? 3 : 1)).contains(config.temporalLayers) else {
            throw OTError(.invalidParameter, "invalid \(codec.format.name) encoder configuration")
        }
        self.config = config
        self.codec = codec
        ctx = .allocate(capacity: 1); ctx.initialize(to: vpx_codec_ctx_t())
        cfg = .allocate(capacity: 1); cfg.initialize(to: vpx_codec_enc_cfg_t())
        image = .allocate(capacity: 1); image.initialize(to: vpx_image_t())
        var res = vpx_codec_enc_config_default(codec.encoderInterface, cfg, 0)
        guard res == VPX_CODEC_OK else { Self.free(ctx, cfg, image); throw Self.error(res, nil, "config_default") }
        fillConfig()
        res = otshim_vpx_enc_init(ctx, codec.encoderInterface, cfg, 0)
        guard res == VPX_CODEC_OK else { Self.free(ctx, cfg, image); throw Self.error(res, nil, "enc_init") }
        for (id, value) in codec.controls(config) {
            let r = otshim_vpx_control_int(ctx, Int32(id.rawValue), value)
            guard r == VPX_CODEC_OK else {
                let e = Self.error(r, ctx, "control \(id.rawValue)")
                vpx_codec_destroy(ctx); Self.free(ctx, cfg, image); throw e
            }
        }
    }

    deinit {
        vpx_codec_destroy(ctx)
        Self.free(ctx, cfg, image)
    }

    private static func free(_ c: UnsafeMutablePointer<vpx_codec_ctx_t>, _ f: UnsafeMutablePointer<vpx_codec_enc_cfg_t>,
                             _ i: UnsafeMutablePointer<vpx_image_t>) {
        c.deallocate(); f.deallocate(); i.deallocate()
    }

    static func error(_ code: vpx_codec_err_t, _ ctx: UnsafeMutablePointer<vpx_codec_ctx_t>?, _ what: String) -> CodecError {
        var msg = String(cString: vpx_codec_err_to_string(code))
        if let ctx, let detail = vpx_codec_error_detail(ctx) { msg += ": " + String(cString: detail) }
        return CodecError(.vpx, code: Int32(code.rawValue), "\(what): \(msg)")
    }

    private func fillConfig() {
        let c = config
        cfg.pointee.g_w = UInt32(c.width)
        cfg.pointee.g_h = UInt32(c.height)
        cfg.pointee.g_timebase = vpx_rational(num: 1, den: 1_000_000)
        cfg.pointee.g_threads = UInt32(c.effectiveThreads)
        cfg.pointee.g_lag_in_frames = 0
        cfg.pointee.g_pass = VPX_RC_ONE_PASS
        cfg.pointee.g_error_resilient = c.errorResilient ? vpx_codec_er_flags_t(VPX_ERROR_RESILIENT_DEFAULT) : 0
        cfg.pointee.rc_end_usage = VPX_CBR
        cfg.pointee.rc_target_bitrate = UInt32(c.bitrateKbps)
        cfg.pointee.rc_min_quantizer = 2
        cfg.pointee.rc_max_quantizer = 56
        cfg.pointee.rc_undershoot_pct = 100
        cfg.pointee.rc_overshoot_pct = 15
        cfg.pointee.rc_buf_initial_sz = 500
        cfg.pointee.rc_buf_optimal_sz = 600
        cfg.pointee.rc_buf_sz = 1000
        cfg.pointee.rc_dropframe_thresh = UInt32(max(0, c.frameDropThreshold))
        cfg.pointee.rc_resize_allowed = 0
        cfg.pointee.kf_mode = VPX_KF_AUTO
        cfg.pointee.kf_max_dist = UInt32(max(1, c.keyframeInterval))
        let kbps = UInt32(c.bitrateKbps)
        switch c.temporalLayers {
        case 2:
            let rates: [UInt32] = [kbps * 6 / 10, kbps], dec: [UInt32] = [2, 1], ids: [UInt32] = [0, 1]
            otshim_vpx_cfg_set_temporal_layers(cfg, 2, rates, dec, 2, ids)
        case 3:
            let rates: [UInt32] = [kbps * 4 / 10, kbps * 6 / 10, kbps], dec: [UInt32] = [4, 2, 1], ids: [UInt32] = [0, 2, 1, 2]
            otshim_vpx_cfg_set_temporal_layers(cfg, 3, rates, dec, 4, ids)
        default:
            let one: [UInt32] = [kbps], dec: [UInt32] = [1], ids: [UInt32] = [0]
            otshim_vpx_cfg_set_temporal_layers(cfg, 1, one, dec, 1, ids)
        }
    }

    /// Changes the target bitrate and/or frame rate without restarting the encoder.
    public func setRates(bitrateKbps: Int? = nil, framerate: Int? = nil) throws {
        if let b = bitrateKbps { guard b > 0 else { throw OTError(.invalidParameter, "bitrate must be positive") }; config.bitrateKbps = b }
        if let f = framerate { guard f > 0 else { throw OTError(.invalidParameter, "frame rate must be positive") }; config.framerate = f }
        fillConfig()
        let r = vpx_codec_enc_config_set(ctx, cfg)
        guard r == VPX_CODEC_OK else { throw Self.error(r, ctx, "config_set") }
    }

    /// Makes the next encoded frame a keyframe (e.g. on a PLI/FIR from a receiver).
    public func requestKeyframe() { keyframeRequested = true }

    /// (layer, sync, non-reference, flags) for a position in the temporal pattern.
    private func layerPlan(_ index: Int) -> (UInt8, Bool, Bool, Int) {
        let noRefGA = Int(VP8_EFLAG_NO_REF_GF | VP8_EFLAG_NO_REF_ARF)
        let noUpdAll = Int(VP8_EFLAG_NO_UPD_LAST | VP8_EFLAG_NO_UPD_GF | VP8_EFLAG_NO_UPD_ARF)
        let base = noRefGA | Int(VP8_EFLAG_NO_UPD_GF | VP8_EFLAG_NO_UPD_ARF)  // ref/update LAST only
        switch (config.temporalLayers, index) {
        case (2, 1): return (1, true, true, noRefGA | noUpdAll)
        case (3, 1): return (2, true, true, noRefGA | noUpdAll)
        case (3, 2): return (1, true, false, noRefGA | Int(VP8_EFLAG_NO_UPD_LAST | VP8_EFLAG_NO_UPD_ARF))  // updates GOLDEN
        case (3, 3): return (2, false, true, Int(VP8_EFLAG_NO_REF_ARF) | noUpdAll)  // refs LAST and GOLDEN
        default: return (0, false, false, base)
        }
    }

    /// Encodes one I420 frame (planes are read in place, not copied); `output` receives each compressed frame
    /// (none when rate control drops the frame).
    public func encode(_ frame: VideoFrame, forceKeyframe: Bool = false,
                       output: (EncodedVideoFrame) throws -> Void) throws {
        guard frame.width == config.width, frame.height == config.height else {
            throw OTError(.invalidParameter, "frame is \(frame.width)x\(frame.height), encoder is \(config.width)x\(config.height)")
        }
        let c = VideoFrame.chromaSize(width: frame.width, height: frame.height)
        guard let spanY = VideoFrame.planeSpan(stride: frame.strideY, rowBytes: frame.width, rows: frame.height),
              let spanU = VideoFrame.planeSpan(stride: frame.strideU, rowBytes: c.width, rows: c.height),
              let spanV = VideoFrame.planeSpan(stride: frame.strideV, rowBytes: c.width, rows: c.height),
              frame.y.count >= spanY, frame.u.count >= spanU, frame.v.count >= spanV,
              frame.strideY <= Int(Int32.max), frame.strideU <= Int(Int32.max), frame.strideV <= Int(Int32.max) else {
            throw OTError(.invalidParameter, "frame planes are smaller than their strides say")
        }
        let key = forceKeyframe || keyframeRequested
        keyframeRequested = false
        let period = config.temporalLayers == 3 ? 4 : config.temporalLayers
        if key { patternIndex = 0 }
        // Without temporal layers libvpx picks references freely (no per-frame flags).
        var (tid, sync, nonRef, flags) = config.temporalLayers > 1 ? layerPlan(patternIndex % period) : (0, false, false, 0)
        patternIndex = (patternIndex + 1) % period
        if key { flags = Int(VPX_EFLAG_FORCE_KF); tid = 0; sync = true; nonRef = false }
        if config.temporalLayers > 1 {
            _ = otshim_vpx_control_int(ctx, Int32(VP8E_SET_TEMPORAL_LAYER_ID.rawValue), Int32(tid))
        }
        let pts = max(frame.timestampMicros, lastPts + 1)
        lastPts = pts
        let duration = UInt(1_000_000 / config.framerate)
        var status = VPX_CODEC_OK
        frame.y.withUnsafeBufferPointer { py in
            frame.u.withUnsafeBufferPointer { pu in
                frame.v.withUnsafeBufferPointer { pv in
                    otshim_vpx_image_wrap_i420(image, UInt32(frame.width), UInt32(frame.height),
                                           UnsafeMutablePointer(mutating: py.baseAddress),
                                           UnsafeMutablePointer(mutating: pu.baseAddress),
                                           UnsafeMutablePointer(mutating: pv.baseAddress),
                                           Int32(frame.strideY), Int32(frame.strideU), Int32(frame.strideV))
                    status = vpx_codec_encode(ctx, image, pts, duration, vpx_enc_frame_flags_t(flags), UInt(VPX_DL_REALTIME))
                }
            }
        }
        guard status == VPX_CODEC_OK else { throw Self.error(status, ctx, "encode") }
        var iter: vpx_codec_iter_t?
        var data: UnsafeRawPointer?
        var size = 0
        var fflags: vpx_codec_frame_flags_t = 0
        var outPts: vpx_codec_pts_t = 0
        while otshim_vpx_next_frame(ctx, &iter, &data, &size, &fflags, &outPts) != 0 {
            guard let data, size > 0 else { continue }
            let isKey = fflags & vpx_codec_frame_flags_t(VPX_FRAME_IS_KEY) != 0
            let layer = config.temporalLayers > 1 ? TemporalLayerInfo(temporalLayer: isKey ? 0 : tid, layerSync: isKey || sync) : nil
            try output(EncodedVideoFrame(data: UnsafeRawBufferPointer(start: data, count: size), isKeyframe: isKey,
                                       timestampMicros: frame.timestampMicros, layer: layer,
                                       nonReference: !isKey && nonRef))
        }
    }
}

/// VP8 (RFC 6386) on libvpx.
public final class VP8Encoder: LibvpxEncoder {
    public init(config: VideoEncoderConfig) throws { try super.init(.vp8, config: config) }
}

/// VP9 profile 0 on libvpx: one spatial and one temporal layer.
public final class VP9Encoder: LibvpxEncoder {
    public init(config: VideoEncoderConfig) throws { try super.init(.vp9, config: config) }
}
