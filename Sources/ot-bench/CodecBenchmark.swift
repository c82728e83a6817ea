import COTShims
import CSRTP
import COpus
import CVPX
import Glibc
import OTMedia
import OTTransport
import OTWire

/// `ot-bench codec`: raw libvpx/libopus against the library's whole media path, in one process,
/// alternating the two per round; SRTP packets/s; heap allocations per packet.
func runCodecBenchmark(_ args: [String]) throws {
    let quick = args.contains("--quick")
    let codec: LibvpxCodec = args.contains("--vp9") ? .vp9 : .vp8
    let name = codec.format.name
    let rounds = quick ? 2 : 5
    print("ot-bench codec: medians over rounds; rates from thread CPU time (wall-clock in brackets)")
    print(codec == .vp8 ? "VP8: realtime deadline, cpu-used -6, CBR, no lag, error resilient, 1 thread, frame dropping off"
                        : "VP9: realtime deadline, cpu-used 7 (libwebrtc's from CIF), AQ 3, row-mt, CBR, no lag, error resilient, 1 thread, frame dropping off")
    print("whole video path = NV12 -> I420 -> \(name) encode -> RTP/\(name) packetize (MTU 1200) -> SRTP protect (AEAD-AES-128-GCM)")
    print("                   -> SRTP unprotect -> RTP parse -> depacketize -> \(name) decode (picture lent, not copied, as in the raw loop)\n")

    // Many short rounds, raw and whole back to back over the same frames, so load from other processes hits both alike.
    let videoRounds = quick ? 4 : 24
    for (w, h, kbps, frames) in [(640, 480, 1000, 30), (1280, 720, 2000, 15)] {
        let clip = SyntheticClip(width: w, height: h, frames: 30)
        var raw: [Double] = [], whole: [Double] = [], rawWall: [Double] = [], wholeWall: [Double] = []
        var rawAllocs = 0.0, wholeAllocsPerFrame = 0.0, wholeAllocsPerPacket = 0.0, packetsPerFrame = 0.0
        var rawBytes = 0.0, wholeBytes = 0.0
        let rawPipe = try RawVPXPipeline(codec, clip: clip, kbps: kbps)
        let wholePipe = try WholeVideoPipeline(codec, clip: clip, kbps: kbps)
        // Warm-up (untimed): first-touch of the clip, libvpx's one-time setup, buffers reaching their steady size.
        _ = try rawPipe.run(frames: quick ? 20 : 200)
        _ = try wholePipe.run(frames: quick ? 20 : 200)
        var pairRatios: [Double] = []
        for r in 0..<videoRounds {
            for order in (r % 2 == 0 ? [0, 1] : [1, 0]) {
                if order == 0 {
                    let m = try rawPipe.run(frames: frames)
                    raw.append(Double(frames) / m.cpu); rawWall.append(Double(frames) / m.wall)
                    rawAllocs = Double(m.allocs) / Double(frames)
                    rawBytes = Double(m.bytes) / Double(frames)
                } else {
                    let m = try wholePipe.run(frames: frames)
                    whole.append(Double(frames) / m.cpu); wholeWall.append(Double(frames) / m.wall)
                    wholeAllocsPerFrame = Double(m.allocs) / Double(frames)
                    wholeAllocsPerPacket = Double(m.allocs) / Double(m.packets)
                    packetsPerFrame = Double(m.packets) / Double(frames)
                    wholeBytes = Double(m.bytes) / Double(frames)
                }
            }
            pairRatios.append(whole[r] / raw[r])
        }
        print("\(name) \(w)x\(h) @ \(kbps) kbit/s, \(videoRounds) rounds of \(frames) frames; B/frame raw \(fmt(rawBytes, 0)), whole \(fmt(wholeBytes, 0)); \(fmt(packetsPerFrame)) packets/frame")
        print("  raw libvpx encode+decode  \(pad(fmt(median(raw)), 8)) fps  [\(fmt(median(rawWall))) wall]   allocs/frame \(fmt(rawAllocs, 2))")
        print("  whole path                \(pad(fmt(median(whole)), 8)) fps  [\(fmt(median(wholeWall))) wall]   allocs/frame \(fmt(wholeAllocsPerFrame, 2)), allocs/packet \(fmt(wholeAllocsPerPacket, 2))")
        print("  ratio whole/raw           \(pad(fmt(median(pairRatios), 3), 8))       (median of \(videoRounds) paired rounds; ratio of medians \(fmt(median(whole) / median(raw), 3)), wall \(fmt(median(wholeWall) / median(rawWall), 3)))")
        var stages: WholeVideoPipeline.Stages? = WholeVideoPipeline.Stages()
        let n = quick ? 30 : 120
        _ = try wholePipe.run(frames: n, stages: &stages)
        if let st = stages {
            let ms = { (x: Double) in fmt(x * 1000 / Double(n), 3) }
            print("  whole path per frame, ms (monotonic clock, \(n) frames): convert \(ms(st.convert)), \(name) encode \(ms(st.encode)), packetize+RTP \(ms(st.packetize)), SRTP both ways \(ms(st.srtp)), RTP parse+depacketize \(ms(st.depacketize)), \(name) decode \(ms(st.decode - st.copy)); copying the decoded picture into a VideoFrame would add \(ms(st.copy))\n")
        }
    }

    // The VP9 run compares the video paths only.
    guard codec == .vp8 else { return }
    try conversionCosts(quick: quick)
    try opusComparison(rounds: quick ? 4 : 24, frames: 100)
    try srtpThroughput(packets: quick ? 5_000 : 50_000, rounds: rounds)
}

// MARK: - VP8 / VP9

struct RoundResult { var wall: Double; var cpu: Double; var allocs: UInt64; var packets: Int; var bytes: Int }

/// The encoder settings both paths use, set directly on libvpx here.
private func rawEncoderConfig(_ cfg: inout vpx_codec_enc_cfg_t, width: Int, height: Int, kbps: Int) {
    cfg.g_w = UInt32(width); cfg.g_h = UInt32(height)
    cfg.g_timebase = vpx_rational(num: 1, den: 1_000_000)
    cfg.g_threads = 1
    cfg.g_lag_in_frames = 0
    cfg.g_pass = VPX_RC_ONE_PASS
    cfg.g_error_resilient = vpx_codec_er_flags_t(VPX_ERROR_RESILIENT_DEFAULT)
    cfg.rc_end_usage = VPX_CBR
    cfg.rc_target_bitrate = UInt32(kbps)
    cfg.rc_min_quantizer = 2; cfg.rc_max_quantizer = 56
    cfg.rc_undershoot_pct = 100; cfg.rc_overshoot_pct = 15
    cfg.rc_buf_initial_sz = 500; cfg.rc_buf_optimal_sz = 600; cfg.rc_buf_sz = 1000
    cfg.rc_dropframe_thresh = 0
    cfg.rc_resize_allowed = 0
    cfg.kf_mode = VPX_KF_AUTO; cfg.kf_max_dist = 3000
}

/// Raw libvpx: wrap the I420 planes, encode, decode every output packet, fetch the picture (no copy).
/// Kept alive across rounds, like an encoder in a call.
final class RawVPXPipeline {
    let clip: SyntheticClip
    private var enc = vpx_codec_ctx_t(), dec = vpx_codec_ctx_t()
    private var img = vpx_image_t()
    private var index = 0

    init(_ codec: LibvpxCodec, clip: SyntheticClip, kbps: Int) throws {
        self.clip = clip
        let (cx, dx) = codec == .vp8 ? (otshim_vpx_vp8_cx(), otshim_vpx_vp8_dx()) : (otshim_vpx_vp9_cx(), otshim_vpx_vp9_dx())
        var cfg = vpx_codec_enc_cfg_t()
        guard vpx_codec_enc_config_default(cx, &cfg, 0) == VPX_CODEC_OK else { throw BenchError("config") }
        rawEncoderConfig(&cfg, width: clip.width, height: clip.height, kbps: kbps)
        guard otshim_vpx_enc_init(&enc, cx, &cfg, 0) == VPX_CODEC_OK else { throw BenchError("enc_init") }
        let controls: [(vp8e_enc_control_id, Int)] = codec == .vp8
            ? [(VP8E_SET_CPUUSED, -6), (VP8E_SET_NOISE_SENSITIVITY, 0), (VP8E_SET_STATIC_THRESHOLD, 1),
               (VP8E_SET_TOKEN_PARTITIONS, 0), (VP8E_SET_MAX_INTRA_BITRATE_PCT, 900)]
            : [(VP8E_SET_CPUUSED, 7), (VP9E_SET_AQ_MODE, 3), (VP9E_SET_ROW_MT, 1), (VP9E_SET_TILE_COLUMNS, 0),
               (VP8E_SET_STATIC_THRESHOLD, 1), (VP8E_SET_MAX_INTRA_BITRATE_PCT, 900)]
        for (id, v) in controls { _ = otshim_vpx_control_int(&enc, Int32(id.rawValue), Int32(v)) }
        var dcfg = vpx_codec_dec_cfg_t(threads: 1, w: 0, h: 0)
        guard otshim_vpx_dec_init(&dec, dx, &dcfg, 0) == VPX_CODEC_OK else { vpx_codec_destroy(&enc); throw BenchError("dec_init") }
    }

    deinit { vpx_codec_destroy(&enc); vpx_codec_destroy(&dec) }

    func run(frames: Int) throws -> RoundResult {
        var bytes = 0
        var failed = false
        let a0 = allocations()
        let sw = Stopwatch()
        for _ in 0..<frames {
            let i = index
            index += 1
            let f = clip.i420[i % clip.i420.count]
            f.y.withUnsafeBufferPointer { y in
                f.u.withUnsafeBufferPointer { u in
                    f.v.withUnsafeBufferPointer { v in
                        otshim_vpx_image_wrap_i420(&img, UInt32(f.width), UInt32(f.height), UnsafeMutablePointer(mutating: y.baseAddress),
                                               UnsafeMutablePointer(mutating: u.baseAddress), UnsafeMutablePointer(mutating: v.baseAddress),
                                               Int32(f.strideY), Int32(f.strideU), Int32(f.strideV))
                        if vpx_codec_encode(&enc, &img, Int64(i) * 33_333, 33_333, 0, UInt(VPX_DL_REALTIME)) != VPX_CODEC_OK { failed = true }
                    }
                }
            }
            var iter: vpx_codec_iter_t?
            var data: UnsafeRawPointer?, size = 0, flags: vpx_codec_frame_flags_t = 0, pts: vpx_codec_pts_t = 0
            while otshim_vpx_next_frame(&enc, &iter, &data, &size, &flags, &pts) != 0 {
                guard let data else { continue }
                bytes += size
                if vpx_codec_decode(&dec, data.assumingMemoryBound(to: UInt8.self), UInt32(size), nil, 0) != VPX_CODEC_OK { failed = true }
                var diter: vpx_codec_iter_t?
                while vpx_codec_get_frame(&dec, &diter) != nil {}
            }
        }
        let t = sw.elapsed()
        let allocs = allocations() - a0
        if failed { throw BenchError("raw libvpx reported an error") }
        return RoundResult(wall: t.wall, cpu: t.cpu, allocs: allocs, packets: 0, bytes: bytes)
    }
}

/// The library's path, from NV12 capture to a decoded VideoFrame. Kept alive across rounds.
final class WholeVideoPipeline {
    let clip: SyntheticClip
    let enc: LibvpxEncoder
    let dec: LibvpxDecoder
    let tx: SRTPContext, rx: SRTPContext
    var packetizer: any RTPPacketizer
    var depacketizer: any RTPDepacketizer
    var captured: VideoFrame
    var decoded: VideoFrame
    var wire: [UInt8] = []
    var seq: UInt16 = 1
    var index = 0

    init(_ codec: LibvpxCodec, clip: SyntheticClip, kbps: Int) throws {
        self.clip = clip
        enc = try LibvpxEncoder(codec, config: VideoEncoderConfig(width: clip.width, height: clip.height, bitrateKbps: kbps,
                                                                  threads: 1, frameDropThreshold: 0))
        dec = try LibvpxDecoder(codec)
        packetizer = codec.format.makePacketizer(maxPayloadSize: VP8Packetizer.maxPayloadSize(mtu: 1200, rtpHeaderLength: 12, srtpOverhead: 16))
        // The sessions' reorder window (SubscriberEngine).
        depacketizer = codec.format.makeDepacketizer(reorderWindow: 256)
        (tx, rx) = try srtpPair(.aeadAes128Gcm)
        captured = VideoFrame(width: clip.width, height: clip.height)
        decoded = VideoFrame(width: clip.width, height: clip.height)
        wire.reserveCapacity(2048)
    }

    /// Time per stage, seconds (filled when `run(frames:stages:)` is asked to profile).
    struct Stages {
        var convert = 0.0, encode = 0.0, packetize = 0.0, srtp = 0.0, depacketize = 0.0, decode = 0.0, copy = 0.0
    }

    func run(frames: Int) throws -> RoundResult {
        var unused: Stages?
        return try run(frames: frames, stages: &unused)
    }

    /// Runs `frames` frames through the path; with `stages` non-nil, also splits the time by stage
    /// (monotonic clock, nested stages subtracted from the enclosing one).
    func run(frames: Int, stages: inout Stages?) throws -> RoundResult {
        var packets = 0, decodedFrames = 0, problems = 0, bytes = 0
        let uvStride = ((clip.width + 1) / 2) * 2
        let profile = stages != nil
        var st = Stages()
        let a0 = allocations()
        let sw = Stopwatch()
        for _ in 0..<frames {
            let i = index
            index += 1
            let src = clip.nv12[i % clip.nv12.count]
            var t0 = profile ? monotonicSeconds() : 0
            try src.y.withUnsafeBytes { y in
                try src.uv.withUnsafeBytes { uv in
                    try captured.convertFromNV12(width: clip.width, height: clip.height, y: y, strideY: clip.width,
                                                 uv: uv, strideUV: uvStride, timestampMicros: Int64(i) * 33_333)
                }
            }
            if profile { let t = monotonicSeconds(); st.convert += t - t0; t0 = t }
            let nestedBeforeEncode = st.packetize + st.srtp + st.depacketize + st.decode
            try enc.encode(captured) { frame in
                bytes += frame.data.count
                let p0 = profile ? monotonicSeconds() : 0
                let nestedBeforePacketize = st.srtp + st.depacketize + st.decode
                try packetizer.packetize(frame.data, nonReference: frame.nonReference, layer: frame.layer) { payload, last in
                    wire.removeAll(keepingCapacity: true)
                    RTPPacket(marker: last, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(truncatingIfNeeded: i * 3000),
                              ssrc: 0x5EED, payload: payload).write(into: &wire)
                    seq &+= 1
                    packets += 1
                    let s0 = profile ? monotonicSeconds() : 0
                    try tx.protectRTP(&wire)
                    try rx.unprotectRTP(&wire)
                    let d0 = profile ? monotonicSeconds() : 0
                    if profile { st.srtp += d0 - s0 }
                    let decodeBefore = st.decode
                    let packet = try RTPPacket(parsing: wire[...])
                    depacketizer.insert(packet) { event in
                        switch event {
                        case .frame(let f):
                            let c0 = profile ? monotonicSeconds() : 0
                            do {
                                // The picture is lent to the renderer without a copy (as raw libvpx's is);
                                // the profiling run copies it into a VideoFrame and times that separately.
                                try dec.decode(f.data) { view in
                                    if profile {
                                        let k0 = monotonicSeconds()
                                        try view.copy(into: &decoded)
                                        st.copy += monotonicSeconds() - k0
                                    }
                                }
                                decodedFrames += 1
                            } catch { problems += 1 }
                            if profile { st.decode += monotonicSeconds() - c0 }
                        case .keyframeRequest: problems += 1
                        }
                    }
                    if profile { st.depacketize += monotonicSeconds() - d0 - (st.decode - decodeBefore) }
                }
                if profile { st.packetize += monotonicSeconds() - p0 - (st.srtp + st.depacketize + st.decode - nestedBeforePacketize) }
            }
            if profile {
                st.encode += monotonicSeconds() - t0 - (st.packetize + st.srtp + st.depacketize + st.decode - nestedBeforeEncode)
            }
        }
        let t = sw.elapsed()
        let allocs = allocations() - a0
        guard problems == 0, decodedFrames == frames else { throw BenchError("whole path decoded \(decodedFrames)/\(frames), \(problems) problems") }
        if profile { stages = st }
        return RoundResult(wall: t.wall, cpu: t.cpu, allocs: allocs, packets: packets, bytes: bytes)
    }
}

/// Conversion cost per frame at 640×480 for each capture format (libyuv, the library's converters), and I420
/// scaling 1280×720 → 640×360. (docs/benchmarks.md has the hand-written converters' figures from the run before
/// they were deleted.)
func conversionCosts(quick: Bool) throws {
    let w = 640, h = 480, n = quick ? 30 : 200, rounds = quick ? 3 : 9
    var f = VideoFrame(width: w, height: h)
    var seed: UInt32 = 0x1234_5678
    func noise(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in seed = seed &* 1_664_525 &+ 1_013_904_223; return UInt8(truncatingIfNeeded: seed >> 24) }
    }
    let nv12y = noise(w * h), nv12uv = noise(w * h / 2), yuy2 = noise(w * h * 2), bgra = noise(w * h * 4), rgb24 = noise(w * h * 3)
    /// Median ms/frame over `rounds` rounds of `n`.
    func time(_ body: () throws -> Void) rethrows -> String {
        var ms: [Double] = []
        for _ in 0..<rounds {
            let sw = Stopwatch()
            for _ in 0..<n { try body() }
            ms.append(sw.elapsed().cpu * 1000 / Double(n))
        }
        return fmt(median(ms), 3)
    }
    var line = "I420 conversion (libyuv) at 640x480, ms/frame (CPU, median of \(rounds) rounds of \(n)):"
    line += " NV12 " + (try time { try nv12y.withUnsafeBytes { y in try nv12uv.withUnsafeBytes { uv in
        try f.convertFromNV12(width: w, height: h, y: y, strideY: w, uv: uv, strideUV: w, timestampMicros: 0) } } })
    line += ", YUY2 " + (try time { try yuy2.withUnsafeBytes { try f.convertFromYUY2(width: w, height: h, data: $0, stride: w * 2, timestampMicros: 0) } })
    // PixelFormat.argb is B,G,R,A in memory (libyuv's name): "BGRA" in byte order.
    line += ", BGRA " + (try time { try bgra.withUnsafeBytes { try f.convertFromRGB(.argb, width: w, height: h, data: $0, stride: w * 4, timestampMicros: 0) } })
    line += ", RGB24 " + (try time { try rgb24.withUnsafeBytes { try f.convertFromRGB(.rgb24, width: w, height: h, data: $0, stride: w * 3, timestampMicros: 0) } })
    print(line)
    let hd = SyntheticClip(width: 1280, height: 720, frames: 1).i420[0]
    var small = VideoFrame(width: 640, height: 360)
    print("I420 scaling 1280x720 -> 640x360 (box filter), ms/frame: \(try time { try small.scale(hd, toWidth: 640, height: 360, filter: .box) })\n")
}

// MARK: - Opus

func opusComparison(rounds: Int, frames: Int) throws {
    print("Opus 48 kHz, 20 ms, VoIP, complexity 9, 32 kbit/s (mono) / 64 kbit/s (stereo), FEC and DTX off")
    print("whole audio path = Opus encode -> RTP -> SRTP protect (GCM) -> unprotect -> RTP parse -> TOC check -> Opus decode")
    for channels in [1, 2] {
        let audio = syntheticAudio(channels: channels, frames: 50)
        let rawPipe = try RawOpusPipeline(audio: audio, channels: channels)
        let wholePipe = try WholeOpusPipeline(audio: audio, channels: channels)
        _ = try rawPipe.run(frames: frames); _ = try wholePipe.run(frames: frames)  // warm-up
        var raw: [Double] = [], whole: [Double] = [], ratios: [Double] = [], allocsPerPacket = 0.0
        for r in 0..<rounds {
            for order in (r % 2 == 0 ? [0, 1] : [1, 0]) {
                if order == 0 {
                    raw.append(Double(frames) / (try rawPipe.run(frames: frames)))
                } else {
                    let (cpu, allocs) = try wholePipe.run(frames: frames)
                    whole.append(Double(frames) / cpu)
                    allocsPerPacket = Double(allocs) / Double(frames)
                }
            }
            ratios.append(whole[r] / raw[r])
        }
        print("  \(channels == 1 ? "mono  " : "stereo") raw libopus \(pad(fmt(median(raw)), 8)) frames/s   whole path \(pad(fmt(median(whole)), 8)) frames/s   ratio \(fmt(median(ratios), 3)) (\(rounds) paired rounds of \(frames))   allocs/packet \(fmt(allocsPerPacket, 2))")
    }
    print("")
}

private func opusSettings(_ channels: Int) -> (bitrate: Int32, complexity: Int32) { (channels == 1 ? 32_000 : 64_000, 9) }

/// libopus called directly, with the same settings as the library's encoder.
final class RawOpusPipeline {
    let audio: [[Int16]]
    let enc: OpaquePointer, dec: OpaquePointer
    let packet = UnsafeMutablePointer<UInt8>.allocate(capacity: 1500)
    let pcm: UnsafeMutablePointer<Int16>
    var index = 0

    init(audio: [[Int16]], channels: Int) throws {
        self.audio = audio
        var err: Int32 = 0
        guard let e = opus_encoder_create(48_000, Int32(channels), OPUS_APPLICATION_VOIP, &err) else { throw BenchError("opus create") }
        guard let d = opus_decoder_create(48_000, Int32(channels), &err) else { opus_encoder_destroy(e); throw BenchError("opus create") }
        enc = e; dec = d
        pcm = .allocate(capacity: 5760 * channels)
        let s = opusSettings(channels)
        _ = otshim_opus_encoder_set(enc, OPUS_SET_BITRATE_REQUEST, s.bitrate)
        _ = otshim_opus_encoder_set(enc, OPUS_SET_COMPLEXITY_REQUEST, s.complexity)
        _ = otshim_opus_encoder_set(enc, OPUS_SET_INBAND_FEC_REQUEST, 0)
        _ = otshim_opus_encoder_set(enc, OPUS_SET_PACKET_LOSS_PERC_REQUEST, 0)
        _ = otshim_opus_encoder_set(enc, OPUS_SET_DTX_REQUEST, 0)
        _ = otshim_opus_encoder_set(enc, OPUS_SET_SIGNAL_REQUEST, OPUS_SIGNAL_VOICE)
    }

    deinit { opus_encoder_destroy(enc); opus_decoder_destroy(dec); packet.deallocate(); pcm.deallocate() }

    /// CPU seconds for `frames` encode+decode pairs.
    func run(frames: Int) throws -> Double {
        var failed = false
        let sw = Stopwatch()
        for _ in 0..<frames {
            let n = audio[index % audio.count].withUnsafeBufferPointer { src -> Int32 in
                guard let base = src.baseAddress else { return -1 }
                return opus_encode(enc, base, 960, packet, 1500)
            }
            index += 1
            let d = opus_decode(dec, packet, n, pcm, 5760, 0)
            if n <= 0 || d != 960 { failed = true }
        }
        let t = sw.elapsed()
        if failed { throw BenchError("raw libopus failed") }
        return t.cpu
    }
}

/// The library's audio path.
final class WholeOpusPipeline {
    let audio: [[Int16]]
    let enc: OpusAudioEncoder
    let dec: OpusAudioDecoder
    let tx: SRTPContext, rx: SRTPContext
    var packet: [UInt8] = [], wire: [UInt8] = [], pcm: [Int16] = []
    var tracker = RTPSequenceTracker()
    var index = 0

    init(audio: [[Int16]], channels: Int) throws {
        self.audio = audio
        let s = opusSettings(channels)
        enc = try OpusAudioEncoder(config: OpusEncoderConfig(channels: channels, bitrateBps: Int(s.bitrate), complexity: Int(s.complexity)))
        dec = try OpusAudioDecoder(channels: channels)
        (tx, rx) = try srtpPair(.aeadAes128Gcm)
        packet.reserveCapacity(1500); wire.reserveCapacity(1500); pcm.reserveCapacity(5760 * channels)
    }

    /// CPU seconds and allocations for `frames` packets.
    func run(frames: Int) throws -> (Double, UInt64) {
        var bad = 0
        let a0 = allocations()
        let sw = Stopwatch()
        for _ in 0..<frames {
            let i = index
            index += 1
            _ = try audio[i % audio.count].withUnsafeBufferPointer { try enc.encode($0, into: &packet) }
            wire.removeAll(keepingCapacity: true)
            RTPPacket(payloadType: 111, sequenceNumber: UInt16(truncatingIfNeeded: i), timestamp: UInt32(truncatingIfNeeded: i * 960),
                      ssrc: 0xA0D10, payload: packet[...]).write(into: &wire)
            try tx.protectRTP(&wire)
            try rx.unprotectRTP(&wire)
            let rtp = try RTPPacket(parsing: wire[...])
            switch tracker.record(rtp.sequenceNumber) { case .first, .inOrder: break; default: bad += 1 }
            let info = try OpusPayload.packetInfo(rtp.payload)
            if try dec.decode(rtp.payload, into: &pcm) != info.samples { bad += 1 }
        }
        let t = sw.elapsed()
        let allocs = allocations() - a0
        if bad > 0 { throw BenchError("whole Opus path: \(bad) problems") }
        return (t.cpu, allocs)
    }
}

// MARK: - SRTP

func srtpPair(_ profile: SRTPProfile) throws -> (SRTPContext, SRTPContext) {
    let material = (0..<profile.keyingMaterialLength).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) }
    return (try SRTPContext(profile: profile, keys: SRTPKeys(keyingMaterial: material, profile: profile, isDTLSClient: true)),
            try SRTPContext(profile: profile, keys: SRTPKeys(keyingMaterial: material, profile: profile, isDTLSClient: false)))
}

func srtpThroughput(packets: Int, rounds: Int) throws {
    let backend = SRTPContext.usesOpenSSL ? "ciphers and HMAC from OpenSSL" : "its own crypto (NSS)"
    print("SRTP (libsrtp2 with \(backend)), packets/s per thread (CPU time), \(packets) packets per round:")
    for profile in [SRTPProfile.aeadAes128Gcm, .aes128CmHmacSha1_80] {
        for payloadSize in [100, 1100] {
            var protectRates: [Double] = [], unprotectRates: [Double] = []
            var allocs = 0.0
            for _ in 0..<rounds {
                let (tx, rx) = try srtpPair(profile)
                let template = RTPPacket(payloadType: 96, sequenceNumber: 0, timestamp: 0, ssrc: 0xBEEF,
                                         payload: [UInt8](repeating: 0xAB, count: payloadSize)[...]).serialized()
                // Pre-sized buffers so the loops measure SRTP only.
                var buffers = (0..<packets).map { i -> [UInt8] in
                    var b = template
                    b.reserveCapacity(template.count + Int(SRTP_MAX_TRAILER_LEN))
                    b[2] = UInt8(truncatingIfNeeded: i >> 8); b[3] = UInt8(truncatingIfNeeded: i)
                    return b
                }
                let a0 = allocations()
                var sw = Stopwatch()
                for i in 0..<packets { try tx.protectRTP(&buffers[i]) }
                protectRates.append(Double(packets) / sw.elapsed().cpu)
                sw = Stopwatch()
                for i in 0..<packets { try rx.unprotectRTP(&buffers[i]) }
                unprotectRates.append(Double(packets) / sw.elapsed().cpu)
                allocs = Double(allocations() - a0) / Double(2 * packets)
            }
            let name = profile == .aeadAes128Gcm ? "AEAD_AES_128_GCM       " : "AES_CM_128_HMAC_SHA1_80"
            let inside = try libsrtpAllocationsPerPacket(profile, payloadSize: payloadSize)
            print("  \(name) \(pad(String(payloadSize + 12), 5)) B RTP: protect \(pad(fmt(median(protectRates) / 1000, 0), 6))k/s  unprotect \(pad(fmt(median(unprotectRates) / 1000, 0), 6))k/s  allocs/packet \(fmt(allocs, 2)) (libsrtp alone: \(fmt(inside, 2)))")
        }
    }
}

/// Allocations per protect/unprotect made inside libsrtp (and its crypto backend) when called directly.
func libsrtpAllocationsPerPacket(_ profile: SRTPProfile, payloadSize: Int) throws -> Double {
    var policy = srtp_policy_t()
    let p = profile == .aeadAes128Gcm ? srtp_profile_aead_aes_128_gcm : srtp_profile_aes128_cm_sha1_80
    _ = srtp_crypto_policy_set_from_profile_for_rtp(&policy.rtp, p)
    _ = srtp_crypto_policy_set_from_profile_for_rtcp(&policy.rtcp, p)
    var key = [UInt8](repeating: 7, count: profile.keyLength + profile.saltLength)
    var tx: srtp_t?, rx: srtp_t?
    let n = 2000
    var buffer = [UInt8](repeating: 0, count: 12 + payloadSize + 64)
    return try key.withUnsafeMutableBufferPointer { k -> Double in
        policy.key = k.baseAddress
        policy.ssrc = srtp_ssrc_t(type: ssrc_any_outbound, value: 0)
        guard srtp_create(&tx, &policy) == srtp_err_status_ok else { throw BenchError("srtp_create") }
        policy.ssrc = srtp_ssrc_t(type: ssrc_any_inbound, value: 0)
        guard srtp_create(&rx, &policy) == srtp_err_status_ok else { throw BenchError("srtp_create") }
        defer { srtp_dealloc(tx); srtp_dealloc(rx) }
        return buffer.withUnsafeMutableBytes { b -> Double in
            guard let base = b.baseAddress else { return 0 }
            let a0 = allocations()
            for i in 0..<n {
                b[0] = 0x80; b[1] = 96; b[2] = UInt8(truncatingIfNeeded: i >> 8); b[3] = UInt8(truncatingIfNeeded: i)
                b[8] = 0; b[9] = 0; b[10] = 0xBE; b[11] = 0xEF
                var len = Int32(12 + payloadSize)
                _ = srtp_protect(tx, base, &len)
                _ = srtp_unprotect(rx, base, &len)
            }
            return Double(allocations() - a0) / Double(2 * n)
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
