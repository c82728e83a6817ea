import OTBase
import OTWire
@testable import OTTransport
import XCTest

/// Transport-wide congestion control through two real `PeerConnection`s (ICE, DTLS, SRTP, RTCP) on the seeded
/// emulator with a bottleneck: the receiver sends feedback by itself, the sender's estimator follows the link.
final class PeerConnectionCongestionTests: XCTestCase {
    /// An RTP packet with a one-byte-form transport-wide sequence number element (value 0: the connection numbers it).
    private func rtp(ssrc: UInt32, seq: UInt16, ts: UInt32, payloadBytes: Int) -> [UInt8] {
        var w = ByteWriter()
        w.u8(0x90); w.u8(96); w.u16(seq); w.u32(ts); w.u32(ssrc)
        w.u16(0xBEDE); w.u16(1)
        w.u8(SDPNegotiation.transportCCExtensionId << 4 | 1); w.u16(0); w.u8(0)
        w.append([UInt8](repeating: 0xAB, count: payloadBytes))
        return w.bytes
    }

    func testEstimateFollowsABottleneckBetweenTwoPeerConnections() throws {
        var conditions = LinkConditions(delay: .milliseconds(20))
        conditions.rateBitsPerSecond = 1_000_000
        let env = EmulatedPeerConnections(seed: 31, conditions: conditions)
        var sendConfig = peerConfig(audioSSRC: nil, videoSSRC: 0x51, seed: 31)
        // Every packet counted below is one that was on the wire (FEC, which the queue's losses would switch on, rebuilds
        // packets whose transport-wide value is not meaningful).
        sendConfig.videoFEC = false
        sendConfig.bandwidthEstimation = BandwidthEstimatorConfig(startBitrateBps: 2_500_000, minBitrateBps: 100_000, maxBitrateBps: 4_000_000)
        let (a, b) = try env.connectedPair(sendConfig, peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 32))

        // 20 s of 30 fps "video" at the estimate, frames sent as bursts of packets.
        var seq: UInt16 = 100
        var targets: [Int] = []
        var twccSeen: [UInt16] = []
        for frame in 0..<600 {
            let target = a.bandwidthEstimate?.targetBitrateBps ?? 2_500_000
            targets.append(target)
            let bytes = target / 8 / 30
            let count = (bytes + 1099) / 1100
            for _ in 0..<count {
                var p = rtp(ssrc: 0x51, seq: seq, ts: UInt32(frame) * 3000, payloadBytes: bytes / count)
                a.sendRTP(&p, now: env.clock.now())
                seq &+= 1
            }
            env.run(for: .microseconds(33_333))
            for p in env.takeRTP(1) {
                guard let at = TransportWideSequenceNumber.valueOffset(in: p, id: SDPNegotiation.transportCCExtensionId) else {
                    XCTFail("the extension arrived"); continue
                }
                twccSeen.append(UInt16(p[at]) << 8 | UInt16(p[at + 1]))
            }
        }
        let trace = stride(from: 0, to: targets.count, by: 15).map { targets[$0] / 1000 }
        // Every packet on the wire, retransmissions included, got its own number from the sending connection.
        XCTAssertEqual(Set(twccSeen).count, twccSeen.count, "transport-wide numbers are not reused")
        XCTAssertEqual(twccSeen.min(), 1)
        let numbered = a.stats.packetsSent + a.stats.retransmissionsSent
        XCTAssertLessThanOrEqual(Int(twccSeen.max() ?? 0), numbered)
        XCTAssertGreaterThan(Int(twccSeen.max() ?? 0), numbered - 20, "only the last few were still in flight")
        XCTAssertGreaterThan(b.stats.transportFeedbackSent, 200, "the receiver sends feedback on its own (every 50 ms)")
        XCTAssertGreaterThan(a.stats.transportFeedbackReceived, 200)
        let estimate = try XCTUnwrap(a.bandwidthEstimate)
        let last5s = targets.suffix(150)
        XCTAssertLessThan(last5s.max() ?? .max, 1_150_000, "the estimate settled under the 1 Mbit/s bottleneck: \(trace)")
        XCTAssertGreaterThan(last5s.min() ?? 0, 500_000, "and keeps using it: \(trace)")
        XCTAssertEqual(a.stats.availableOutgoingBitrate, estimate.targetBitrateBps)
        XCTAssertEqual(a.stats.bandwidthUsage, estimate.usage)
        XCTAssertTrue(env.events[0].contains { if case .bandwidthEstimate(let e) = $0 { e.usage == .overusing } else { false } },
                      "the 2.5 Mbit/s start was detected as over-use")
        XCTAssertTrue(env.events[0].contains { if case .bandwidthEstimate = $0 { true } else { false } })
        XCTAssertLessThan(env.net.queueDelay(from: TransportAddress("10.0.0.1:5000")!.ip, now: env.clock.now()), .milliseconds(200))
    }
}
