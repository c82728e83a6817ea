import Foundation
import OTBase
import OTWire
@testable import OTTransport
import Synchronization
import OTTestSupport
import XCTest

/// Collects a driver's events (delivered on its IO thread).
final class EventLog: Sendable {
    let events = Mutex<[PeerConnectionEvent]>([])
    var handler: PeerConnectionDriver.Handler { { [self] e in events.withLock { $0.append(e) } } }
    var connected: Bool { events.withLock { $0.contains { if case .connected = $0 { true } else { false } } } }
    func rtp(ssrc: UInt32) -> [[UInt8]] {
        events.withLock { $0.compactMap { if case .rtp(let r) = $0, r.packet.ssrc == ssrc { r.bytes } else { nil } } }
    }
    func contains(_ e: PeerConnectionEvent) -> Bool { events.withLock { $0.contains(e) } }
}

final class PeerConnectionDriverTests: XCTestCase {
    func sendBurst(_ d: PeerConnectionDriver, ssrc: UInt32, count: Int, firstSeq: UInt16 = 0) {
        for i in 0..<count {
            var p = testRTP(ssrc: ssrc, seq: firstSeq &+ UInt16(i), ts: UInt32(i) * 3000, payload: Array(repeating: UInt8(i & 0xFF), count: 100))
            XCTAssertTrue(d.sendRTP(&p))
        }
    }

    func testTwoDriversOnLoopbackUDP() throws {
        let logA = EventLog(), logB = EventLog()
        let a = try PeerConnectionDriver(config: PeerConnectionConfig(audioTrack: SDPLocalTrack(ssrc: 0xA1, streamID: "a", trackID: "a1", cname: "a"),
                                                                      videoTrack: SDPLocalTrack(ssrc: 0xA2, streamID: "a", trackID: "a2", cname: "a")),
                                         handler: logA.handler)
        let b = try PeerConnectionDriver(config: PeerConnectionConfig(videoTrack: SDPLocalTrack(ssrc: 0xB2, streamID: "b", trackID: "b2", cname: "b")),
                                         handler: logB.handler)
        defer { a.close(); b.close() }
        XCTAssertEqual(a.localAddresses.first?.ip, .v4(0x7F00_0001))
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer()))
        XCTAssertTrue(LoopbackPeer.wait { logA.connected && logB.connected })
        sendBurst(a, ssrc: 0xA2, count: 50)
        sendBurst(b, ssrc: 0xB2, count: 50, firstSeq: 65500)
        XCTAssertTrue(LoopbackPeer.wait { logB.rtp(ssrc: 0xA2).count == 50 && logA.rtp(ssrc: 0xB2).count == 50 })
        XCTAssertEqual(logB.rtp(ssrc: 0xA2).compactMap { testRTPFields($0)?.seq }.sorted(), (0..<50).map { UInt16($0) })
        b.requestKeyframe(ssrc: 0xA2)
        XCTAssertTrue(LoopbackPeer.wait { logA.contains(.keyframeRequested(ssrc: 0xA2)) })
    }

    func testFullPeerConnectionAgainstICELiteOnSharedEndpoint() throws {
        let endpoint = try MediaEndpoint()
        defer { endpoint.stop() }
        // Two clients, each with an ICE-lite counterpart on the one server socket.
        var clients: [(PeerConnectionDriver, EventLog, PeerConnectionDriver, EventLog, UInt32)] = []
        for i in 0..<2 {
            let ssrc = UInt32(0x100 + i)
            let cl = EventLog(), sl = EventLog()
            let client = try PeerConnectionDriver(config: PeerConnectionConfig(video: true, videoTrack: SDPLocalTrack(ssrc: ssrc, streamID: "c", trackID: "v", cname: "c")),
                                                  handler: cl.handler)
            let server = try endpoint.makePeerConnection(config: PeerConnectionConfig(), handler: sl.handler)
            let answer = try server.createAnswer(toOffer: try client.createOffer())
            XCTAssertTrue(answer.contains("a=ice-lite"))
            XCTAssertTrue(answer.contains("\(endpoint.address.port) typ host"))
            try client.setRemoteAnswer(answer)
            clients.append((client, cl, server, sl, ssrc))
        }
        defer { for c in clients { c.0.close(); c.2.close() } }
        XCTAssertEqual(endpoint.connectionCount, 2)
        XCTAssertTrue(LoopbackPeer.wait { clients.allSatisfy { $0.1.connected && $0.3.connected } })
        for c in clients { sendBurst(c.0, ssrc: c.4, count: 30) }
        // Each server connection gets its own client's packets only.
        XCTAssertTrue(LoopbackPeer.wait { clients.allSatisfy { $0.3.rtp(ssrc: $0.4).count == 30 } })
        XCTAssertEqual(clients[0].3.rtp(ssrc: clients[1].4).count, 0)
        // And the server side sends back on the shared socket.
        var p = testRTP(ssrc: 0x999, seq: 1, ts: 1, payload: [9, 9, 9])
        XCTAssertTrue(clients[1].2.sendRTP(&p))
        XCTAssertTrue(LoopbackPeer.wait { clients[1].1.rtp(ssrc: 0x999).count == 1 })
        clients[0].2.close()
        XCTAssertEqual(endpoint.connectionCount, 1)
    }

    func testICERestartAgainstICELiteOnSharedEndpoint() throws {
        let endpoint = try MediaEndpoint()
        defer { endpoint.stop() }
        let cl = EventLog(), sl = EventLog()
        let client = try PeerConnectionDriver(config: PeerConnectionConfig(videoTrack: SDPLocalTrack(ssrc: 0x77, streamID: "c", trackID: "v", cname: "c")),
                                              handler: cl.handler)
        let server = try endpoint.makePeerConnection(config: PeerConnectionConfig(), handler: sl.handler)
        defer { client.close(); server.close() }
        try client.setRemoteAnswer(try server.createAnswer(toOffer: try client.createOffer()))
        XCTAssertTrue(LoopbackPeer.wait { cl.connected && sl.connected })
        let oldUfrag = server.localUfrag
        // The lite side answers the restart with new credentials; the shared socket routes its STUN by the new ufrag.
        try client.setRemoteAnswer(try server.createAnswer(toOffer: try client.createOffer(iceRestart: true)))
        XCTAssertNotEqual(server.localUfrag, oldUfrag)
        XCTAssertTrue(cl.contains(.iceStateChanged(.checking)))
        XCTAssertTrue(LoopbackPeer.wait { client.iceState.isConnected && cl.events.withLock { $0.last(where: { if case .iceStateChanged = $0 { true } else { false } }) } != .iceStateChanged(.checking) })
        sendBurst(client, ssrc: 0x77, count: 10)
        XCTAssertTrue(LoopbackPeer.wait { sl.rtp(ssrc: 0x77).count == 10 })
        XCTAssertEqual(cl.events.withLock { $0.filter { if case .connected = $0 { true } else { false } }.count }, 1)
    }

    func testClosedDriversReleaseTheirSockets() throws {
        func openFDs() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
        func cycle() throws {
            let logA = EventLog(), logB = EventLog()
            let endpoint = try MediaEndpoint()
            let a = try PeerConnectionDriver(config: PeerConnectionConfig(audioTrack: SDPLocalTrack(ssrc: 1, streamID: "a", trackID: "a", cname: "a")), handler: logA.handler)
            let b = try endpoint.makePeerConnection(config: PeerConnectionConfig(), handler: logB.handler)
            try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer()))
            XCTAssertTrue(LoopbackPeer.wait { logA.connected && logB.connected })
            a.close(); b.close(); endpoint.stop()
        }
        try cycle()  // warm-up: lazily created process-wide descriptors
        usleep(100_000)
        let before = openFDs()
        for _ in 0..<10 { try cycle() }
        XCTAssertTrue(LoopbackPeer.wait { openFDs() <= before }, "descriptors: \(before) before, \(openFDs()) after 10 cycles")
    }

    func testRelayOnlyThroughCoturn() throws {
        let turn = try Coturn()
        let logA = EventLog(), logB = EventLog()
        var config = PeerConnectionConfig(audio: false, video: true, videoTrack: SDPLocalTrack(ssrc: 0xA2, streamID: "a", trackID: "v", cname: "a"))
        config.relayOnly = true
        let a = try PeerConnectionDriver(config: config, handler: logA.handler)
        config.videoTrack = SDPLocalTrack(ssrc: 0xB2, streamID: "b", trackID: "v", cname: "b")
        let b = try PeerConnectionDriver(config: config, handler: logB.handler)
        defer { a.close(); b.close() }
        let server = TURNClient.Config(server: turn.address, username: Coturn.user, password: Coturn.password)
        a.addTURN(server, socket: try XCTUnwrap(a.localAddresses.first))
        b.addTURN(server, socket: try XCTUnwrap(b.localAddresses.first))
        let offer = try a.createOffer()
        XCTAssertFalse(offer.contains("typ host"), "relay-only: no host candidate")
        try a.setRemoteAnswer(try b.createAnswer(toOffer: offer))
        // Trickle the relayed candidates from this thread (handlers must not call into the other connection).
        var forwarded: Set<String> = []
        func relayed(_ log: EventLog) -> [SDPCandidate] {
            log.events.withLock { $0.compactMap { if case .localCandidate(let c) = $0 { c } else { nil } } }
        }
        XCTAssertTrue(LoopbackPeer.wait(seconds: 20) {
            for c in relayed(logA) where forwarded.insert("a\(c)").inserted { b.addRemoteCandidate(c) }
            for c in relayed(logB) where forwarded.insert("b\(c)").inserted { a.addRemoteCandidate(c) }
            return logA.connected && logB.connected
        }, "A: \(logA.events.withLock { $0 }) B: \(logB.events.withLock { $0 })")
        let pair = logA.events.withLock { $0.compactMap { if case .connected(let l, let r) = $0 { (l, r) } else { nil } }.first }
        XCTAssertEqual(pair?.0.kind, .relay)
        XCTAssertEqual(pair?.1.kind, .relay)
        sendBurst(a, ssrc: 0xA2, count: 20)
        sendBurst(b, ssrc: 0xB2, count: 20)
        XCTAssertTrue(LoopbackPeer.wait { logB.rtp(ssrc: 0xA2).count == 20 && logA.rtp(ssrc: 0xB2).count == 20 })
    }
}
