import OTBase
@testable import OTMedia
import OTWire
import XCTest

/// The codec seam: encoders and decoders made for a payload format and used only through their protocols.
final class VideoCodecTests: XCTestCase {
    func testEncoderAndDecoderMadeForAFormatCarryAPictureThroughTheProtocols() throws {
        let encoder: any VideoEncoder = try VideoCodecs.makeEncoder(PayloadFormats.vp8, config: VideoEncoderConfig(width: 320, height: 240))
        let decoder: any VideoDecoder = try VideoCodecs.makeDecoder(PayloadFormats.vp8)
        XCTAssertEqual(encoder.format.name, "VP8")
        XCTAssertEqual(decoder.format.name, "VP8")
        let source = try TestPatternSource(width: 320, height: 240)
        var picture = VideoFrame(width: 2, height: 2)
        var read: [UInt32] = []
        for k in 0..<3 {
            try encoder.encode(source.render(frameNumber: UInt32(k), timestampMicros: Int64(k) * 33_333), forceKeyframe: false) { f in
                XCTAssertEqual(f.isKeyframe, k == 0)
                XCTAssertEqual(PayloadFormats.vp8.isKeyframeStart([0x10] + Array(f.data)[...]), k == 0, "the format reads the codec's frames")
                let bytes = Array(f.data)
                XCTAssertTrue(try decoder.decode(bytes[...], into: &picture))
                if let n = TestPatternReader.read(picture)?.frameNumber { read.append(n) }
            }
        }
        XCTAssertEqual(read, [0, 1, 2])
        XCTAssertEqual(picture.width, 320)
    }

    func testAFormatWithoutACodecIsAClearError() {
        XCTAssertThrowsError(try VideoCodecs.makeEncoder(PayloadFormats.opus, config: VideoEncoderConfig(width: 320, height: 240)))
        XCTAssertThrowsError(try VideoCodecs.makeDecoder(PayloadFormats.opus))
        XCTAssertThrowsError(try VideoSendPipeline(config: VideoSendConfig(ssrc: 1, format: PayloadFormats.opus,
                                                                          encoder: VideoEncoderConfig(width: 320, height: 240))))
    }
}
