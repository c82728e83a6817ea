import OTBase
import OTRTP
import OTTestSupport
import OTWire
@testable import OTTransport
import XCTest

/// The RTP session's per-packet path allocates nothing once warm: its send chain (counters, the packet into the NACK
/// history) and its receive chain (statistics, NACK generator, transport-wide recorder), and the deadline asked
/// after every packet. Counted exactly on the test's thread.
final class PacketPathAllocationTests: XCTestCase {
    func testRTPSessionAllocatesNothingPerPacketSentOrReceived() {
        let session = RTPSession(config: .init(localSSRCs: [0x1111], cname: "a"), now: .zero)
        let packet = testRTP(ssrc: 0x1111, seq: 0, ts: 0, payload: Array(repeating: 7, count: 1100))
        var seq: UInt16 = 0
        var now = Instant(micros: 1_000_000)
        func step() {
            session.sent(ssrc: 0x1111, sequence: seq, rtpTimestamp: UInt32(seq) * 3000, clockRate: 90000, payloadBytes: 1100, packet: packet, now: now)
            session.received(ssrc: 0x2222, sequence: seq, rtpTimestamp: UInt32(seq) * 3000, clockRate: 90000, now: now)
            session.receivedTransportSequence(seq, ssrc: 0x2222, now: now)
            _ = session.pollTimeout()
            seq &+= 1
            now = now + .microseconds(500)
        }
        // Warm: every history slot has held a packet, the chains exist.
        for _ in 0..<2048 { step() }
        let allocations = ThreadAllocations.during { for _ in 0..<5000 { step() } }
        XCTAssertEqual(allocations, 0, "allocations in 5000 packets sent and received")
        XCTAssertEqual(session.statistics(ssrc: 0x2222)?.packetsReceived, 7048)
        XCTAssertEqual(session.transportPacketsReceived, 7048)
    }
}
