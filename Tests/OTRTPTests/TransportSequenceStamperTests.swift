import OTBase
import OTWire
@testable import OTRTP
import XCTest

final class TransportSequenceStamperTests: XCTestCase {
    private func packet(extensionId: UInt8?, value: UInt16 = 0xABCD) throws -> [UInt8] {
        let ext = try extensionId.map { try RTPHeaderExtensions([RTPHeaderExtensionElement(id: $0, value: TransportWideSequenceNumber.encode(value)[...])]) }
        return RTPPacket(payloadType: 96, sequenceNumber: 7, timestamp: 0, ssrc: 1, extensions: ext ?? RTPHeaderExtensions(),
                         payload: [1, 2, 3][...]).serialized()
    }

    /// Numbers go up by one per stamped packet, over what the packet carried; packets without the extension (or a
    /// connection that did not negotiate it) are left alone and use no number.
    func testStampsConsecutiveNumbersInPlaceOnlyWhereTheExtensionIs() throws {
        var s = TransportSequenceStamper(extensionId: 5, first: 65535)
        var a = try packet(extensionId: 5), b = try packet(extensionId: 3), c = try packet(extensionId: 5)
        let bBefore = b
        XCTAssertEqual(s.stamp(&a), 65535)
        XCTAssertNil(s.stamp(&b))
        XCTAssertEqual(s.stamp(&c), 0)
        XCTAssertEqual(b, bBefore)
        XCTAssertEqual(try RTPPacket(parsing: a).extensions.value(id: 5).map { try TransportWideSequenceNumber.decode($0) }, 65535)
        XCTAssertEqual(try RTPPacket(parsing: c).extensions.value(id: 5).map { try TransportWideSequenceNumber.decode($0) }, 0)
        XCTAssertEqual(Array(try RTPPacket(parsing: c).payload), [1, 2, 3])
        var off = TransportSequenceStamper()
        XCTAssertNil(off.stamp(&a))
        XCTAssertEqual(off.next, 1)
    }
}
