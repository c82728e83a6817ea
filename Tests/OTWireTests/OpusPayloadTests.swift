import XCTest
@testable import OTWire

final class OpusPayloadTests: XCTestCase {
    func testTOCDescribesDurationModeAndChannels() throws {
        // config 1 (SILK NB 20 ms), mono, code 0.
        var i = try OpusPayload.packetInfo([0x08, 0xAA][...])
        XCTAssertEqual(i.mode, .silk); XCTAssertEqual(i.samples, 960); XCTAssertFalse(i.stereo)
        // config 31 (CELT FB 20 ms), stereo, code 1 (two equal frames).
        i = try OpusPayload.packetInfo([31 << 3 | 0x04 | 1, 1, 2][...])
        XCTAssertEqual(i.mode, .celt); XCTAssertTrue(i.stereo); XCTAssertEqual(i.frameCount, 2); XCTAssertEqual(i.samples, 1920)
        // config 13 (hybrid FB? 20 ms), code 3 with 3 frames.
        i = try OpusPayload.packetInfo([13 << 3 | 3, 3, 0, 0][...])
        XCTAssertEqual(i.mode, .hybrid); XCTAssertEqual(i.samples, 3 * 960)
    }

    func testImpossiblePacketsThrow() {
        XCTAssertThrowsError(try OpusPayload.packetInfo([][...]))
        XCTAssertThrowsError(try OpusPayload.packetInfo([0x08 | 1, 1][...]), "code 1 with odd data length")
        XCTAssertThrowsError(try OpusPayload.packetInfo([0x08 | 3][...]), "code 3 without count")
        XCTAssertThrowsError(try OpusPayload.packetInfo([0x08 | 3, 0][...]), "zero frames")
        XCTAssertThrowsError(try OpusPayload.packetInfo([3 << 3 | 3, 3][...]), "3 × 60 ms > 120 ms")
        XCTAssertTrue(OpusPayload.isDTX([0x08][...]))
    }
}
