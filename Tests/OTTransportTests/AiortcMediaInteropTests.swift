import Foundation
import OTBase
import OTMedia
import OTWire
@testable import OTTransport
import XCTest

/// Opus and VP8 both ways with aiortc on loopback, each side checking the other's decoded content:
/// aiortc sends a 440 Hz sine and solid Y=170 video; we send a 1000 Hz sine and solid Y=60 video.
final class AiortcMediaInteropTests: XCTestCase {
    /// Reassembles VP8 frames from RTP packets of one SSRC (in order on loopback; a gap drops the frame).
    struct VP8Assembler {
        var timestamp: UInt32?
        var lastSeq: UInt16?
        var parts: [UInt8] = []
        var broken = false

        mutating func add(_ p: RTPPacket) throws -> [UInt8]? {
            let (desc, body) = try VP8PayloadDescriptor.parse(p.payload)
            if desc.startsFrame || timestamp != p.timestamp {
                timestamp = p.timestamp; parts = []; broken = !desc.startsFrame
            } else if let l = lastSeq, p.sequenceNumber != l &+ 1 {
                broken = true
            }
            lastSeq = p.sequenceNumber
            parts.append(contentsOf: body)
            guard p.marker, !broken else { return nil }
            defer { parts = [] }
            return parts
        }
    }

    static func sine(hz: Double, from sample: Int, count: Int) -> [Int16] {
        (0..<count).map { Int16(8000 * sin(2 * .pi * hz * Double(sample + $0) / 48000)) }
    }

    func testOpusAndVP8BothWaysDecodedByContent() throws {
        let (proc, stdin, reader, stderr) = try AiortcInteropTests.startAiortc(["media", "4"])
        defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }
        guard let offerMsg = reader.json(where: "type", is: "offer"), let offerText = offerMsg["sdp"] as? String else {
            return XCTFail("no offer from aiortc: \(String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self))")
        }
        let offer = try SessionDescription.parse(offerText)
        let peer = try LoopbackPeer()
        defer { peer.driver.stop() }
        let cert = try DTLSCertificate()
        var rng = SystemRandomNumberGenerator()
        let cred = ICEConfig.randomCredentials(using: &rng)
        let ice = ICEAgent(config: ICEConfig(role: .controlled, localUfrag: cred.ufrag, localPwd: cred.pwd, tieBreaker: .random(in: 0 ... .max), seed: 11))
        var local = SDPLocalParameters(iceUfrag: cred.ufrag, icePwd: cred.pwd, fingerprint: cert.fingerprint)
        local.candidates = [try XCTUnwrap(ice.addLocalCandidate(peer.address))]
        local.endOfCandidates = true
        let audioSSRC: UInt32 = 0x0A0A_0001, videoSSRC: UInt32 = 0x0A0A_0002
        local.audioTrack = SDPLocalTrack(ssrc: audioSSRC, streamID: "ot", trackID: "ot-audio", cname: "libotsession")
        local.videoTrack = SDPLocalTrack(ssrc: videoSSRC, rtxSSRC: 0x0A0A_0003, streamID: "ot", trackID: "ot-video", cname: "libotsession")
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: local)
        XCTAssertEqual(neg.media.map(\.kind), ["audio", "video"])
        let audio = neg.media[0], video = neg.media[1]
        XCTAssertEqual(video.codec.name, "VP8")
        ice.setRemoteCredentials(ufrag: neg.remoteIceUfrag, pwd: neg.remoteIcePwd)
        neg.remoteCandidates.forEach(ice.addRemoteCandidate)
        let dtls = try DTLSEndpoint(role: .client, certificate: cert, remoteFingerprint: neg.remoteFingerprint)
        peer.install(MediaTransport(ice: ice, dtls: dtls))
        stdin.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["type": "answer", "sdp": answer.serialized()]) + Data("\n".utf8))
        XCTAssertTrue(LoopbackPeer.wait(seconds: 20) { peer.has(isDTLSConnected) }, "events: \(peer.events.withLock { $0 })")
        let keys = try XCTUnwrap(peer.withTransport { $0?.dtls.keyingMaterial })
        let srtp = try SRTPContext(profile: keys.profile, keys: keys.srtpKeys)

        // Send 1.6 s: Opus every 20 ms (1000 Hz sine), VP8 every 40 ms (solid Y=60), 320x240.
        let opusEncoder = try OpusAudioEncoder(config: OpusEncoderConfig(sampleRate: 48_000, channels: 1))
        let vp8Encoder = try VP8Encoder(config: VP8EncoderConfig(width: 320, height: 240))
        let c = VideoFrame.chromaSize(width: 320, height: 240)
        var audioSeq: UInt16 = 100, videoSeq: UInt16 = 500
        var opusPacket: [UInt8] = []
        func send(_ packet: RTPPacket) throws {
            var bytes = packet.serialized()
            try srtp.protectRTP(&bytes)
            peer.withTransport { _ = $0?.sendMedia(bytes) }
            peer.driver.wake()
        }
        for i in 0..<80 {
            _ = try opusEncoder.encode(Self.sine(hz: 1000, from: i * 960, count: 960)[...], into: &opusPacket)
            try send(RTPPacket(marker: i == 0, payloadType: audio.codec.payloadType, sequenceNumber: audioSeq, timestamp: UInt32(i * 960),
                               ssrc: audioSSRC, payload: opusPacket[...]))
            audioSeq &+= 1
            if i % 2 == 0 {
                var frame = VideoFrame(width: 320, height: 240, y: [UInt8](repeating: 60, count: 320 * 240),
                                       u: [UInt8](repeating: 200, count: c.width * c.height), v: [UInt8](repeating: 90, count: c.width * c.height),
                                       strideY: 320, strideU: c.width, strideV: c.width, timestampMicros: Int64(i) * 20_000)
                frame.timestampMicros = Int64(i) * 20_000
                var packets: [RTPPacket] = []
                try vp8Encoder.encode(frame, forceKeyframe: i == 0) { enc in
                    let data = Array(enc.data)
                    var offset = 0
                    while offset < data.count {
                        let n = min(1000, data.count - offset)
                        var payload: [UInt8] = []
                        VP8PayloadDescriptor(startOfPartition: offset == 0, pictureId: UInt16(i / 2)).write(into: &payload)
                        payload += data[offset..<offset + n]
                        offset += n
                        packets.append(RTPPacket(marker: offset == data.count, payloadType: video.codec.payloadType, sequenceNumber: videoSeq,
                                                 timestamp: UInt32(i) * 1800, ssrc: videoSSRC, payload: payload[...]))
                        videoSeq &+= 1
                    }
                }
                for p in packets { try send(p) }
            }
            usleep(20_000)
        }
        let report = try XCTUnwrap(reader.json(where: "event", is: "media", timeout: 20))

        // What aiortc sent: decode it and check the content.
        let opusDecoder = try OpusAudioDecoder(sampleRate: 48_000, channels: 1)
        let vp8Decoder = try VP8Decoder()
        var assembler = VP8Assembler()
        var pcm: [Int16] = [], allPCM: [Int16] = []
        var decodedFrame = VideoFrame(width: 16, height: 16)
        var videoFrames = 0, lastMeanY = -1.0, audioPackets = 0
        let audioSSRCs = Set(audio.remoteSSRCs), videoSSRCs = Set(video.remoteSSRCs)
        for e in peer.events.withLock({ $0 }) {
            guard case .srtp(let bytes, let isRTCP) = e, !isRTCP else { continue }
            var plain = bytes
            try srtp.unprotectRTP(&plain)
            let p = try RTPPacket(parsing: plain)
            if audioSSRCs.contains(p.ssrc) && p.payloadType == audio.codec.payloadType {
                try opusDecoder.decode(p.payload, into: &pcm)
                allPCM += pcm
                audioPackets += 1
            } else if videoSSRCs.contains(p.ssrc) && p.payloadType == video.codec.payloadType, let frameBytes = try assembler.add(p) {
                if try vp8Decoder.decode(frameBytes[...], into: &decodedFrame) {
                    videoFrames += 1
                    var sum = 0
                    for row in 0..<decodedFrame.height { for col in 0..<decodedFrame.width { sum += Int(decodedFrame.y[row * decodedFrame.strideY + col]) } }
                    lastMeanY = Double(sum) / Double(decodedFrame.width * decodedFrame.height)
                }
            }
        }
        let tail = allPCM.suffix(48_000)
        var crossings = 0
        for (a, b) in zip(tail, tail.dropFirst()) where a < 0 && b >= 0 { crossings += 1 }
        let ourHz = tail.isEmpty ? 0 : Double(crossings) * 48_000 / Double(tail.count)

        print("MEDIA_INTEROP we decoded: \(videoFrames) VP8 frames (mean Y \(lastMeanY)), \(audioPackets) Opus packets (\(ourHz) Hz); aiortc decoded: \(report)")
        XCTAssertGreaterThan(videoFrames, 10, "VP8 frames from aiortc we decoded")
        XCTAssertEqual(lastMeanY, 170, accuracy: 6, "aiortc's solid Y=170 video")
        XCTAssertGreaterThan(audioPackets, 50)
        XCTAssertEqual(ourHz, 440, accuracy: 20, "aiortc's 440 Hz sine")
        XCTAssertGreaterThan(report["videoFrames"] as? Int ?? 0, 10, "our VP8 frames aiortc decoded")
        XCTAssertEqual(report["videoMeanY"] as? Double ?? -1, 60, accuracy: 6, "our solid Y=60 video")
        XCTAssertGreaterThan(report["audioFrames"] as? Int ?? 0, 40)
        XCTAssertEqual(report["audioHz"] as? Double ?? 0, 1000, accuracy: 40, "our 1000 Hz sine")
    }
}
