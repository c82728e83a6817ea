import OTBase
import OTWire
@testable import OTTransport
import XCTest

/// RFC 7675 consent freshness through `PeerConnection` on the seeded emulator: once consent for the selected pair
/// expires nothing but STUN goes to the peer, and sending resumes when an ICE restart selects a pair again.
final class ConsentTests: XCTestCase {
    func rtp(_ ssrc: UInt32, _ seq: Int) -> [UInt8] {
        RTPPacket(payloadType: 96, sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 3000), ssrc: ssrc, payload: [1, 2, 3, 4][...]).serialized()
    }

    /// Application data (anything but STUN) peer `i` put on the wire at or after `t`.
    func appData(_ env: EmulatedPeerConnections, _ i: Int, since t: Instant) -> [Instant] {
        env.wire.filter { $0.peer == i && $0.kind != .stun && $0.at >= t }.map(\.at)
    }

    func testExpiredConsentStopsSendingAndARestartResumesIt() throws {
        let env = EmulatedPeerConnections(seed: 700, conditions: LinkConditions(delay: .milliseconds(20), jitter: .milliseconds(4)))
        env.logWire = true
        let now = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xA7, seed: 700), now: now)
        let b = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xB7, seed: 701), now: now)
        let addrA = TransportAddress("10.0.0.1:5000")!, addrB = TransportAddress("10.0.0.2:6000")!
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer(now: now), now: now), now: now)
        XCTAssertTrue(env.run(for: .seconds(5)) { env.connected(0) && env.connected(1) })
        let timeout = ICEConfig(role: .controlling, localUfrag: "", localPwd: "", tieBreaker: 0, seed: 0).consentTimeout
        var seq = 0
        func sendA(for d: Duration, every step: Duration = .milliseconds(100)) -> Int {
            var accepted = 0
            let end = env.clock.now() + d
            while env.clock.now() < end {
                var p = rtp(0xA7, seq)
                seq += 1
                if a.sendRTP(&p, now: env.clock.now()) { accepted += 1 }
                env.run(for: step)
            }
            return accepted
        }
        XCTAssertEqual(sendA(for: .seconds(1)), 10)
        XCTAssertEqual(env.takeRTP(1).count, 10)

        // The path is cut one way (b -> a): a's checks reach b but no answer comes back; b's checks are lost.
        let cut = env.clock.now()
        env.net.block(from: addrB, to: addrA)
        _ = sendA(for: timeout + .seconds(5))
        XCTAssertEqual(a.iceState, .failed)
        XCTAssertEqual(b.iceState, .failed)
        XCTAssertTrue(a.transport?.ice.consentExpired == true)
        // a kept sending while it still had consent (media kept arriving at b over the working direction) ...
        let sentByA = appData(env, 0, since: cut)
        XCTAssertGreaterThan(sentByA.filter { $0 >= cut + .seconds(20) }.count, 50, "a sent until its consent expired")
        XCTAssertGreaterThan(env.takeRTP(1).count, 200)
        // ... and stopped within the consent timeout: nothing but STUN from either side afterwards.
        let lastA = try XCTUnwrap(sentByA.max())
        XCTAssertLessThanOrEqual(lastA, cut + timeout)
        XCTAssertLessThanOrEqual(try XCTUnwrap(appData(env, 1, since: cut).max()), cut + timeout)
        let dropped = a.stats.sendsDroppedWithoutConsent
        XCTAssertGreaterThan(dropped, 40, "media offered after expiry was dropped and counted")
        let quiet = env.clock.now()
        var p = rtp(0xA7, seq)
        seq += 1
        XCTAssertFalse(a.sendRTP(&p, now: quiet))
        env.run(for: .seconds(3))
        XCTAssertTrue(appData(env, 0, since: quiet).isEmpty)
        XCTAssertTrue(appData(env, 1, since: quiet).isEmpty)
        // The RTP packet and the RTCP reports due meanwhile were dropped and counted.
        XCTAssertGreaterThan(a.stats.sendsDroppedWithoutConsent, dropped)
        XCTAssertGreaterThan(b.stats.sendsDroppedWithoutConsent, 0, "b's reports stopped too")
        let droppedBeforeRestart = a.stats.sendsDroppedWithoutConsent

        // The path comes back and a restarts ICE: the new pair's checks give consent, and media flows again.
        env.net.unblock(from: addrB, to: addrA)
        let answer = try b.createAnswer(toOffer: try a.createOffer(iceRestart: true, now: env.clock.now()), now: env.clock.now())
        try a.setRemoteAnswer(answer, now: env.clock.now())
        XCTAssertTrue(env.run(for: .seconds(10)) { a.iceState.isConnected && b.iceState.isConnected })
        XCTAssertFalse(a.transport?.ice.consentExpired ?? true)
        _ = env.takeRTP(1)
        let resumed = env.clock.now()
        XCTAssertEqual(sendA(for: .seconds(1)), 10)
        env.run(for: .milliseconds(200))
        XCTAssertEqual(env.takeRTP(1).count, 10)
        XCTAssertFalse(appData(env, 0, since: resumed).isEmpty)
        XCTAssertEqual(a.stats.sendsDroppedWithoutConsent, droppedBeforeRestart, "nothing dropped once consent is back")
        XCTAssertEqual(a.stats.srtpErrors + b.stats.srtpErrors, 0)
    }
}
