import XCTest
@testable import OTMedia
import OTWire

final class VP8CodecTests: XCTestCase {
    struct Encoded { var data: [UInt8]; var key: Bool; var layer: TemporalLayerInfo?; var nonReference: Bool }

    func encodeAll(_ enc: VP8Encoder, frames: Range<Int>, width: Int, height: Int, forceKeyAt: Set<Int> = []) throws -> [(Int, Encoded)] {
        var out: [(Int, Encoded)] = []
        for t in frames {
            try enc.encode(movingPicture(width: width, height: height, t: t), forceKeyframe: forceKeyAt.contains(t)) { e in
                out.append((t, Encoded(data: Array(e.data), key: e.isKeyframe, layer: e.layer, nonReference: e.nonReference)))
            }
        }
        return out
    }

    /// Threshold: 30 dB luma PSNR at 320×240 and 800 kbit/s (a synthetic gradient codes well above it).
    func testMovingPictureDecodesAbovePSNRThreshold() throws {
        let enc = try VP8Encoder(config: VideoEncoderConfig(width: 320, height: 240, bitrateKbps: 800, frameDropThreshold: 0))
        XCTAssertEqual(enc.config.effectiveThreads, 1)
        let dec = try VP8Decoder()
        let frames = try encodeAll(enc, frames: 0..<30, width: 320, height: 240)
        XCTAssertEqual(frames.count, 30)
        XCTAssertTrue(frames[0].1.key)
        XCTAssertFalse(frames[1...].contains { $0.1.key }, "no unrequested keyframes")
        var out = VideoFrame(width: 1, height: 1)
        var worst = 99.0
        for (t, e) in frames {
            XCTAssertTrue(try dec.decode(e.data[...], into: &out))
            XCTAssertEqual(out.width, 320); XCTAssertEqual(out.height, 240)
            worst = min(worst, lumaPSNR(movingPicture(width: 320, height: 240, t: t), out))
        }
        XCTAssertGreaterThan(worst, 30, "worst luma PSNR \(worst) dB")
    }

    func testDecoderLendsPlanesWithoutCopy() throws {
        let enc = try VP8Encoder(config: VideoEncoderConfig(width: 176, height: 144, bitrateKbps: 600, frameDropThreshold: 0))
        let dec = try VP8Decoder()
        let frames = try encodeAll(enc, frames: 0..<3, width: 176, height: 144)
        for (t, e) in frames {
            var lent = 0
            try dec.decode(e.data[...]) { view in
                lent += 1
                XCTAssertEqual(view.width, 176); XCTAssertEqual(view.height, 144)
                XCTAssertGreaterThanOrEqual(view.strideY, 176)
                var owned = VideoFrame(width: 1, height: 1)
                try view.copy(into: &owned)
                XCTAssertGreaterThan(lumaPSNR(movingPicture(width: 176, height: 144, t: t), owned), 30)
            }
            XCTAssertEqual(lent, 1)
        }
    }

    func testForcedAndRequestedKeyframes() throws {
        let enc = try VP8Encoder(config: VideoEncoderConfig(width: 160, height: 120, frameDropThreshold: 0))
        var keys: [Int] = []
        for t in 0..<12 {
            if t == 8 { enc.requestKeyframe() }
            try enc.encode(movingPicture(width: 160, height: 120, t: t), forceKeyframe: t == 4) { if $0.isKeyframe { keys.append(t) } }
        }
        XCTAssertEqual(keys, [0, 4, 8])
    }

    func testRuntimeBitrateChangeChangesOutputSize() throws {
        let enc = try VP8Encoder(config: VideoEncoderConfig(width: 320, height: 240, bitrateKbps: 1500, frameDropThreshold: 0))
        let high = try encodeAll(enc, frames: 0..<40, width: 320, height: 240)[20...].reduce(0) { $0 + $1.1.data.count }
        try enc.setRates(bitrateKbps: 150, framerate: 15)
        XCTAssertEqual(enc.config.bitrateKbps, 150)
        let low = try encodeAll(enc, frames: 40..<80, width: 320, height: 240)[20...].reduce(0) { $0 + $1.1.data.count }
        XCTAssertGreaterThan(high, 3 * low, "1500 kbit/s: \(high) bytes, 150 kbit/s: \(low) bytes over 20 frames")
        XCTAssertThrowsError(try enc.setRates(bitrateKbps: 0))
    }

    func testTemporalLayersBaseLayerDecodesAlone() throws {
        for layers in [2, 3] {
            let enc = try VP8Encoder(config: VideoEncoderConfig(width: 320, height: 240, bitrateKbps: 800, temporalLayers: layers, frameDropThreshold: 0))
            let frames = try encodeAll(enc, frames: 0..<16, width: 320, height: 240)
            let ids = frames.map { Int($0.1.layer?.temporalLayer ?? 9) }
            XCTAssertEqual(Array(ids.prefix(8)), layers == 2 ? [0, 1, 0, 1, 0, 1, 0, 1] : [0, 2, 1, 2, 0, 2, 1, 2])
            XCTAssertTrue(frames.filter { $0.1.layer?.temporalLayer == UInt8(layers - 1) }.allSatisfy { $0.1.nonReference })
            // A forwarder that drops every upper-layer frame leaves a decodable base layer.
            let dec = try VP8Decoder()
            var out = VideoFrame(width: 1, height: 1)
            var decoded = 0
            for (t, e) in frames where e.layer?.temporalLayer == 0 {
                XCTAssertTrue(try dec.decode(e.data[...], into: &out))
                XCTAssertGreaterThan(lumaPSNR(movingPicture(width: 320, height: 240, t: t), out), 28)
                decoded += 1
            }
            XCTAssertEqual(decoded, 16 / (layers == 2 ? 2 : 4))
        }
    }

    func testInvalidInputsThrow() throws {
        XCTAssertThrowsError(try VP8Encoder(config: VideoEncoderConfig(width: 0, height: 10)))
        let enc = try VP8Encoder(config: VideoEncoderConfig(width: 64, height: 64))
        XCTAssertThrowsError(try enc.encode(VideoFrame(width: 32, height: 32)) { _ in })
        let dec = try VP8Decoder()
        var out = VideoFrame(width: 1, height: 1)
        XCTAssertThrowsError(try dec.decode([UInt8]()[...], into: &out))
        XCTAssertThrowsError(try dec.decode([0x10, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00][...], into: &out),
                             "a keyframe header without the start code is rejected")
    }
}
