import XCTest
@testable import OTMedia
import OTWire

/// VP9 on libvpx through the codec seam: encoder, RTP payload format and decoder together.
final class VP9CodecTests: XCTestCase {
    /// Threshold: 30 dB luma PSNR at 320×240 and 800 kbit/s, every frame through the VP9 packetizer and depacketizer.
    func testMovingPictureThroughRTPDecodesAbovePSNRThreshold() throws {
        let enc = try VideoCodecs.makeEncoder(PayloadFormats.vp9, config: VideoEncoderConfig(width: 320, height: 240, bitrateKbps: 800,
                                                                                               frameDropThreshold: 0))
        XCTAssertTrue(enc is VP9Encoder)
        XCTAssertEqual(LibvpxCodec.vp9.defaultCPUUsed(width: 320, height: 240), 5)
        XCTAssertEqual(LibvpxCodec.vp9.defaultCPUUsed(width: 640, height: 480), 7)
        let dec = try VideoCodecs.makeDecoder(PayloadFormats.vp9)
        XCTAssertEqual(dec.format.name, "VP9")
        var packetizer = PayloadFormats.vp9.makePacketizer(maxPayloadSize: 1100)
        var depacketizer = PayloadFormats.vp9.makeDepacketizer(reorderWindow: 16)
        var seq: UInt16 = 1
        var decoded = 0, keyframes = 0, worst = 99.0
        var out = VideoFrame(width: 1, height: 1)
        for t in 0..<30 {
            let picture = movingPicture(width: 320, height: 240, t: t)
            var packets: [RTPPacket] = []
            try enc.encode(picture, forceKeyframe: t == 20) { e in
                if e.isKeyframe {
                    keyframes += 1
                    // The uncompressed header within E2EE's clear prefix tells the size.
                    let prefix = Array(UnsafeRawBufferPointer(rebasing: e.data.prefix(PayloadFormats.vp9.clearPrefixLength(isKeyframe: true))))
                    XCTAssertEqual(VP9FrameHeader.keyframeSize(prefix[...])?.width, 320)
                }
                packetizer.packetize(e.data) { payload, last in
                    packets.append(RTPPacket(marker: last, payloadType: 98, sequenceNumber: seq, timestamp: UInt32(t * 3000), ssrc: 1,
                                             payload: Array(payload)[...]))
                    seq &+= 1
                }
            }
            var frames: [[UInt8]] = []
            for p in packets {
                depacketizer.insert(p) { event in
                    guard case .frame(let f) = event else { return XCTFail("keyframe request \(event)") }
                    if f.isKeyframe { XCTAssertEqual(f.keyframeSize?.width, 320); XCTAssertEqual(f.keyframeSize?.height, 240) }
                    frames.append(Array(f.data))
                }
            }
            for f in frames {
                XCTAssertTrue(try dec.decode(f[...], into: &out))
                XCTAssertEqual(out.width, 320); XCTAssertEqual(out.height, 240)
                worst = min(worst, lumaPSNR(picture, out))
                decoded += 1
            }
        }
        XCTAssertEqual(decoded, 30)
        XCTAssertEqual(keyframes, 2, "the first frame and the forced one")
        XCTAssertGreaterThan(worst, 30, "worst luma PSNR \(worst) dB")
    }

    func testRequestedKeyframeAndRateChange() throws {
        let enc = try VP9Encoder(config: VideoEncoderConfig(width: 160, height: 120, frameDropThreshold: 0))
        var keys: [Int] = []
        for t in 0..<10 {
            if t == 6 { enc.requestKeyframe() }
            if t == 3 { try enc.setRates(bitrateKbps: 300, framerate: 15) }
            try enc.encode(movingPicture(width: 160, height: 120, t: t), forceKeyframe: false) { if $0.isKeyframe { keys.append(t) } }
        }
        XCTAssertEqual(keys, [0, 6])
        XCTAssertThrowsError(try VP9Encoder(config: VideoEncoderConfig(width: 160, height: 120, temporalLayers: 2)),
                             "VP9 here has one temporal layer")
    }

    func testDecoderRejectsGarbage() throws {
        let dec = try VP9Decoder()
        var out = VideoFrame(width: 1, height: 1)
        XCTAssertThrowsError(try dec.decode([0x82, 0x49, 0x83, 0x42, 0x00, 0x13][...], into: &out))
    }
}
