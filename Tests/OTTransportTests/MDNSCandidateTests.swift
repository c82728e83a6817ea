import OTBase
import OTWire
@testable import OTTransport
import XCTest

/// Browsers hide host candidates behind mDNS names (`<uuid>.local`). They are not resolved: the description
/// still parses, the candidate is left out, and the connection forms when the peer's checks reveal its address
/// (a peer-reflexive remote candidate).
final class MDNSCandidateTests: XCTestCase {
    static let name = "6f2c1a90-0d1f-4c6e-9b0b-1c2d3e4f5a6b.local"

    /// Replaces the address of every candidate line of `sdp` by an mDNS name.
    func hide(_ address: String, in sdp: String) -> String {
        sdp.replacingOccurrences(of: " \(address) ", with: " \(Self.name) ")
    }

    func connect(hidingOfferer: Bool, seed: UInt64) throws {
        let env = EmulatedPeerConnections(seed: seed, conditions: LinkConditions(delay: .milliseconds(15), jitter: .milliseconds(3)))
        let now = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xA2, seed: seed), now: now)
        let b = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xB2, seed: seed + 1), now: now)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        var offer = try a.createOffer(now: now)
        if hidingOfferer { offer = hide("10.0.0.1", in: offer) }
        var answer = try b.createAnswer(toOffer: offer, now: now)
        if !hidingOfferer { answer = hide("10.0.0.2", in: answer) }
        try a.setRemoteAnswer(answer, now: now)
        let (hidden, seeing) = hidingOfferer ? (a, b) : (b, a)
        XCTAssertEqual(seeing.transport?.ice.remoteCandidates.count, 0, "the mDNS candidate was left out")
        XCTAssertTrue(env.run(for: .seconds(10)) { env.connected(0) && env.connected(1) })
        let remote = try XCTUnwrap(seeing.selectedCandidatePair?.remote)
        XCTAssertEqual(remote.kind, .prflx)
        XCTAssertEqual(remote.address, hidden.selectedCandidatePair?.base)
        var p = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 0xA2, payload: [1, 2, 3][...]).serialized()
        a.sendRTP(&p, now: env.clock.now())
        var q = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 0xB2, payload: [4, 5, 6][...]).serialized()
        b.sendRTP(&q, now: env.clock.now())
        env.run(for: .milliseconds(500))
        XCTAssertEqual(env.takeRTP(1).count, 1)
        XCTAssertEqual(env.takeRTP(0).count, 1)
    }

    func testHiddenOffererIsFoundAsPeerReflexive() throws { try connect(hidingOfferer: true, seed: 600) }

    /// The router's case (routed sessions): an ICE-lite connection on the shared socket never sends checks, so it can
    /// only learn the browser from the browser's checks; over real loopback sockets.
    func testICELiteRouterConnectionLearnsAHiddenBrowserFromItsChecks() throws {
        let endpoint = try MediaEndpoint()
        defer { endpoint.stop() }
        let lc = EventLog(), ls = EventLog()
        let video = { (ssrc: UInt32) in PeerConnectionConfig(audio: false, videoTrack: SDPLocalTrack(ssrc: ssrc, streamID: "s", trackID: "v", cname: "c")) }
        let client = try PeerConnectionDriver(config: video(0xA2), handler: lc.handler)
        let server = try endpoint.makePeerConnection(config: video(0xB2), handler: ls.handler)
        defer { client.close(); server.close() }
        let offer = hide("127.0.0.1", in: try client.createOffer())
        XCTAssertTrue(offer.contains(Self.name))
        try client.setRemoteAnswer(try server.createAnswer(toOffer: offer))
        XCTAssertEqual(server.negotiated?.remoteCandidates, [])
        XCTAssertTrue(LoopbackPeer.wait { lc.connected && ls.connected })
        XCTAssertEqual(server.selectedCandidatePair?.remote.kind, .prflx)
        var p = testRTP(ssrc: 0xA2, seq: 1, ts: 1, payload: [1, 2, 3]), q = testRTP(ssrc: 0xB2, seq: 1, ts: 1, payload: [4, 5, 6])
        XCTAssertTrue(client.sendRTP(&p))
        XCTAssertTrue(server.sendRTP(&q))
        XCTAssertTrue(LoopbackPeer.wait { ls.rtp(ssrc: 0xA2).count == 1 && lc.rtp(ssrc: 0xB2).count == 1 })
    }
    func testHiddenAnswererIsFoundAsPeerReflexive() throws { try connect(hidingOfferer: false, seed: 610) }

    func testTrickledMDNSCandidatesAreRecognised() {
        XCTAssertTrue(SDPCandidate.isMDNS("candidate:1 1 udp 2122260223 \(Self.name) 54321 typ host generation 0"))
        XCTAssertTrue(SDPCandidate.isMDNS("a=candidate:1 1 UDP 2122260223 ABC.LOCAL 1 typ host"))
        XCTAssertFalse(SDPCandidate.isMDNS("candidate:1 1 udp 2122260223 192.0.2.1 54321 typ host"))
        XCTAssertFalse(SDPCandidate.isMDNS("candidate:1 1 udp"))
        XCTAssertThrowsError(try SDPCandidate(parsing: "candidate:1 1 udp 2122260223 \(Self.name) 54321 typ host"))
    }
}
