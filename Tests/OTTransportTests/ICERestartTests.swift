import OTBase
import OTWire
@testable import OTTransport
import XCTest

/// ICE restart through `PeerConnection` offer/answer, on the seeded emulator: a path that stopped is replaced
/// without a new DTLS handshake.
final class ICERestartTests: XCTestCase {
    func rtp(_ ssrc: UInt32, _ seq: Int) -> [UInt8] {
        RTPPacket(payloadType: 96, sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 3000), ssrc: ssrc, payload: [1, 2, 3, 4][...]).serialized()
    }

    func send(_ pc: PeerConnection, ssrc: UInt32, from: Int, count: Int, env: EmulatedPeerConnections) {
        for i in from..<from + count {
            var p = rtp(ssrc, i)
            pc.sendRTP(&p, now: env.clock.now())
            env.run(for: .milliseconds(20))
        }
    }

    func count(_ events: [PeerConnectionEvent], _ match: (PeerConnectionEvent) -> Bool) -> Int { events.filter(match).count }

    func testRestartRecoversAStoppedPathWithoutANewDTLSHandshake() throws {
        let env = EmulatedPeerConnections(seed: 500, conditions: LinkConditions(delay: .milliseconds(20), jitter: .milliseconds(4)))
        let now = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xA2, seed: 500), now: now)
        let b = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xB2, seed: 501), now: now)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer(now: now), now: now), now: now)
        XCTAssertTrue(env.run(for: .seconds(5)) { env.connected(0) && env.connected(1) })
        send(a, ssrc: 0xA2, from: 0, count: 10, env: env)
        env.run(for: .milliseconds(200))
        XCTAssertEqual(env.takeRTP(1).count, 10)
        let (oldA, oldB) = (a.localUfrag, b.localUfrag)

        // a's path stops (its interface went away): consent fails, ICE goes disconnected on both sides.
        env.net.block(TransportAddress("10.0.0.1:5000")!)
        XCTAssertTrue(env.run(for: .seconds(20)) { a.iceState == .disconnected && b.iceState == .disconnected })
        send(a, ssrc: 0xA2, from: 10, count: 5, env: env)
        XCTAssertTrue(env.takeRTP(1).isEmpty)

        // a has a new socket and restarts ICE through offer/answer.
        let fresh = TransportAddress("10.0.1.1:5002")!
        env.peers[0].addresses.append(fresh)
        a.addLocalCandidate(fresh)
        let restartOffer = try a.createOffer(iceRestart: true, now: env.clock.now())
        XCTAssertTrue(a.isRestartingICE)
        XCTAssertNotEqual(a.localUfrag, oldA)
        XCTAssertTrue(restartOffer.contains("a=ice-ufrag:\(a.localUfrag)"))
        XCTAssertTrue(restartOffer.contains("a=setup:passive"), "a re-offer keeps a's DTLS role (server)")
        XCTAssertTrue(restartOffer.contains("10.0.1.1 5002"))
        let restartAnswer = try b.createAnswer(toOffer: restartOffer, now: env.clock.now())
        XCTAssertNotEqual(b.localUfrag, oldB, "the answerer restarts too: new credentials")
        XCTAssertTrue(restartAnswer.contains("a=setup:active"))
        try a.setRemoteAnswer(restartAnswer, now: env.clock.now())
        XCTAssertFalse(a.isRestartingICE)

        XCTAssertTrue(env.run(for: .seconds(10)) { a.iceState.isConnected && b.iceState.isConnected })
        XCTAssertEqual(a.selectedCandidatePair?.base, fresh)
        XCTAssertEqual(b.selectedCandidatePair?.remote.address, fresh)
        // Media flows again both ways, on the SRTP keys of the first handshake.
        send(a, ssrc: 0xA2, from: 15, count: 10, env: env)
        send(b, ssrc: 0xB2, from: 0, count: 10, env: env)
        env.run(for: .seconds(1))
        // Everything sent after the restart arrives (packets lost while the path was down may be NACKed back too).
        let atB = Set(env.takeRTP(1).compactMap { try? RTPPacket(parsing: $0).sequenceNumber })
        XCTAssertTrue(Set((15..<25).map(UInt16.init)).isSubset(of: atB), "\(atB.sorted())")
        XCTAssertEqual(env.takeRTP(0).count, 10)
        let aStates = env.events[0].compactMap { if case .iceStateChanged(let s) = $0 { s } else { nil } }
        XCTAssertTrue(aStates.contains(.disconnected))
        XCTAssertEqual(aStates.last.map(\.isConnected), true, "\(aStates)")
        for i in 0..<2 {
            XCTAssertEqual(count(env.events[i]) { if case .connected = $0 { true } else { false } }, 1, "no second DTLS handshake")
            XCTAssertEqual(count(env.events[i]) { if case .failed = $0 { true } else { false } }, 0)
        }
        XCTAssertEqual(a.stats.srtpErrors + b.stats.srtpErrors, 0)
        XCTAssertEqual(a.stats.packetsReceived, 10)
    }

    func testRestartNeedsAFinishedExchangeAndARenegotiationKeepsDTLS() throws {
        let env = EmulatedPeerConnections(seed: 510, conditions: LinkConditions())
        let now = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: 0xA1, videoSSRC: nil, seed: 510), now: now)
        let b = try PeerConnection(config: peerConfig(audioSSRC: 0xB1, videoSSRC: nil, seed: 511), now: now)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        XCTAssertThrowsError(try a.createOffer(iceRestart: true, now: now)) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        let offer = try a.createOffer(now: now)
        try a.setRemoteAnswer(try b.createAnswer(toOffer: offer, now: now), now: now)
        XCTAssertTrue(env.run(for: .seconds(5)) { env.connected(0) && env.connected(1) })
        // A re-offer from another certificate is refused: that would be a new DTLS association.
        let stranger = try PeerConnection(config: peerConfig(audioSSRC: 0xC1, videoSSRC: nil, seed: 512), now: now)
        stranger.addLocalCandidate(TransportAddress("10.0.0.3:7000")!)
        XCTAssertThrowsError(try b.createAnswer(toOffer: try stranger.createOffer(now: now), now: now)) {
            XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter)
        }
        XCTAssertTrue(b.iceState.isConnected)
    }
}
