import Glibc
import OTBase
import OTMedia
import OTTransport
import OTWire

/// `ot-bench pipeline`: frames/s through the publisher's and subscriber's media pipelines in one process
/// (VideoSendPipeline → SRTP → VideoReceivePipeline; AudioSendPipeline → SRTP → AudioReceivePipeline),
/// against raw libvpx encode+decode of the same clip.
func runPipelineBenchmark(_ args: [String]) throws {
    let quick = args.contains("--quick")
    let rounds = quick ? 2 : 5
    let frames = quick ? 40 : 150
    print("ot-bench pipeline: \(rounds) rounds, medians; fps from thread CPU time (wall in brackets)")
    print("video = I420 -> VideoSendPipeline (VP8, RTP + abs-send-time/transport-wide seq/mid) -> SRTP (GCM)")
    print("        -> VideoReceivePipeline (depacketizer, jitter buffer, VP8 decode; repair is the RTP session's)\n")
    for (w, h, kbps) in [(640, 480, 1000)] {
        let clip = SyntheticClip(width: w, height: h, frames: 30)
        var raw: [Double] = [], pipe: [Double] = [], pipeWall: [Double] = []
        var allocsPerPacket = 0.0, packetsPerFrame = 0.0
        for r in 0..<rounds {
            for order in (r % 2 == 0 ? [0, 1] : [1, 0]) {
                if order == 0 {
                    let m = try RawVPXPipeline(.vp8, clip: clip, kbps: kbps).run(frames: frames)
                    raw.append(Double(frames) / m.cpu)
                } else {
                    let m = try videoPipelineRound(clip: clip, kbps: kbps, frames: frames)
                    pipe.append(Double(frames) / m.cpu); pipeWall.append(Double(frames) / m.wall)
                    allocsPerPacket = Double(m.allocs) / Double(m.packets)
                    packetsPerFrame = Double(m.packets) / Double(frames)
                }
            }
        }
        print("video \(w)x\(h) @ \(kbps) kbit/s, \(frames) frames/round, \(fmt(packetsPerFrame)) packets/frame")
        print("  raw libvpx encode+decode  \(pad(fmt(median(raw)), 8)) fps")
        print("  send+receive pipelines    \(pad(fmt(median(pipe)), 8)) fps  [\(fmt(median(pipeWall))) wall]   allocs/packet \(fmt(allocsPerPacket, 2))")
        let split = lastVideoAllocSplit, n = Double(frames) * packetsPerFrame
        print("  allocs/packet by stage    send \(fmt(Double(split.send) / n, 2))  srtp \(fmt(Double(split.srtp) / n, 2))  receive \(fmt(Double(split.receive) / n, 2))")
        print("  ratio pipelines/raw       \(pad(fmt(median(pipe) / median(raw), 3), 8))\n")
    }
    var audio: [Double] = []
    let audioFrames = quick ? 250 : 1000
    for _ in 0..<rounds { audio.append(Double(audioFrames) / (try audioPipelineRound(frames: audioFrames))) }
    print("audio 48 kHz mono 20 ms: send+receive pipelines \(fmt(median(audio), 0)) frames/s\n")
}

func videoPipelineRound(clip: SyntheticClip, kbps: Int, frames: Int) throws -> RoundResult {
    let ids = RTPHeaderExtensionIds(absSendTime: 2, transportSequenceNumber: 3, mid: 4)
    let sender = try VideoSendPipeline(config: VideoSendConfig(ssrc: 0x5EED, encoder: VideoEncoderConfig(width: clip.width, height: clip.height,
                                                                                                      bitrateKbps: kbps, threads: 1,
                                                                                                      frameDropThreshold: 0),
                                                               extensionIds: ids, mid: "0"),
                                       transportSequence: TransportSequenceCounter())
    let receiver = try VideoReceivePipeline()
    let (tx, rx) = try srtpPair(.aeadAes128Gcm)
    var packets = 0, decoded = 0, problems = 0
    var receiveAllocs: UInt64 = 0, srtpAllocs: UInt64 = 0
    let a0 = allocations()
    let sw = Stopwatch()
    for i in 0..<frames {
        let now = Instant(micros: Int64(i) * 33_333)
        var frame = clip.i420[i % clip.i420.count]
        frame.timestampMicros = now.micros
        try sender.send(frame, now: now) { wire in
            packets += 1
            let s0 = allocations()
            try tx.protectRTP(&wire)
            try rx.unprotectRTP(&wire)
            let r0 = allocations()
            srtpAllocs += r0 - s0
            for event in receiver.receive(try RTPPacket(parsing: wire[...]), now: now) {
                switch event {
                case .frame: decoded += 1
                case .requestKeyframe: problems += 1
                }
            }
            receiveAllocs += allocations() - r0
        }
    }
    let t = sw.elapsed()
    let allocs = allocations() - a0
    guard problems == 0, decoded == frames else { throw BenchError("pipelines decoded \(decoded)/\(frames), \(problems) problems") }
    lastVideoAllocSplit = (allocs - receiveAllocs - srtpAllocs, srtpAllocs, receiveAllocs)
    return RoundResult(wall: t.wall, cpu: t.cpu, allocs: allocs, packets: packets, bytes: 0)
}

/// Allocations of the last video round: send pipeline (with the encoder), SRTP, receive pipeline (with the decoder).
nonisolated(unsafe) var lastVideoAllocSplit: (send: UInt64, srtp: UInt64, receive: UInt64) = (0, 0, 0)

/// CPU seconds for `frames` 20 ms frames through the audio pipelines.
func audioPipelineRound(frames: Int) throws -> Double {
    let sender = try AudioSendPipeline(config: AudioSendConfig(ssrc: 7))
    let receiver = try AudioReceivePipeline()
    let (tx, rx) = try srtpPair(.aeadAes128Gcm)
    let audio = syntheticAudio(channels: 1, frames: 50)
    let settings = AudioDeviceSettings()
    var pcm: [Int16] = []
    let sw = Stopwatch()
    for i in 0..<frames {
        let now = Instant(micros: Int64(i) * 20_000)
        try sender.send(audio[i % audio.count], settings: settings, now: now) { wire in
            try tx.protectRTP(&wire)
            try rx.unprotectRTP(&wire)
            receiver.receive(try RTPPacket(parsing: wire[...]), now: now)
        }
        receiver.pull(now: now, into: &pcm)
    }
    return sw.elapsed().cpu
}
