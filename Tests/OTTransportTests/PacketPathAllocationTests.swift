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
        let now = env.clock.now()
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
        // Warm: the NACK and statistics windows have filled, the event queue has grown to its size.
        let warm = datagrams(2048), batch = datagrams(1000)
        XCTAssertEqual(batch.count, 1000)
        let receivePath = receiveAllocations(b, warm: warm, batch: batch, from: now, step: .microseconds(500)) { e in
            if case .rtp = e { rtp += 1 }
        }
        XCTAssertEqual(rtp, 3048, "every packet handed up")
        XCTAssertEqual(receivePath, 0, "allocations in 1000 packets received")
    }

    /// Allocations on this thread while `pc` receives `batch`, after `warm` (not counted: queues and windows grow to their
    /// size), one datagram every `step` from `now`, each one's events handed to `event` and its transmits dropped.
    private func receiveAllocations(_ pc: PeerConnection, warm: [ICETransmit], batch: [ICETransmit], from now: Instant,
                                    step: Duration, event: (PeerConnectionEvent) -> Void) -> UInt64 {
        var now = now
        func receive(_ t: ICETransmit) {
            pc.handleReceive(t.bytes, from: t.source, local: t.destination, now: now)
            now = now + step
            while let e = pc.pollEvent() { event(e) }
            while pc.pollTransmit() != nil {}
        }
        for t in warm { receive(t) }
        // Indexed loops: an iterator allocates in unoptimized builds.
        var k = 0
        return ThreadAllocations.during { while k < batch.count { receive(batch[k]); k += 1 } }
    }

    /// A connected peer connection's RTCP receive path (SRTCP unprotect, `RTCP.parseCompound`, the RTP session's
    /// handling of each packet, FEC protection and bandwidth estimation from transport-cc, the events) over a steady
    /// stream of typical compounds, in turn: SR + SDES, RR + REMB + transport-cc feedback (20 packets), a NACK alone
    /// (RFC 5506), RR + XR (RRTR). The connection is set up as a router's subscriber connection (no send history of its
    /// own: a NACK comes up as `.retransmissionsRequested`; resending is the send path's, counted per packet sent).
    ///
    /// Not 0, and bounded here by what it measured: 17.25 allocations per datagram in this unoptimized test build (14,
    /// 35, 7 and 13 for the four kinds; SRTCP unprotect, OpenSSL's AES-GCM, allocates none). The datagram is decrypted in the connection's
    /// reused buffer (a copy on write before). What stays are the values the parsed packets hold, because the events
    /// hand them on and RTCP is a few percent of the packets: the compound's `[RTCPPacket]`, the report blocks, the SDES
    /// chunk list, its items and a 16-byte CNAME (longer than a small string), REMB's raw payload (`.other`),
    /// transport-cc's status symbols and deltas, the NACK list and the sequence numbers to resend, the XR's block list;
    /// and, in this build only, the iterators of `for ... in` over arrays (one allocation per element unoptimized: the
    /// per-packet loops of `RTPSession.handleRTCP` and `XRRoundTrip`, and most of the transport-cc kind's, over its
    /// 20 deltas in `TransportFeedbackLoss.add` and the estimator).
    func testPeerConnectionRTCPReceivePathAllocatesOnlyWhatItsPacketsHold() throws {
        let env = EmulatedPeerConnections(seed: 902, conditions: LinkConditions(delay: .milliseconds(1)))
        var ca = peerConfig(audioSSRC: nil, videoSSRC: 0xA2, seed: 902), cb = peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 903)
        ca.srtpProfiles = [.aeadAes128Gcm]
        cb.srtpProfiles = [.aeadAes128Gcm]
        ca.sendHistory = false
        let (a, b) = try env.connectedPair(ca, cb)
        let now = env.clock.now()
        // A has sent a history's worth of packets, which B's NACKs name.
        for seq in 0..<UInt16(1024) {
            var p = testRTP(ssrc: 0xA2, seq: seq, ts: UInt32(seq) * 3000, payload: [7, 7, 7])
            XCTAssertTrue(a.sendRTP(&p, now: now))
        }
        while a.pollTransmit() != nil {}
        let block = RTCPReportBlock(ssrc: 0xA2, fractionLost: 2, cumulativeLost: 10, extendedHighestSequence: 1023, jitter: 30)
        let remb: [UInt8] = [0, 0, 0, 0xB1, 0, 0, 0, 0] + Array("REMB".utf8) + [1, 0x0C, 0x35, 0x00, 0, 0, 0, 0xA2]
        var k = 0
        /// B's next compounds, protected, as A's socket would hand them over: the four kinds in turn, each NACK naming two
        /// packets not NACKed before, each feedback the next 20 packets A sent.
        func datagrams(_ n: Int) -> [ICETransmit] {
            var out: [ICETransmit] = []
            for _ in 0..<n {
                let round = UInt16(truncatingIfNeeded: k / 4)
                let compound: [RTCPPacket]
                switch k % 4 {
                case 0:
                    compound = [.senderReport(RTCPSenderReport(ssrc: 0xB1, ntpTime: 0xE000_0000_8000_0000, rtpTime: 9000, packetCount: 100,
                                                               octetCount: 100_000, reports: [block])),
                                .sourceDescription([RTCPSDESChunk(ssrc: 0xB1, items: [(1, "4Xc9hT0pLq2mZs8a")])])]
                case 1:
                    let feedback = TransportCCFeedback(senderSSRC: 0xB1, mediaSSRC: 0xA2, baseSequence: round % 50 * 20 + 1, referenceTime: Int32(round),
                                                       feedbackCount: UInt8(truncatingIfNeeded: round), deltas: (0..<20).map { $0 == 7 ? nil : Int32(4 + $0 % 3) })
                    compound = [.receiverReport(ssrc: 0xB1, reports: [block]), .other(packetType: RTCP.psfbType, count: 15, payload: remb),
                                .transportCC(feedback)]
                case 2:
                    compound = [.nack(senderSSRC: 0xB1, mediaSSRC: 0xA2, lost: [round * 3 % 1024, (round * 3 + 2) % 1024])]
                default:
                    compound = [.receiverReport(ssrc: 0xB1, reports: [block]),
                                .extendedReport(senderSSRC: 0xB1, blocks: [.receiverReferenceTime(ntp: 0xE000_0001_0000_0000 + UInt64(round) << 16)])]
                }
                k += 1
                XCTAssertTrue(b.sendRTCP(RTCP.serialize(compound)))
                while let t = b.pollTransmit() { if DemuxKind.classify(t.bytes) == .rtcp { out.append(t) } }
            }
            return out
        }
        var requested = 0
        // Warm: the event queues and the estimator's windows have grown to their size.
        let warm = datagrams(400), batch = datagrams(1000)
        XCTAssertEqual(batch.count, 1000)
        let received = a.stats.rtcpReceived
        let receivePath = receiveAllocations(a, warm: warm, batch: batch, from: now, step: .milliseconds(5)) { e in
            if case .retransmissionsRequested = e { requested += 1 }
        }
        XCTAssertEqual(a.stats.rtcpReceived - received, 1400)
        XCTAssertEqual(requested, 350, "every NACK handled")
        XCTAssertEqual(a.stats.rtcpPacketsSkipped, 0, "every packet parsed")
        XCTAssertLessThanOrEqual(receivePath, 17_250, "allocations in 1000 RTCP datagrams received")
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
