import OTBase
import OTWire
@testable import OTTransport
import XCTest

/// Server-reflexive candidates through `PeerConnectionConfig.stunServers`, on the emulator with NATs.
final class ServerReflexiveTests: XCTestCase {
    static let stun = TransportAddress("203.0.113.5:3478")!
    static let natA = IPAddress("198.51.100.1")!, natB = IPAddress("198.51.100.2")!

    /// A at 10.0.1.2 behind NAT 198.51.100.1, B at 10.0.2.2 behind NAT 198.51.100.2, a STUN server outside.
    func natedPair(seed: UInt64, stun: [TransportAddress], filterLAN: Bool = false) throws -> (NATedPeerConnections, String, String) {
        let env = NATedPeerConnections(seed: seed, conditions: LinkConditions(delay: .milliseconds(15), jitter: .milliseconds(3)))
        env.nats = [EmulatedNAT(publicIP: Self.natA, inside: [IPAddress("10.0.1.2")!]),
                    EmulatedNAT(publicIP: Self.natB, inside: [IPAddress("10.0.2.2")!])]
        env.stunServers = [Self.stun]
        let now = env.clock.now()
        var ca = peerConfig(audioSSRC: 0xA1, videoSSRC: 0xA2, seed: seed), cb = peerConfig(audioSSRC: 0xB1, videoSSRC: 0xB2, seed: seed + 1)
        ca.stunServers = stun; cb.stunServers = stun
        ca.filterOutLanCandidates = filterLAN; cb.filterOutLanCandidates = filterLAN
        let a = try PeerConnection(config: ca, now: now), b = try PeerConnection(config: cb, now: now)
        env.add(a, ["10.0.1.2:5000"])
        env.add(b, ["10.0.2.2:6000"])
        let offer = try a.createOffer(now: now)
        let answer = try b.createAnswer(toOffer: offer, now: now)
        try a.setRemoteAnswer(answer, now: now)
        return (env, offer, answer)
    }

    func sendVideo(_ pc: PeerConnection, ssrc: UInt32, count: Int, env: NATedPeerConnections) {
        for i in 0..<count {
            var p = RTPPacket(payloadType: 96, sequenceNumber: UInt16(i), timestamp: UInt32(i * 3000), ssrc: ssrc, payload: [UInt8](repeating: 7, count: 100)[...]).serialized()
            pc.sendRTP(&p, now: env.clock.now())
            env.run(for: .milliseconds(10))
        }
    }

    func testNATedPeersConnectThroughServerReflexiveCandidates() throws {
        let (env, offer, _) = try natedPair(seed: 300, stun: [Self.stun])
        // Gathering is trickled: the offer does not claim to be complete.
        XCTAssertFalse(offer.contains("a=end-of-candidates"))
        XCTAssertTrue(env.run(for: .seconds(15)) { env.connected(0) && env.connected(1) })
        let srflx = env.trickled[0].filter { $0.kind == .srflx }
        XCTAssertEqual(srflx.map(\.address), [TransportAddress(ip: Self.natA, port: 5000)])
        XCTAssertEqual(srflx.first?.relatedAddress, TransportAddress("10.0.1.2:5000"))
        XCTAssertTrue(env.gatheringDone(0) && env.gatheringDone(1))
        // The pair in use goes between the NATs' public addresses (srflx or peer-reflexive on the far side).
        let pairA = try XCTUnwrap(env.peers[0].pc.transport?.ice.selectedPair)
        XCTAssertEqual(pairA.remote.address.ip, Self.natB)
        XCTAssertEqual(pairA.local.address, TransportAddress("10.0.1.2:5000"), "media leaves from the base")
        // As statistics show it, our side of the pair is the NAT's address (srflx, or prflx if a check taught it first).
        let shown = try XCTUnwrap(env.peers[0].pc.selectedCandidatePair)
        XCTAssertTrue([.srflx, .prflx].contains(shown.local.kind), "\(shown.local)")
        XCTAssertEqual(shown.local.address, TransportAddress(ip: Self.natA, port: 5000))
        XCTAssertEqual(shown.base, TransportAddress("10.0.1.2:5000"))
        // Checks done, both sides' candidates complete: completed.
        XCTAssertTrue(env.run(for: .seconds(20)) { env.peers[0].pc.iceState == .completed && env.peers[1].pc.iceState == .completed })
        sendVideo(env.peers[0].pc, ssrc: 0xA2, count: 20, env: env)
        XCTAssertTrue(env.run(for: .seconds(1)) { env.rtpCount(1) == 20 })
        XCTAssertGreaterThan(env.natDropped, 0, "the private host pairs never worked")
        env.peers[0].pc.close(now: env.clock.now())
        env.drain(now: env.clock.now())
        XCTAssertEqual(env.events[0].last, .iceStateChanged(.closed))
        XCTAssertNil(env.failed(0), "closing is not a failure")
        XCTAssertEqual(env.peers[0].pc.iceState, .closed)
    }

    func testNATedPeersWithoutSTUNFailWithAnICEError() throws {
        let (env, offer, answer) = try natedPair(seed: 310, stun: [])
        XCTAssertTrue(offer.contains("a=end-of-candidates") && answer.contains("a=end-of-candidates"))
        XCTAssertTrue(env.run(for: .seconds(40)) { env.failed(0) != nil && env.failed(1) != nil })
        XCTAssertFalse(env.connected(0) || env.connected(1))
        XCTAssertEqual(env.failed(0)?.code, .connectionFailed)
        XCTAssertTrue(env.failed(0)?.message.contains("ICE failed") == true)
    }

    func testSilentSTUNServerDoesNotDelayConnectingAndTimesOut() throws {
        let silent = TransportAddress("203.0.113.66:3478")!
        let env = NATedPeerConnections(seed: 320)
        env.silentServers = [silent]
        let now = env.clock.now()
        var ca = peerConfig(audioSSRC: 0xA1, videoSSRC: nil, seed: 320), cb = peerConfig(audioSSRC: 0xB1, videoSSRC: nil, seed: 321)
        ca.stunServers = [silent]; cb.stunServers = [silent]
        let a = try PeerConnection(config: ca, now: now), b = try PeerConnection(config: cb, now: now)
        env.add(a, ["192.0.2.1:5000"])
        env.add(b, ["192.0.2.2:6000"])
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer(now: now), now: now), now: now)
        XCTAssertTrue(env.run(for: .seconds(3)) { env.connected(0) && env.connected(1) })
        XCTAssertFalse(env.gatheringDone(0), "connected while the STUN server is still asked")
        XCTAssertTrue(env.run(for: .seconds(30)) { env.gatheringDone(0) && env.gatheringDone(1) })
        XCTAssertTrue(env.trickled[0].isEmpty)
        XCTAssertTrue(env.connected(0))
        XCTAssertNil(env.failed(0))
    }

    func testServerReflexiveEqualToTheHostIsDropped() throws {
        // No NAT: the STUN server sees the host address itself (RFC 8445 §5.1.3: redundant).
        let env = NATedPeerConnections(seed: 330)
        env.stunServers = [Self.stun]
        let now = env.clock.now()
        var ca = peerConfig(audioSSRC: 0xA1, videoSSRC: nil, seed: 330)
        ca.stunServers = [Self.stun]
        let a = try PeerConnection(config: ca, now: now), b = try PeerConnection(config: peerConfig(audioSSRC: 0xB1, videoSSRC: nil, seed: 331), now: now)
        env.add(a, ["192.0.2.1:5000"])
        env.add(b, ["192.0.2.2:6000"])
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer(now: now), now: now), now: now)
        XCTAssertTrue(env.run(for: .seconds(5)) { env.gatheringDone(0) && env.connected(0) })
        XCTAssertTrue(env.trickled[0].isEmpty)
        XCTAssertTrue(a.transport?.ice.serverReflexiveCandidates.isEmpty == true)
    }

    func testLANFilterSignalsNoPrivateAddressYetConnectsFromTheSameSockets() throws {
        let (env, offer, answer) = try natedPair(seed: 340, stun: [Self.stun], filterLAN: true)
        XCTAssertTrue(env.run(for: .seconds(15)) { env.connected(0) && env.connected(1) })
        for sdp in [offer, answer] {
            XCTAssertFalse(sdp.contains("10.0."), "a private address was signalled:\n\(sdp)")
            XCTAssertFalse(sdp.contains("a=candidate"), "only host candidates exist at description time, all private")
        }
        for t in env.trickled {
            XCTAssertEqual(t.map(\.kind), [.srflx])
            // Nor through the related address: it is 0.0.0.0:0 (RFC 8839).
            XCTAssertEqual(t.first?.relatedAddress, TransportAddress("0.0.0.0:0"))
            XCTAssertFalse(t.contains { $0.description.contains("10.0.") }, "\(t)")
        }
        // The srflx's base, the unsignalled host socket, is what media leaves from.
        XCTAssertEqual(env.peers[0].pc.transport?.ice.selectedPair?.local.address, TransportAddress("10.0.1.2:5000"))
        XCTAssertFalse(env.peers[0].pc.transport?.ice.candidatesToSignal.contains { $0.address.ip.isLAN } ?? true)
        sendVideo(env.peers[1].pc, ssrc: 0xB2, count: 10, env: env)
        XCTAssertTrue(env.run(for: .seconds(1)) { env.rtpCount(0) == 10 })
    }

    func testLANFilterKeepsPublicHostCandidates() throws {
        let env = NATedPeerConnections(seed: 350)
        var c = peerConfig(audioSSRC: 0xA1, videoSSRC: nil, seed: 350)
        c.filterOutLanCandidates = true
        let a = try PeerConnection(config: c, now: env.clock.now())
        env.add(a, ["192.168.1.20:5000", "192.0.2.1:5001", "[fe80::1]:5002", "[2001:db8::1]:5003"])
        let offer = try a.createOffer(now: env.clock.now())
        // The transport's candidates (every bundled section carries the same ones).
        let candidates = Set(offer.split(separator: "\r\n").filter { $0.hasPrefix("a=candidate") })
        XCTAssertEqual(candidates.count, 2)
        XCTAssertTrue(candidates.contains { $0.contains("192.0.2.1 5001") })
        XCTAssertTrue(candidates.contains { $0.contains("2001:db8::1 5003") })
    }

    func testTURNAllocationMappedAddressIsAServerReflexiveCandidate() throws {
        let host = TransportAddress("10.0.0.1:5000")!, turnServer = TransportAddress("203.0.113.20:3478")!
        let ice = ICEAgent(config: ICEConfig(role: .controlling, localUfrag: "loca", localPwd: "local-password-0123456789", tieBreaker: 1, seed: 1))
        ice.addLocalCandidate(host)
        let t = MediaTransport(ice: ice, dtls: try DTLSEndpoint(role: .client, certificate: try DTLSCertificate()))
        let client = TURNClient(config: .init(server: turnServer, username: "u", password: "p"))
        t.addTURN(client, socket: host, now: .zero)
        let allocate = try STUNMessage.parse(XCTUnwrap(t.pollTransmit()).bytes)
        var ok = STUNMessage(method: .allocate, messageClass: .success, transactionID: allocate.transactionID)
        let relayed = TransportAddress("203.0.113.20:50000")!, mapped = TransportAddress("198.51.100.1:5000")!
        ok.attributes = [.xorRelayedAddress(relayed), .xorMappedAddress(mapped), .lifetime(600)]
        t.handleReceive(ok.encode(), from: turnServer, local: host, now: .zero)
        var candidates: [SDPCandidate] = []
        while let e = t.pollEvent() {
            if case .localCandidate(let c) = e { candidates.append(c) }
            if case .ice(.localCandidate(let c)) = e { candidates.append(c) }
        }
        XCTAssertEqual(candidates.map(\.kind), [.relay, .srflx])
        XCTAssertEqual(candidates.last?.address, mapped)
        XCTAssertEqual(candidates.last?.relatedAddress, host)
    }
}
