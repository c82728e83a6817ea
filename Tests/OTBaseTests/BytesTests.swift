import OTBase
import XCTest

final class BytesTests: XCTestCase {
    func testRoundTripBigEndian() throws {
        var w = ByteWriter()
        w.u8(0xAB); w.u16(0x1234); w.u24(0x56789A); w.u32(0xDEADBEEF); w.u64(0x0102030405060708)
        XCTAssertEqual(w.bytes.prefix(3), [0xAB, 0x12, 0x34])
        var r = ByteReader(w.bytes)
        XCTAssertEqual(try r.u8(), 0xAB)
        XCTAssertEqual(try r.u16(), 0x1234)
        XCTAssertEqual(try r.u24(), 0x56789A)
        XCTAssertEqual(try r.u32(), 0xDEADBEEF)
        XCTAssertEqual(try r.u64(), 0x0102030405060708)
        XCTAssertEqual(r.remaining, 0)
    }

    func testTruncationThrowsWithPosition() {
        var r = ByteReader([0x01, 0x02, 0x03])
        XCTAssertNoThrow(try r.u16())
        XCTAssertThrowsError(try r.u16("length")) { e in
            XCTAssertTrue("\(e)".contains("truncated length"), "\(e)")
        }
        XCTAssertEqual(r.remaining, 1, "a failed read consumes nothing")
    }

    func testSetFieldsLater() {
        var w = ByteWriter()
        w.u16(0); w.u32(0)
        w.set16(at: 0, 0xBEEF); w.set32(at: 2, 0x01020304)
        XCTAssertEqual(w.bytes, [0xBE, 0xEF, 1, 2, 3, 4])
    }

    func testDurationMicroseconds() {
        XCTAssertEqual(Duration.milliseconds(1500).microseconds, 1_500_000)
        XCTAssertEqual((Instant(micros: 10) + .microseconds(5)).micros, 15)
        XCTAssertEqual((Instant(micros: 10) - Instant(micros: 4)).microseconds, 6)
    }
}
