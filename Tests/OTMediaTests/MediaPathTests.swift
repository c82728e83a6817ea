import XCTest
@testable import OTMedia
import OTTransport
import OTWire

/// The whole media path: NV12 capture → I420 → VP8 → RTP/VP8 payloads → SRTP → (network) → SRTP → RTP parse →
/// depacketizer → VP8 decoder; and PCM → Opus → RTP → SRTP → back → Opus decoder.
final class MediaPathTests: XCTestCase {
    static let width = 320, height = 240

    func srtpPair() throws -> (SRTPContext, SRTPContext) {
        let material = (0..<SRTPProfile.aeadAes128Gcm.keyingMaterialLength).map { UInt8($0 * 5 & 0xFF) }
        return (try SRTPContext(profile: .aeadAes128Gcm, keys: SRTPKeys(keyingMaterial: material, profile: .aeadAes128Gcm, isDTLSClient: true)),
                try SRTPContext(profile: .aeadAes128Gcm, keys: SRTPKeys(keyingMaterial: material, profile: .aeadAes128Gcm, isDTLSClient: false)))
    }

    final class VideoSender {
        let encoder: VP8Encoder
        var packetizer = VP8Packetizer(maxPayloadSize: VP8Packetizer.maxPayloadSize(mtu: 1200, srtpOverhead: 16))
        let srtp: SRTPContext
        var seq: UInt16 = 40_000
        var captured = VideoFrame(width: 1, height: 1)

        init(srtp: SRTPContext) throws {
            self.srtp = srtp
            encoder = try VP8Encoder(config: VideoEncoderConfig(width: MediaPathTests.width, height: MediaPathTests.height,
                                                              bitrateKbps: 1000, frameDropThreshold: 0))
        }

        /// Sends picture `t` captured as NV12; returns the SRTP packets.
        func send(t: Int) throws -> [[UInt8]] {
            let (y, uv) = nv12Planes(movingPicture(width: MediaPathTests.width, height: MediaPathTests.height, t: t))
            try y.withUnsafeBytes { py in
                try uv.withUnsafeBytes { puv in
                    try captured.convertFromNV12(width: MediaPathTests.width, height: MediaPathTests.height, y: py,
                                                 strideY: MediaPathTests.width, uv: puv, strideUV: MediaPathTests.width,
                                                 timestampMicros: Int64(t) * 33_333)
                }
            }
            var wire: [[UInt8]] = []
            try encoder.encode(captured) { frame in
                try packetizer.packetize(frame.data, nonReference: frame.nonReference, layer: frame.layer) { payload, last in
                    var p = RTPPacket(marker: last, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(t * 3000),
                                      ssrc: 0x1111, payload: payload).serialized()
                    seq &+= 1
                    try srtp.protectRTP(&p)
                    wire.append(p)
                }
            }
            return wire
        }
    }

    final class VideoReceiver {
        let srtp: SRTPContext
        var depacketizer = VP8Depacketizer(reorderWindow: 6)
        let decoder: VP8Decoder
        var picture = VideoFrame(width: 1, height: 1)
        var decoded: [(t: Int, psnr: Double)] = []
        var keyframeRequests: [KeyframeRequestReason] = []
        var decodeErrors = 0

        init(srtp: SRTPContext) throws { self.srtp = srtp; decoder = try VP8Decoder() }

        func receive(_ wire: [UInt8]) throws {
            var p = wire
            try srtp.unprotectRTP(&p)
            let packet = try RTPPacket(parsing: p)
            var frames: [ReceivedEncodedFrame] = []
            depacketizer.insert(packet) { e in
                switch e {
                case .frame(let f): frames.append(f)
                case .keyframeRequest(let r): keyframeRequests.append(r)
                }
            }
            for f in frames {
                do {
                    try decoder.decode(f.data, into: &picture)
                    let t = Int(f.rtpTimestamp / 3000)
                    decoded.append((t, lumaPSNR(movingPicture(width: MediaPathTests.width, height: MediaPathTests.height, t: t), picture)))
                } catch {
                    decodeErrors += 1
                }
            }
        }
    }

    /// Threshold: every decoded frame above 30 dB luma PSNR against its source at 320×240, 1 Mbit/s.
    func testMovingPictureThroughWholePathDecodesAbovePSNRThreshold() throws {
        let (a, b) = try srtpPair()
        let sender = try VideoSender(srtp: a), receiver = try VideoReceiver(srtp: b)
        var packets = 0
        for t in 0..<30 {
            let wire = try sender.send(t: t)
            packets += wire.count
            XCTAssertTrue(wire.allSatisfy { $0.count <= 1200 - 28 }, "packets fit the MTU")
            for p in wire { try receiver.receive(p) }
        }
        XCTAssertGreaterThan(packets, 30, "the keyframe spans several packets")
        XCTAssertEqual(receiver.decoded.map(\.t), Array(0..<30))
        XCTAssertEqual(receiver.keyframeRequests, [])
        XCTAssertEqual(receiver.decodeErrors, 0)
        let worst = receiver.decoded.map(\.psnr).min() ?? 0
        XCTAssertGreaterThan(worst, 30, "worst luma PSNR \(worst) dB")
    }

    func testReorderedPacketsStillDecodeEveryFrame() throws {
        let (a, b) = try srtpPair()
        let sender = try VideoSender(srtp: a), receiver = try VideoReceiver(srtp: b)
        var pending: [[UInt8]] = []
        for t in 0..<10 { pending += try sender.send(t: t) }
        // Swap neighbours throughout (within the reorder window).
        var i = 0
        while i + 1 < pending.count { pending.swapAt(i, i + 1); i += 3 }
        for p in pending { try receiver.receive(p) }
        XCTAssertEqual(receiver.decoded.map(\.t), Array(0..<10))
        XCTAssertEqual(receiver.keyframeRequests, [])
        XCTAssertGreaterThan(receiver.decoded.map(\.psnr).min() ?? 0, 30)
    }

    func testLostPartitionYieldsKeyframeRequestNotGarbage() throws {
        let (a, b) = try srtpPair()
        let sender = try VideoSender(srtp: a), receiver = try VideoReceiver(srtp: b)
        for t in 0..<5 { for p in try sender.send(t: t) { try receiver.receive(p) } }
        var lossy = try sender.send(t: 5)
        if lossy.count == 1 { lossy = [] } else { lossy.remove(at: lossy.count / 2) }   // a packet of frame 5 is lost
        for p in lossy { try receiver.receive(p) }
        for t in 6..<12 { for p in try sender.send(t: t) { try receiver.receive(p) } }
        XCTAssertEqual(receiver.decoded.map(\.t), Array(0..<5), "nothing after the loss is decoded")
        XCTAssertEqual(receiver.keyframeRequests.count, 1)
        if case .packetLoss = receiver.keyframeRequests.first {} else { XCTFail("\(receiver.keyframeRequests)") }
        // The sender honours the request (PLI); the picture comes back intact.
        sender.encoder.requestKeyframe()
        for t in 12..<16 { for p in try sender.send(t: t) { try receiver.receive(p) } }
        XCTAssertEqual(receiver.decoded.map(\.t), Array(0..<5) + Array(12..<16))
        XCTAssertEqual(receiver.decodeErrors, 0)
        XCTAssertGreaterThan(receiver.decoded.map(\.psnr).min() ?? 0, 30)
    }

    func testToneThroughOpusRTPAndSRTPKeepsFrequencyAndLossIsDetected() throws {
        let (a, b) = try srtpPair()
        let enc = try OpusAudioEncoder(config: OpusEncoderConfig())
        let dec = try OpusAudioDecoder()
        var tracker = RTPSequenceTracker()
        var packet: [UInt8] = [], pcm: [Int16] = [], out: [Int16] = []
        var concealed = 0, seq: UInt16 = 65_530
        var wire: [[UInt8]] = []
        for i in 0..<60 {
            try enc.encode(tone(frequencies: [800], startSample: i * 960, count: 960)[...], into: &packet)
            var p = RTPPacket(payloadType: 111, sequenceNumber: seq, timestamp: UInt32(i * 960), ssrc: 7, payload: packet[...]).serialized()
            seq &+= 1
            try a.protectRTP(&p)
            wire.append(p)
        }
        wire.remove(at: 30)            // lost
        wire.swapAt(40, 41)            // reordered
        var arrivals: [RTPSequenceTracker.Arrival] = []
        for w in wire {
            var p = w
            try b.unprotectRTP(&p)
            let rtp = try RTPPacket(parsing: p)
            let arrival = tracker.record(rtp.sequenceNumber)
            arrivals.append(arrival)
            switch arrival {
            case .late, .duplicate: continue   // a jitter buffer would slot it in; here it is dropped
            case .gap(let missing):
                for _ in 0..<missing { try dec.concealLoss(samples: 960, into: &pcm); out += pcm; concealed += 1 }
            default: break
            }
            try dec.decode(rtp.payload, into: &pcm)
            out += pcm
        }
        XCTAssertEqual(arrivals.filter { $0 == .gap(missing: 1) }.count, 2, "the loss and the early packet of the swapped pair")
        XCTAssertEqual(arrivals.filter { $0 == .late }.count, 1)
        XCTAssertEqual(concealed, 2)
        let steady = Array(out[4800...])
        XCTAssertEqual(zeroCrossingFrequency(steady), 800, accuracy: 20)
        XCTAssertGreaterThan(goertzel(steady, frequency: 800), 50 * goertzel(steady, frequency: 1300))
    }
}
