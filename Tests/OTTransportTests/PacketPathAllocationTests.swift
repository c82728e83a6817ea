#if canImport(Glibc)
import Glibc
#endif
import OTBase
import OTRTP
import OTTestSupport
import OTWire
@testable import OTTransport
import Synchronization
import XCTest

/// The per-packet paths allocate nothing of their own once warm: the RTP session's send chain (counters, the packet into
/// the NACK history) and receive chain (statistics, NACK generator, transport-wide recorder) and the deadline asked
/// after every packet; a peer connection's receive path; the UDP driver's receive loop. Counted exactly on the thread
/// that runs them.
final class PacketPathAllocationTests: XCTestCase {
    func testRTPSessionAllocatesNothingPerPacketSentOrReceived() {
        // With its own send history, and without (a router's subscriber connection: sequence numbers only).
        for sendHistory in [true, false] { rtpSessionAllocations(sendHistory: sendHistory) }
    }

    private func rtpSessionAllocations(sendHistory: Bool) {
        var config = RTPSession.Config(localSSRCs: [0x1111], cname: "a")
        config.sendHistory = sendHistory
        let session = RTPSession(config: config, now: .zero)
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
        XCTAssertEqual(allocations, 0, "allocations in 5000 packets sent and received (sendHistory \(sendHistory))")
        XCTAssertEqual(session.statistics(ssrc: 0x2222)?.packetsReceived, 7048)
        XCTAssertEqual(session.transportPacketsReceived, 7048)
    }

    /// A connected peer connection's receive path (SRTP unprotect, header parse, the RTP session's receive chain, the
    /// `.rtp` event) allocates nothing per packet: the datagram is decrypted in a reused buffer, not copied on write,
    /// and libsrtp's AES-GCM is OpenSSL's, keyed once per connection (NSS allocated five times per packet).
    func testPeerConnectionReceivePathAllocatesNothingPerPacket() throws {
        let env = EmulatedPeerConnections(seed: 900, conditions: LinkConditions(delay: .milliseconds(1)))
        let start = env.clock.now()
        var ca = peerConfig(audioSSRC: nil, videoSSRC: 0xA2, seed: 900), cb = peerConfig(audioSSRC: nil, videoSSRC: 0xB2, seed: 901)
        // The uplink of a router (no FEC), with the SRTP profile our peers prefer.
        ca.videoFEC = false
        cb.videoFEC = false
        ca.srtpProfiles = [.aeadAes128Gcm]
        cb.srtpProfiles = [.aeadAes128Gcm]
        let a = try PeerConnection(config: ca, now: start), b = try PeerConnection(config: cb, now: start)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer(), now: start), now: start)
        XCTAssertTrue(env.run(for: .seconds(30)) { env.connected(0) && env.connected(1) })
        var seq: UInt16 = 0
        var now = env.clock.now()
        /// A's next packets, protected, as B's socket would hand them over.
        func datagrams(_ n: Int) -> [ICETransmit] {
            var out: [ICETransmit] = []
            for _ in 0..<n {
                var p = testRTP(ssrc: 0xA2, seq: seq, ts: UInt32(seq) * 3000, payload: Array(repeating: 7, count: 1100))
                XCTAssertTrue(a.sendRTP(&p, now: now))
                seq &+= 1
                while let t = a.pollTransmit() { if DemuxKind.classify(t.bytes) == .rtp { out.append(t) } }
            }
            return out
        }
        var rtp = 0
        func receive(_ t: ICETransmit) {
            b.handleReceive(t.bytes, from: t.source, local: t.destination, now: now)
            now = now + .microseconds(500)
            while let e = b.pollEvent() { if case .rtp = e { rtp += 1 } }
            while b.pollTransmit() != nil {}
        }
        // Warm: the NACK and statistics windows have filled, the event queue has grown to its size.
        for t in datagrams(2048) { receive(t) }
        let batch = datagrams(1000)
        XCTAssertEqual(batch.count, 1000)
        rtp = 0
        // Indexed loops: an iterator allocates in unoptimized builds.
        var k = 0
        let receivePath = ThreadAllocations.during { while k < batch.count { receive(batch[k]); k += 1 } }
        XCTAssertEqual(rtp, 1000, "every packet handed up")
        XCTAssertEqual(receivePath, 0, "allocations in 1000 packets received")
    }

    /// The UDP driver's IO thread hands datagrams to its handler without allocating: `recvmmsg` into the batch, each
    /// datagram into one reused buffer, the poll loop. Counted on the IO thread itself, from the handler.
    func testUDPDriverReceiveLoopAllocatesNothingPerDatagram() throws {
        let total = 400
        let seen = Mutex<[UInt64]>([])
        seen.withLock { $0.reserveCapacity(total) }
        let driver = try UDPDriver { e in
            if case .datagram(let bytes, _, _, _) = e, bytes.count == 1100 { seen.withLock { $0.append(ThreadAllocations.count) } }
        }
        let local = try driver.bind(TransportAddress(ip: .v4(0x7F00_0001), port: 0))
        driver.start()
        defer { driver.stop() }
        // The sender's socket, on a driver whose IO thread is not started (its `send` is a plain `sendto`).
        let sender = try UDPDriver { _ in }
        let from = try sender.bind(TransportAddress(ip: .v4(0x7F00_0001), port: 0))
        let payload = [UInt8](repeating: 0x80, count: 1100)
        for i in 0..<total {
            XCTAssertTrue(sender.send(payload, from: from, to: local))
            // Some datagrams alone, some in bursts: single wake-ups and batches.
            if i % 8 == 0 { usleep(1000) }
        }
        let deadline = MonotonicClock.now() + .seconds(20)
        while seen.withLock({ $0.count }) < total && MonotonicClock.now() < deadline { usleep(10_000) }
        let counts = seen.withLock { $0 }
        XCTAssertEqual(counts.count, total, "every datagram handed over")
        guard counts.count == total else { return }
        // The first ones warm the buffers up; from then on the count does not move.
        XCTAssertEqual(counts[total - 1] - counts[100], 0, "allocations on the IO thread over \(total - 101) datagrams")
    }
}
