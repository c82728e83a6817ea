import OTBase
import OTWire
@testable import OTTransport
import XCTest

func makePeer(_ name: String, role: ICERole, _ addresses: [String], seed: UInt64, tieBreaker: UInt64? = nil, lite: Bool = false) -> EmulatedPeer {
    var config = ICEConfig(role: role, localUfrag: "\(name)ufr", localPwd: "\(name)-password-0123456789", tieBreaker: tieBreaker ?? seed, seed: seed, lite: lite)
    config.consentInterval = .seconds(2)
    config.disconnectedTimeout = .seconds(5)
    config.consentTimeout = .seconds(15)
    let agent = ICEAgent(config: config)
    for a in addresses { if let t = TransportAddress(a) { agent.addLocalCandidate(t) } }
    return EmulatedPeer(name: name, agent: agent)
}

/// Tells each agent the other's credentials and candidates (what the SDP exchange does).
func signal(_ a: EmulatedPeer, _ b: EmulatedPeer, now: Instant) {
    a.agent.setRemoteCredentials(ufrag: b.agent.config.localUfrag, pwd: b.agent.config.localPwd)
    b.agent.setRemoteCredentials(ufrag: a.agent.config.localUfrag, pwd: a.agent.config.localPwd)
    a.agent.remoteIsLite = b.agent.config.lite
    b.agent.remoteIsLite = a.agent.config.lite
    for c in b.agent.localCandidates { a.agent.addRemoteCandidate(c) }
    for c in a.agent.localCandidates { b.agent.addRemoteCandidate(c) }
    a.agent.endOfRemoteCandidates(now: now)
    b.agent.endOfRemoteCandidates(now: now)
}

final class ICEAgentTests: XCTestCase {
    func connect(loss: Double, reorder: Double = 0, seed: UInt64) -> (EmulatedPair, Bool) {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000", "[fd00::1]:5000"], seed: seed)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000", "[fd00::2]:6000"], seed: seed + 1)
        var conditions = LinkConditions(delay: .milliseconds(20), jitter: .milliseconds(10), loss: loss, reorder: reorder)
        conditions.reorderDelay = .milliseconds(40)
        var pair = EmulatedPair(seed: seed, conditions: conditions, a: a, b: b)
        signal(a, b, now: pair.clock.now())
        let ok = pair.run(for: .seconds(30)) { a.connected && b.connected }
        return (pair, ok)
    }

    func assertSamePair(_ pair: EmulatedPair, file: StaticString = #filePath, line: UInt = #line) {
        guard let sa = pair.a.agent.selectedPair, let sb = pair.b.agent.selectedPair else { return XCTFail("no selected pair", file: file, line: line) }
        XCTAssertEqual(sa.local.address, sb.remote.address, file: file, line: line)
        XCTAssertEqual(sa.remote.address, sb.local.address, file: file, line: line)
        // The addresses the media path reads per packet are the selected pair's.
        for (agent, p) in [(pair.a.agent, sa), (pair.b.agent, sb)] {
            XCTAssertEqual(agent.selectedRoute?.local, p.local.address, file: file, line: line)
            XCTAssertEqual(agent.selectedRoute?.remote, p.remote.address, file: file, line: line)
        }
    }

    func testConnectsWithoutLossOnTheBestPair() {
        let (pair, ok) = connect(loss: 0, seed: 1)
        XCTAssertTrue(ok)
        assertSamePair(pair)
        // IPv6 host candidates have the higher local preference here, so that pair wins.
        XCTAssertEqual(pair.a.agent.selectedPair?.local.address, TransportAddress("[fd00::1]:5000"))
        XCTAssertTrue(pair.a.iceEvents.contains(.stateChanged(.checking)))
        XCTAssertTrue(pair.b.iceEvents.contains(.stateChanged(.connected)))
        XCTAssertTrue(pair.a.agent.pairStates.contains { $0.nominated && $0.state == .succeeded })
    }

    func testConnectsWithFivePercentLoss() {
        for seed: UInt64 in [10, 11, 12] {
            let (pair, ok) = connect(loss: 0.05, seed: seed)
            XCTAssertTrue(ok, "seed \(seed)")
            assertSamePair(pair)
        }
    }

    func testConnectsWithTwentyPercentLossAndReordering() {
        for seed: UInt64 in [20, 21, 22, 23] {
            let (pair, ok) = connect(loss: 0.20, reorder: 0.2, seed: seed)
            XCTAssertTrue(ok, "seed \(seed)")
            assertSamePair(pair)
            XCTAssertGreaterThan(pair.net.dropped, 0)
        }
    }

    func testRoleConflictResolvesByTieBreaker() {
        for (ta, tb) in [(UInt64(100), UInt64(5)), (UInt64(5), UInt64(100))] {
            // Both think they are controlling.
            let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 3, tieBreaker: ta)
            let b = makePeer("b", role: .controlling, ["10.0.0.2:6000"], seed: 4, tieBreaker: tb)
            var pair = EmulatedPair(seed: 9, conditions: LinkConditions(), a: a, b: b)
            signal(a, b, now: pair.clock.now())
            XCTAssertTrue(pair.run(for: .seconds(10)) { a.connected && b.connected })
            let (winner, loser) = ta > tb ? (a, b) : (b, a)
            XCTAssertEqual(winner.agent.role, .controlling)
            XCTAssertEqual(loser.agent.role, .controlled)
            XCTAssertTrue(loser.iceEvents.contains(.roleChanged(.controlled)))
            assertSamePair(pair)
        }
        // Both controlled: the larger tie-breaker becomes controlling.
        let a = makePeer("a", role: .controlled, ["10.0.0.1:5000"], seed: 3, tieBreaker: 7)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 4, tieBreaker: 8)
        var pair = EmulatedPair(seed: 9, conditions: LinkConditions(), a: a, b: b)
        signal(a, b, now: pair.clock.now())
        XCTAssertTrue(pair.run(for: .seconds(10)) { a.connected && b.connected })
        XCTAssertEqual(b.agent.role, .controlling)
        XCTAssertEqual(a.agent.role, .controlled)
    }

    func testTrickledCandidatesAndPeerReflexive() {
        let a = makePeer("a", role: .controlling, [], seed: 5)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 6)
        var pair = EmulatedPair(seed: 5, conditions: LinkConditions(), a: a, b: b)
        // Credentials first, no candidates yet.
        a.agent.setRemoteCredentials(ufrag: b.agent.config.localUfrag, pwd: b.agent.config.localPwd)
        b.agent.setRemoteCredentials(ufrag: a.agent.config.localUfrag, pwd: a.agent.config.localPwd)
        XCTAssertFalse(pair.run(for: .seconds(1)) { a.connected })
        // a gathers a candidate and trickles only its own to nobody; b's candidate reaches a.
        a.agent.addLocalCandidate(TransportAddress("10.0.0.1:5000")!)
        a.agent.addRemoteCandidate(b.agent.localCandidates[0])
        // b never learns a's candidate from signalling: it sees a as peer-reflexive.
        XCTAssertTrue(pair.run(for: .seconds(10)) { a.connected && b.connected })
        XCTAssertEqual(b.agent.selectedPair?.remote.kind, .prflx)
        XCTAssertEqual(b.agent.selectedPair?.remote.address, TransportAddress("10.0.0.1:5000"))
    }

    /// RFC 8445 §7.3.1.4: a check from the peer on a pair whose own check is still outstanding (here lost) cancels
    /// it and triggers a new one at once, instead of waiting for its retransmission timeout.
    func testACheckOnAPairInProgressTriggersANewCheckWithoutWaitingForTheRetransmission() {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 70)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 71)
        var pair = EmulatedPair(seed: 70, conditions: LinkConditions(delay: .milliseconds(20), loss: 1), a: a, b: b)
        let start = pair.clock.now()
        // b answered: it knows a and checks at once; that check is lost.
        b.agent.setRemoteCredentials(ufrag: a.agent.config.localUfrag, pwd: a.agent.config.localPwd)
        for c in a.agent.localCandidates { b.agent.addRemoteCandidate(c) }
        XCTAssertFalse(pair.run(for: .milliseconds(10)) { b.connected })
        XCTAssertEqual(pair.net.dropped, 1)
        XCTAssertEqual(b.agent.pairStates.map(\.state), [.inProgress])
        // Then a learns b (the answer) and the path works.
        pair.net.conditions.loss = 0
        a.agent.setRemoteCredentials(ufrag: b.agent.config.localUfrag, pwd: b.agent.config.localPwd)
        for c in b.agent.localCandidates { a.agent.addRemoteCandidate(c) }
        XCTAssertTrue(pair.run(for: .seconds(5)) { a.connected && b.connected })
        XCTAssertLessThan(pair.clock.now() - start, b.agent.config.initialCheckRTO,
                          "b connects on a triggered check, before its lost check's first retransmission")
        assertSamePair(pair)
        XCTAssertEqual(pair.net.dropped, 1, "nothing retransmitted into the loss")
    }

    /// RFC 5389 §7.2.1 / RFC 6298: checks retransmit after a timeout from the measured round-trip time (Karn's rule:
    /// only checks sent once are measured), at least `minRTO`; before any measurement after `initialCheckRTO`.
    func testCheckRetransmissionTimeoutFollowsTheMeasuredRoundTripTime() throws {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 80)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 81)
        var pair = EmulatedPair(seed: 80, conditions: LinkConditions(delay: .milliseconds(8)), a: a, b: b)
        signal(a, b, now: pair.clock.now())
        XCTAssertNil(a.agent.roundTripTime)
        XCTAssertTrue(pair.run(for: .seconds(2)) { a.connected && b.connected })
        let rtt = try XCTUnwrap(a.agent.roundTripTime)
        XCTAssertEqual(rtt, .milliseconds(16), "two one-way delays")
        // A new remote candidate nobody answers on: its check's retransmissions are spaced from the RTT (at least 50 ms),
        // not the 100 ms used before any measurement.
        a.agent.addRemoteCandidate(SDPCandidate(foundation: "9", priority: 100, address: TransportAddress("10.0.0.9:7000")!, kind: .host))
        var sends: [Instant] = []
        let silent = TransportAddress("10.0.0.9:7000")!
        for _ in 0..<400 {
            let now = pair.clock.now()
            a.agent.handleTimeout(now: now)
            while let t = a.agent.pollTransmit() { if t.destination == silent { sends.append(now) } }
            guard let next = a.agent.pollTimeout() else { break }
            pair.clock.advance(to: max(next, now + .milliseconds(1)))
            if sends.count >= 3 { break }
        }
        XCTAssertEqual(sends.count, 3)
        XCTAssertEqual(sends[1] - sends[0], a.agent.config.minRTO)
        XCTAssertEqual(sends[2] - sends[1], a.agent.config.minRTO * 2, "doubling")
    }

    /// A lone pair at 30 % loss each way can lose a check's seven transmissions (Rc) although the path works: seeds
    /// 56, 66 and 856 did (the controlling agent failed after 7.35 s, its pair proven by an earlier check). A check on
    /// a pair that has carried checks keeps going for `workingPairCheckTimeout`, so every seed connects.
    func testLonePairAtThirtyPercentLossConnectsOverAThousandSeeds() {
        var failed: [UInt64] = []
        for seed: UInt64 in 1...1000 {
            let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: seed * 2)
            let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: seed * 2 + 1)
            var pair = EmulatedPair(seed: seed, conditions: LinkConditions(delay: .microseconds(300), jitter: .microseconds(100), loss: 0.3), a: a, b: b)
            signal(a, b, now: pair.clock.now())
            let ok = pair.run(for: .seconds(30)) { (a.connected && b.connected) || a.agent.state == .failed || b.agent.state == .failed }
            if !ok || !a.connected || !b.connected || a.iceEvents.contains(.stateChanged(.failed)) { failed.append(seed) }
        }
        XCTAssertEqual(failed, [])
    }

    /// A check on a pair the peer's check arrived on (it works, from the peer to us) backs off to 4 × its RTO and is
    /// not given up after Rc transmissions while `workingPairCheckTimeout` lasts.
    func testACheckOnAWorkingPairBacksOffToFourRTOsAndOutlastsRc() throws {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 90)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 91)
        let clock = VirtualClock()
        signal(a, b, now: clock.now())
        // b's first check reaches a; nothing a sends ever reaches b.
        b.agent.handleTimeout(now: clock.now())
        let check = try XCTUnwrap(b.agent.pollTransmit())
        a.agent.handleReceive(check.bytes, from: check.source, local: check.destination, now: clock.now())
        var sends: [Instant] = []
        while clock.now() < Instant(micros: 10_000_000) {
            let now = clock.now()
            a.agent.handleTimeout(now: now)
            while let t = a.agent.pollTransmit() {
                if let m = try? STUNMessage.parse(t.bytes), m.messageClass == .request { sends.append(now) }
            }
            guard let next = a.agent.pollTimeout() else { break }
            clock.advance(to: max(next, now + .milliseconds(1)))
        }
        let gaps = zip(sends.dropFirst(), sends).map { $0 - $1 }
        let rto = a.agent.config.initialCheckRTO  // no round trip measured
        XCTAssertEqual(Array(gaps.prefix(5)), [rto, rto * 2, rto * 4, rto * 4, rto * 4])
        XCTAssertGreaterThan(sends.count, a.agent.config.maxTransmissions * 3, "10 s of checks at 4 RTOs")
        XCTAssertEqual(a.agent.pairStates.map(\.state), [.inProgress])
        XCTAssertNotEqual(a.agent.state, .failed)
    }

    /// A pair nothing ever came back on still fails after Rc transmissions (not after `workingPairCheckTimeout`); its
    /// check backs off to 4 × its RTO like any other (was: to `maxRTO`, 1.6 s, so a lone pair at 20 % loss whose
    /// first four responses were lost waited 1.5 s for the fifth try).
    func testUnansweredLonePairBacksOffToFourRTOsAndFailsAfterRcTransmissions() {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 9)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 10)
        var pair = EmulatedPair(seed: 9, conditions: LinkConditions(), a: a, b: b)
        pair.net.block(TransportAddress("10.0.0.2:6000")!)
        signal(a, b, now: pair.clock.now())
        let start = pair.clock.now()
        XCTAssertTrue(pair.run(for: .seconds(30)) { a.agent.state == .failed })
        XCTAssertLessThan(pair.clock.now() - start, a.agent.config.workingPairCheckTimeout)
        let rto = a.agent.config.initialCheckRTO
        XCTAssertEqual(pair.clock.now() - start, rto * (1 + 2 + 4 * 5), "7 transmissions (Rc), the last one's wait included")
    }

    /// The peer's DTLS arriving on a pair whose check has not succeeded (an ICE-lite router starts its handshake on our
    /// first check; here every response of the peer is lost) makes the pair work: the check goes again at once (one
    /// RTO after its last transmission, not after its backed-off wait) and goes on past Rc.
    func testThePeersHandshakeOnAPairMakesItWorkAndChecksItAgainAtOnce() throws {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 92)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 93)
        let clock = VirtualClock()
        signal(a, b, now: clock.now())
        let local = TransportAddress("10.0.0.1:5000")!, remote = TransportAddress("10.0.0.2:6000")!
        var sends: [Instant] = []
        func runA(until end: Instant) {
            while clock.now() < end {
                let now = clock.now()
                a.agent.handleTimeout(now: now)
                while let t = a.agent.pollTransmit() {
                    if let m = try? STUNMessage.parse(t.bytes), m.messageClass == .request { sends.append(now) }
                }
                guard let next = a.agent.pollTimeout(), next < end else { clock.advance(to: end); return }
                clock.advance(to: max(next, now + .milliseconds(1)))
            }
        }
        let t0 = clock.now()
        let ms = { (n: Int64) in t0 + .milliseconds(n) }
        runA(until: ms(350))
        let rto = a.agent.config.initialCheckRTO
        XCTAssertEqual(sends.map { $0 - ms(0) }, [.zero, rto, rto * 3], "checks at 0, 100 and 300 ms, the next due at 700")
        a.agent.handlePeerHandshake(from: remote, local: local, now: clock.now())
        runA(until: ms(10_000))
        XCTAssertEqual(sends[3] - ms(0), rto * 4, "again one RTO after the last, not at 700 ms")
        XCTAssertGreaterThan(sends.count, a.agent.config.maxTransmissions * 3, "checks past Rc")
        XCTAssertNotEqual(a.agent.state, .failed)
    }

    func testWrongPasswordNeverConnectsAndFails() {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 7)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 8)
        var pair = EmulatedPair(seed: 7, conditions: LinkConditions(), a: a, b: b)
        signal(a, b, now: pair.clock.now())
        a.agent.setRemoteCredentials(ufrag: b.agent.config.localUfrag, pwd: "not-the-right-password-x")
        XCTAssertTrue(pair.run(for: .seconds(30)) { a.agent.state == .failed })
        XCTAssertNil(a.agent.selectedPair)
        XCTAssertNil(a.agent.selectedRoute)
    }

    func testConsentLossDisconnectsThenFailsAndRecovers() {
        let (p, ok) = connect(loss: 0, seed: 30)
        var pair = p
        XCTAssertTrue(ok)
        let a = pair.a
        guard let route = a.agent.selectedPair else { return XCTFail() }
        // Consent keeps the pair alive for a while.
        XCTAssertFalse(pair.run(for: .seconds(20)) { !a.agent.state.isConnected })
        pair.net.block(route.remote.address)
        XCTAssertTrue(pair.run(for: .seconds(10)) { a.agent.state == .disconnected })
        pair.net.unblock(route.remote.address)
        XCTAssertTrue(pair.run(for: .seconds(10)) { a.agent.state.isConnected })
        pair.net.block(route.remote.address)
        XCTAssertTrue(pair.run(for: .seconds(30)) { a.agent.state == .failed })
        // Both sides failed; neither leaves a deadline it will not act on (a driver would spin on it).
        let failedAt = pair.clock.now()
        pair.run(for: .seconds(20))
        XCTAssertEqual(pair.b.agent.state, .failed)
        XCTAssertEqual(pair.clock.now(), failedAt + .seconds(20), "virtual time went on")
    }

    func testICERestartRecoversAStoppedPath() {
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: 40)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: 41)
        var pair = EmulatedPair(seed: 40, conditions: LinkConditions(), a: a, b: b)
        signal(a, b, now: pair.clock.now())
        XCTAssertTrue(pair.run(for: .seconds(5)) { a.connected && b.connected })
        // a's network path stops (interface gone); both sides lose consent.
        pair.net.block(TransportAddress("10.0.0.1:5000")!)
        XCTAssertTrue(pair.run(for: .seconds(20)) { a.agent.state == .failed && b.agent.state != .connected })
        // a gets a new address and restarts ICE; the new offer/answer carries fresh credentials.
        let now = pair.clock.now()
        a.agent.removeLocalCandidate(TransportAddress("10.0.0.1:5000")!)
        a.agent.addLocalCandidate(TransportAddress("10.0.1.1:5002")!)
        a.agent.restart(ufrag: "a2ufr", pwd: "a2-password-0123456789xx", now: now)
        b.agent.restart(ufrag: "b2ufr", pwd: "b2-password-0123456789xx", now: now)
        signal(a, b, now: now)
        XCTAssertTrue(pair.run(for: .seconds(10)) { a.connected && b.connected })
        XCTAssertEqual(a.agent.selectedPair?.local.address, TransportAddress("10.0.1.1:5002"))
        XCTAssertEqual(b.agent.selectedPair?.remote.address, TransportAddress("10.0.1.1:5002"))
        // Media flows on the new path.
        pair.a.sendMedia([0x80, 96, 0, 1], into: &pair.net, now: pair.clock.now())
        XCTAssertTrue(pair.run(for: .seconds(1)) { !b.received.isEmpty })
    }

    func testLiteServerWithFullClient() {
        let client = makePeer("c", role: .controlled, ["10.0.0.1:5000"], seed: 50)  // a full agent facing lite must control
        let server = makePeer("s", role: .controlled, ["10.0.0.9:3478"], seed: 51, lite: true)
        var pair = EmulatedPair(seed: 50, conditions: LinkConditions(loss: 0.05), a: client, b: server)
        signal(client, server, now: pair.clock.now())
        XCTAssertTrue(pair.run(for: .seconds(10)) { client.connected && server.connected })
        XCTAssertEqual(client.agent.role, .controlling)
        XCTAssertEqual(server.agent.selectedPair?.remote.address, TransportAddress("10.0.0.1:5000"))
        // The lite server never sends checks of its own: every request it sent would be a STUN request from 10.0.0.9.
        XCTAssertTrue(server.iceEvents.contains(.stateChanged(.connected)))
        // Client disappears: lite server notices missing consent checks.
        pair.net.block(TransportAddress("10.0.0.1:5000")!)
        XCTAssertTrue(pair.run(for: .seconds(30)) { server.agent.state == .failed })
    }

    /// The selected pair's round trip is reported (`.roundTripTime`, `selectedPairRoundTripTime`) before media flows: at
    /// selection when its check was sent once; when every answered check had been retransmitted (Karn's rule: no sample),
    /// the pair is probed with a consent request at once. A lite agent sends no request and measures nothing.
    func testTheSelectedPairsRoundTripIsReportedEvenWhenItsCheckWasRetransmitted() {
        let rtts = { (p: EmulatedPeer) in p.iceEvents.filter { if case .roundTripTime = $0 { true } else { false } } }
        for lostAnswers in [false, true] {
            let client = makePeer("c", role: .controlling, ["10.0.0.1:5000"], seed: 70)
            let server = makePeer("s", role: .controlled, ["10.0.0.9:3478"], seed: 71, lite: true)
            var pair = EmulatedPair(seed: 70, conditions: LinkConditions(delay: .milliseconds(20)), a: client, b: server)
            let c = TransportAddress("10.0.0.1:5000")!, s = TransportAddress("10.0.0.9:3478")!
            signal(client, server, now: pair.clock.now())
            if lostAnswers {
                pair.net.block(from: s, to: c)  // the answers to the first two transmissions of the check are lost
                pair.run(for: .milliseconds(150))
                pair.net.unblock(from: s, to: c)
            }
            XCTAssertTrue(pair.run(for: .seconds(2)) { client.connected })
            let selectedAt = pair.clock.now()
            if lostAnswers {
                XCTAssertNil(client.agent.selectedPairRoundTripTime, "selected on a retransmitted check: no sample")
                XCTAssertTrue(rtts(client).isEmpty)
                XCTAssertTrue(pair.run(for: .seconds(1)) { client.agent.selectedPairRoundTripTime != nil })
                XCTAssertEqual(pair.clock.now() - selectedAt, .milliseconds(40), "probed at once, one round trip later")
            }
            XCTAssertEqual(client.agent.selectedPairRoundTripTime, .milliseconds(40))
            XCTAssertEqual(rtts(client), [.roundTripTime(.milliseconds(40))])
            // Probing stops with the answer: the next request is the consent check, an interval later.
            let before = pair.net.sent
            pair.run(for: .seconds(1))
            XCTAssertEqual(pair.net.sent, before, "no request within a second of the measurement")
            XCTAssertNil(server.agent.selectedPairRoundTripTime)
            XCTAssertTrue(rtts(server).isEmpty)
        }
    }

    /// A full client facing a lite server nominates every pair it checks (aggressive nomination): the server must
    /// end on the pair the client keeps, the highest-priority nominated one, not on whichever nominating check came
    /// last (a client with a TURN server checks its relayed pair after its host pair: the router then routed the
    /// client's media by the relayed address and dropped what came from the host).
    func testLiteServerKeepsTheHighestPriorityNominatedPair() {
        let client = makePeer("c", role: .controlling, ["[fd00::1]:5000", "10.0.0.1:5000"], seed: 60)
        let server = makePeer("s", role: .controlled, ["[fd00::9]:3478", "10.0.0.9:3478"], seed: 61, lite: true)
        var pair = EmulatedPair(seed: 60, conditions: LinkConditions(), a: client, b: server)
        signal(client, server, now: pair.clock.now())
        XCTAssertTrue(pair.run(for: .seconds(10)) { client.connected && server.connected })
        _ = pair.run(for: .seconds(3))  // every check (and nomination) has arrived
        XCTAssertEqual(client.agent.selectedPair?.local.address, TransportAddress("[fd00::1]:5000"))
        XCTAssertEqual(server.agent.selectedPair?.remote.address, client.agent.selectedPair?.local.address)
        XCTAssertEqual(server.agent.selectedPair?.local.address, client.agent.selectedPair?.remote.address)
    }

    func testRejectsChecksWithBadIntegrity() throws {
        let agent = ICEAgent(config: ICEConfig(role: .controlled, localUfrag: "loca", localPwd: "local-password-0123456789", tieBreaker: 1, seed: 1))
        agent.addLocalCandidate(TransportAddress("10.0.0.1:5000")!)
        let m = STUNMessage(method: .binding, messageClass: .request, attributes: [.username("loca:rem"), .priority(1), .iceControlling(9)])
        XCTAssertTrue(agent.handleReceive(m.encode(integrityKey: Array("wrong".utf8)), from: TransportAddress("10.0.0.2:1")!, local: TransportAddress("10.0.0.1:5000")!, now: .zero))
        let reply = try STUNMessage.parse(XCTUnwrap(agent.pollTransmit()).bytes)
        XCTAssertEqual(reply.messageClass, .error)
        XCTAssertEqual(reply.errorCode?.code, 401)
        XCTAssertTrue(agent.remoteCandidates.isEmpty)
        // Non-STUN is passed on.
        XCTAssertFalse(agent.handleReceive([22, 0xFE, 0xFD], from: TransportAddress("10.0.0.2:1")!, local: TransportAddress("10.0.0.1:5000")!, now: .zero))
    }

    func testGathersServerReflexiveCandidate() throws {
        let agent = ICEAgent(config: ICEConfig(role: .controlling, localUfrag: "loca", localPwd: "local-password-0123456789", tieBreaker: 1, seed: 1))
        let base = TransportAddress("10.0.0.1:5000")!, server = TransportAddress("192.0.2.1:3478")!
        agent.addLocalCandidate(base)
        agent.gatherServerReflexive(server: server, base: base, now: .zero)
        let req = try XCTUnwrap(agent.pollTransmit())
        XCTAssertEqual(req.destination, server)
        XCTAssertEqual(req.source, base)
        let m = try STUNMessage.parse(req.bytes)
        XCTAssertNil(m.username)
        // Retransmitted until answered.
        agent.handleTimeout(now: .zero + .milliseconds(250))
        XCTAssertEqual(agent.pollTransmit()?.bytes, req.bytes)
        let mapped = TransportAddress("203.0.113.9:40000")!
        let resp = STUNMessage(method: .binding, messageClass: .success, transactionID: m.transactionID, attributes: [.xorMappedAddress(mapped)])
        // A response from elsewhere is ignored.
        agent.handleReceive(resp.encode(), from: TransportAddress("192.0.2.2:3478")!, local: base, now: .zero)
        XCTAssertNil(agent.pollEvent())
        agent.handleReceive(resp.encode(), from: server, local: base, now: .zero)
        guard case .localCandidate(let c)? = agent.pollEvent() else { return XCTFail("no srflx candidate") }
        XCTAssertEqual(c.kind, .srflx)
        XCTAssertEqual(c.address, mapped)
        XCTAssertEqual(c.relatedAddress, base)
        XCTAssertLessThan(c.priority, agent.localCandidates[0].priority)
        XCTAssertEqual(agent.serverReflexiveCandidates, [c])
        XCTAssertEqual(agent.localCandidates.count, 1, "srflx is signalled, its base is what gets paired")
        XCTAssertNil(agent.pollTimeout())
    }

    func testCompletedWhenChecksAreDoneAndClosedAfterClose() {
        let (p, ok) = connect(loss: 0, seed: 60)
        var pair = p
        XCTAssertTrue(ok)
        let a = pair.a, b = pair.b
        XCTAssertTrue(pair.run(for: .seconds(10)) { a.agent.state == .completed && b.agent.state == .completed })
        XCTAssertEqual(pair.a.iceEvents.filter { if case .stateChanged = $0 { true } else { false } },
                       [.stateChanged(.checking), .stateChanged(.connected), .stateChanged(.completed)])
        // A new remote candidate means checks again: back to connected.
        pair.a.agent.addRemoteCandidate(SDPCandidate(foundation: "9", priority: 1, address: TransportAddress("10.0.0.9:9")!, kind: .host))
        XCTAssertEqual(pair.a.agent.state, .connected)
        pair.a.agent.close()
        XCTAssertEqual(pair.a.agent.state, .closed)
        XCTAssertNil(pair.a.agent.pollTimeout())
        pair.run(for: .seconds(1))
        XCTAssertEqual(pair.a.iceEvents.last, .stateChanged(.closed))
        XCTAssertNil(pair.a.agent.pollTransmit())
        XCTAssertFalse(pair.run(for: .seconds(2)) { a.agent.pollTransmit() != nil })
    }
}
