import Foundation
import OTBase
import OTWire
@testable import OTTransport
import OTTestSupport
import Synchronization
import XCTest


/// A TURN client alone on a driver socket, its events collected.
final class TURNHarness: @unchecked Sendable {
    let lock = NSLock()
    let client: TURNClient
    let driver: UDPDriver
    let socket: TransportAddress
    var events: [TURNEvent] = []
    var closed = false

    init(server: TransportAddress, password: String = Coturn.password, tcp: Bool = false) throws {
        var cfg = TURNClient.Config(server: server, username: Coturn.user, password: password)
        cfg.seed = UInt64.random(in: 1 ... .max)
        cfg.transport = tcp ? .tcp : .udp
        client = TURNClient(config: cfg)
        let box = Mutex<TURNHarness?>(nil)
        driver = try UDPDriver { e in box.withLock { $0 }?.handle(e) }
        socket = tcp ? try driver.connectTCP(to: server) : try driver.bind(TransportAddress("127.0.0.1:0")!)
        box.withLock { $0 = self }
    }

    func handle(_ e: UDPDriver.Event) {
        with { c in
            switch e {
            case .datagram(let b, _, _, let now): c.handleReceive(b, now: now)
            case .timer(let now): c.handleTimeout(now: now)
            case .closed(_, let now, _): closed = true; c.handleTimeout(now: now)
            case .stopped: break
            }
        }
    }

    func with<R>(_ body: (TURNClient) -> R) -> R {
        lock.lock(); defer { lock.unlock() }
        let r = body(client)
        while let b = client.pollTransmit() { driver.send(b, from: socket, to: client.config.server) }
        while let e = client.pollEvent() { events.append(e) }
        driver.setDeadline(client.pollTimeout())
        return r
    }

    func has(_ p: (TURNEvent) -> Bool) -> Bool { lock.lock(); defer { lock.unlock() }; return events.contains(where: p) }
}

final class TURNCoturnTests: XCTestCase {
    func testAllocatePermissionSendIndicationAndChannelDataAgainstCoturn() throws {
        try allocateAndRelay(tcp: false)
    }

    func testTURNOverTCPAgainstCoturn() throws {
        try allocateAndRelay(tcp: true)
    }

    func allocateAndRelay(tcp: Bool) throws {
        let server = try Coturn()
        let turn = try TURNHarness(server: server.address, tcp: tcp)
        defer { turn.driver.stop() }
        turn.driver.start()
        turn.with { $0.start(now: MonotonicClock.now()) }
        XCTAssertTrue(LoopbackPeer.wait { turn.has { if case .allocated = $0 { true } else { false } } }, "\(turn.events)")
        let relayed = try XCTUnwrap(turn.with { $0.relayedAddress })
        XCTAssertEqual(relayed.ip, .v4(0x7F00_0001))
        XCTAssertNotEqual(relayed.port, server.port)

        // A plain UDP peer on loopback.
        let peerGot = Mutex<[([UInt8], TransportAddress)]>([])
        let peer = try UDPDriver { e in if case .datagram(let b, let from, _, _) = e { peerGot.withLock { $0.append((b, from)) } } }
        defer { peer.stop() }
        let peerAddr = try peer.bind(TransportAddress("127.0.0.1:0")!)
        peer.start()

        // Client -> peer: the first send waits for the permission, then goes as a Send indication or ChannelData.
        turn.with { $0.send(Array("via relay 1".utf8), to: peerAddr, now: MonotonicClock.now()) }
        XCTAssertTrue(LoopbackPeer.wait { peerGot.withLock { $0.contains { $0.0 == Array("via relay 1".utf8) && $0.1 == relayed } } })
        // Peer -> relayed address -> client as Data indication or ChannelData.
        peer.send(Array("back 1".utf8), from: peerAddr, to: relayed)
        XCTAssertTrue(LoopbackPeer.wait { turn.has { $0 == .data(from: peerAddr, Array("back 1".utf8)) } })
        // Once the channel is bound, traffic uses ChannelData both ways.
        XCTAssertTrue(LoopbackPeer.wait { turn.with { $0.boundChannel(to: peerAddr) } != nil })
        XCTAssertEqual(turn.with { $0.boundChannel(to: peerAddr) }, 0x4000)
        turn.with { $0.send(Array("via channel".utf8), to: peerAddr, now: MonotonicClock.now()) }
        XCTAssertTrue(LoopbackPeer.wait { peerGot.withLock { $0.contains { $0.0 == Array("via channel".utf8) } } })
        peer.send(Array("back 2".utf8), from: peerAddr, to: relayed)
        XCTAssertTrue(LoopbackPeer.wait { turn.has { $0 == .data(from: peerAddr, Array("back 2".utf8)) } })
        // Odd-sized ChannelData (padding over TCP) both ways.
        turn.with { $0.send([1, 2, 3, 4, 5], to: peerAddr, now: MonotonicClock.now()) }
        XCTAssertTrue(LoopbackPeer.wait { peerGot.withLock { $0.contains { $0.0 == [1, 2, 3, 4, 5] } } })
        peer.send([9, 8, 7], from: peerAddr, to: relayed)
        peer.send([6], from: peerAddr, to: relayed)
        XCTAssertTrue(LoopbackPeer.wait { turn.has { $0 == .data(from: peerAddr, [9, 8, 7]) } && turn.has { $0 == .data(from: peerAddr, [6]) } })
        XCTAssertFalse(turn.with { _ in turn.closed })
        turn.with { $0.close(now: MonotonicClock.now()) }
    }

    func testWrongPasswordFailsWithAuthorizationError() throws {
        let server = try Coturn()
        let turn = try TURNHarness(server: server.address, password: "wrong")
        defer { turn.driver.stop() }
        turn.driver.start()
        turn.with { $0.start(now: MonotonicClock.now()) }
        XCTAssertTrue(LoopbackPeer.wait { turn.has { if case .failed = $0 { true } else { false } } }, "\(turn.events)")
        guard case .failed(let e)? = turn.with({ _ in turn.events.last }) else { return XCTFail() }
        XCTAssertEqual(e.code, .authorizationFailure)
    }

    /// Relay-only policy on both sides: the selected pair must be relay/relay, DTLS completes, media flows both ways.
    func testTwoRelayOnlyPeersConnectThroughCoturn() throws {
        let server = try Coturn()
        let a = try LoopbackPeer(), b = try LoopbackPeer()
        defer { a.driver.stop(); b.driver.stop() }
        let certA = try DTLSCertificate(), certB = try DTLSCertificate()
        func agent(_ role: ICERole, _ name: String, seed: UInt64) -> ICEAgent {
            var c = ICEConfig(role: role, localUfrag: "\(name)ufrag", localPwd: "\(name)-password-0123456789", tieBreaker: seed, seed: seed)
            c.relayOnly = true
            return ICEAgent(config: c)
        }
        let iceA = agent(.controlling, "a", seed: 1), iceB = agent(.controlled, "b", seed: 2)
        XCTAssertNil(iceA.addLocalCandidate(a.address), "relay-only policy drops host candidates")
        let tA = MediaTransport(ice: iceA, dtls: try DTLSEndpoint(role: .client, certificate: certA, remoteFingerprint: certB.fingerprint))
        let tB = MediaTransport(ice: iceB, dtls: try DTLSEndpoint(role: .server, certificate: certB, remoteFingerprint: certA.fingerprint))
        a.install(tA); b.install(tB)
        for (p, t) in [(a, tA), (b, tB)] {
            p.withTransport { _ in
                t.addTURN(TURNClient(config: .init(server: server.address, username: Coturn.user, password: Coturn.password)), socket: p.address, now: MonotonicClock.now())
            }
            p.handle(.timer(now: MonotonicClock.now()))
        }
        func relayCandidate(_ p: LoopbackPeer) -> SDPCandidate? {
            p.events.withLock { $0.compactMap { if case .localCandidate(let c) = $0 { c } else { nil } }.first }
        }
        XCTAssertTrue(LoopbackPeer.wait { relayCandidate(a) != nil && relayCandidate(b) != nil }, "\(a.events.withLock { $0 })")
        let ca = try XCTUnwrap(relayCandidate(a)), cb = try XCTUnwrap(relayCandidate(b))
        XCTAssertEqual(ca.kind, .relay)
        // Signalling: credentials and the trickled relay candidates.
        a.withTransport { t in
            t?.ice.setRemoteCredentials(ufrag: "bufrag", pwd: "b-password-0123456789")
            t?.addRemoteCandidate(cb, now: MonotonicClock.now())
        }
        b.withTransport { t in
            t?.ice.setRemoteCredentials(ufrag: "aufrag", pwd: "a-password-0123456789")
            t?.addRemoteCandidate(ca, now: MonotonicClock.now())
        }
        a.handle(.timer(now: MonotonicClock.now())); b.handle(.timer(now: MonotonicClock.now()))
        XCTAssertTrue(LoopbackPeer.wait(seconds: 20) { a.has(isDTLSConnected) && b.has(isDTLSConnected) },
                      "a: \(a.events.withLock { $0 }) b: \(b.events.withLock { $0 })")
        let pairA = try XCTUnwrap(a.withTransport { $0?.ice.selectedPair })
        XCTAssertEqual(pairA.local.kind, .relay)
        XCTAssertEqual(pairA.remote.kind, .relay)
        XCTAssertEqual(pairA.remote.address, cb.address)
        XCTAssertEqual(b.withTransport { $0?.ice.selectedPair?.local.kind }, .relay)

        let m1: [UInt8] = [0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7, 42]
        let m2: [UInt8] = [0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 8, 43]
        a.withTransport { _ = $0?.sendMedia(m1) }
        b.withTransport { _ = $0?.sendMedia(m2) }
        a.handle(.timer(now: MonotonicClock.now())); b.handle(.timer(now: MonotonicClock.now()))
        XCTAssertTrue(LoopbackPeer.wait { b.has { $0 == .srtp(m1, rtcp: false) } && a.has { $0 == .srtp(m2, rtcp: false) } })
    }
}
