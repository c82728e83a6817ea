import OTBase
import OTRTP
import OTWire
@testable import OTTransport
import XCTest

/// Peer connections whose handshakes leave the receiver no round-trip sample: the first answer to a connectivity check
/// is lost (so the check that selects the pair was retransmitted: no ICE sample, Karn's rule) and so is the first
/// transmission of the receiver's first DTLS flight (no DTLS sample either). Before the RTT came from the selected ICE
/// pair, such a leg ran on the RTP session's 100 ms default until RTCP measured one, which a receive-only leg never
/// does. RTP from the sender can be dropped at random (`rtpLoss`) or by sequence number (`dropRTP`: how many times more
/// to drop it).
final class HandshakeLossEmulation: EmulatedPeerConnections {
    /// Peer 0 receives, peer 1 sends (its video SSRC 0xB2).
    var checkAnswersToDrop = 1
    var rtpLoss = 0.0
    var dropRTP: [UInt16: Int] = [:]
    /// When the sender received a NACK of each sequence number.
    var nackArrivals: [UInt16: [Instant]] = [:]
    private var rng = SeededRandom(seed: 77)
    /// When the receiver sent its first DTLS flight.
    private var firstDTLSAt: Instant?

    override func send(_ bytes: [UInt8], from: TransportAddress, to: TransportAddress, now: Instant) {
        let fromSender = peers.count > 1 && peers[1].addresses.contains(from)
        switch DemuxKind.classify(bytes) {
        case .stun where fromSender && checkAnswersToDrop > 0:
            if let m = try? STUNMessage.parse(bytes), m.messageClass == .success { checkAnswersToDrop -= 1; return }
        case .dtls where !fromSender:
            if firstDTLSAt == nil { firstDTLSAt = now }
            if firstDTLSAt == now { return }
        case .rtp where fromSender:
            let seq = UInt16(bytes[2]) << 8 | UInt16(bytes[3])
            if let n = dropRTP[seq], n > 0 { dropRTP[seq] = n - 1; return }
            if rng.unit() < rtpLoss { return }
        default: break
        }
        super.send(bytes, from: from, to: to, now: now)
    }

    override func observe(_ event: PeerConnectionEvent, of i: Int, now: Instant) {
        if i == 1, case .nackRequested(_, let seqs) = event { for s in seqs { nackArrivals[s, default: []].append(now) } }
    }

    /// The receiver (peer 0: full ICE, receive-only, the offer) and the sender (peer 1: a video track, ICE-lite as the
    /// router when `senderLite`, the answer), connected.
    func connect(senderLite: Bool, seed: UInt64) throws -> (receiver: PeerConnection, sender: PeerConnection) {
        let now = clock.now()
        let receiver = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: nil, seed: seed), now: now)
        let sender = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xB2, lite: senderLite, seed: seed + 1), now: now)
        add(receiver, "10.0.0.1:5000")
        add(sender, "10.0.0.2:6000")
        try receiver.setRemoteAnswer(try sender.createAnswer(toOffer: try receiver.createOffer(), now: now), now: now)
        guard run(for: .seconds(10), until: { connected(0) && connected(1) }) else { throw NotConnected(events: events) }
        return (receiver, sender)
    }

    private var frame = 0

    /// The sender sends `frames` more video frames of 3 packets, 33 ms apart (sequence numbers from 1 on, transport-wide
    /// numbers on).
    func sendVideo(_ sender: PeerConnection, frames: Int) throws {
        let twcc = try RTPHeaderExtensions([RTPHeaderExtensionElement(id: SDPNegotiation.transportCCExtensionId, value: [0, 0][...])])
        for _ in 0..<frames {
            for k in 0..<3 {
                var p = RTPPacket(marker: k == 2, payloadType: 96, sequenceNumber: UInt16(truncatingIfNeeded: frame * 3 + k + 1),
                                  timestamp: UInt32(frame) * 3000, ssrc: 0xB2, extensions: twcc,
                                  payload: Array(repeating: UInt8(truncatingIfNeeded: frame), count: 300)[...]).serialized()
                sender.sendRTP(&p, now: clock.now())
            }
            frame += 1
            run(for: .milliseconds(33))
        }
    }
}

/// The RTP session's round-trip time comes from the selected ICE pair before any media (docs/transport.md, "Loss").
final class PathRoundTripTests: XCTestCase {
    /// A receive-only leg (a subscriber) whose handshakes left no sample: its RTT is the ICE pair's (probed after
    /// selection), so a packet whose retransmission is lost too is NACKed again 1.25 RTT later, not after the 100 ms
    /// default's 125 ms.
    func testASubscriberLegsFirstNACKRetryFollowsTheICERoundTrip() throws {
        let env = HandshakeLossEmulation(seed: 23, conditions: LinkConditions(delay: .milliseconds(15)))
        let (receiver, sender) = try env.connect(senderLite: true, seed: 23)
        XCTAssertNil(receiver.transport?.dtls.roundTripTime, "premise: no DTLS sample")
        XCTAssertEqual(receiver.transport?.ice.selectedPairRoundTripTime, .milliseconds(30))
        XCTAssertEqual(receiver.rtpSession.rtt, .milliseconds(30))
        env.dropRTP = [20: 2]  // the packet and its first retransmission
        try env.sendVideo(sender, frames: 20)
        let arrivals = env.nackArrivals[20] ?? []
        XCTAssertGreaterThanOrEqual(arrivals.count, 2, "NACKed, and again after the lost retransmission")
        guard arrivals.count >= 2 else { return }
        XCTAssertEqual(arrivals[1] - arrivals[0], NACKGenerator.retryInterval(rtt: .milliseconds(30)), "1.25 × the ICE round trip")
        XCTAssertEqual(receiver.stats.nackRepaired, 1)
    }

    /// FEC (RED + ULPFEC) is decided on a round trip measured on the path (the ICE pair, or RTCP), never on the default
    /// or the DTLS handshake's estimate, which holds the peer's processing: 31–100 ms on loopback (the emulator's
    /// handshakes take no time, so the router here is given such an estimate). At 20 % loss: on a 0.2 ms path an
    /// ICE-lite router's downlink keeps it off (before, the estimate turned it on at the first decision, a second into
    /// the media); on a 40 ms path a full agent turns it on at its first decision, from its ICE round trip; a router
    /// measures its downlink only by RTCP, and turns it on after that.
    func testFECIsDecidedOnTheMeasuredPathRoundTrip() throws {
        for (lite, delay) in [(true, Duration.microseconds(100)), (false, .milliseconds(20)), (true, .milliseconds(20))] {
            let env = HandshakeLossEmulation(seed: 31, conditions: LinkConditions(delay: delay))
            let (_, sender) = try env.connect(senderLite: lite, seed: 31)
            let label = "lite \(lite), \(delay) each way"
            if lite {
                XCTAssertNil(sender.transport?.ice.selectedPairRoundTripTime, "an ICE-lite agent measures none")
                sender.rtpSession.setInitialRoundTripTime(.milliseconds(60))
            }
            env.rtpLoss = 0.2
            try env.sendVideo(sender, frames: 45)  // 1.5 s
            let early = sender.stats.fecPacketsSent
            try env.sendVideo(sender, frames: 75)  // 4 s
            switch (lite, delay > .milliseconds(1)) {
            case (_, false):
                XCTAssertEqual(sender.stats.fecPacketsSent, 0, label)
                XCTAssertNotNil(sender.stats.roundTripTime, "RTCP measured it: \(label)")
            case (false, true):
                XCTAssertGreaterThan(early, 0, "on at the first decision: \(label)")
            case (true, true):
                XCTAssertEqual(early, 0, "no measured round trip yet: \(label)")
                XCTAssertNotNil(sender.stats.roundTripTime, label)
                XCTAssertGreaterThan(sender.stats.fecPacketsSent, 0, "on once RTCP measured it: \(label)")
            }
        }
    }
}
