import Foundation
import OTBase
import OTWire
@testable import OTTransport
import Synchronization
import XCTest

/// A peer connection on real loopback sockets: one UDPDriver (one IO thread) drives a MediaTransport.
final class LoopbackPeer: @unchecked Sendable {
    let driver: UDPDriver
    private let lock = NSLock()
    private var transportStorage: MediaTransport?
    func withTransport<R>(_ body: (MediaTransport?) -> R) -> R { lock.lock(); defer { lock.unlock() }; return body(transportStorage) }
    let events = Mutex<[MediaTransportEvent]>([])
    let address: TransportAddress

    init() throws {
        let box = Mutex<LoopbackPeer?>(nil)
        driver = try UDPDriver { event in box.withLock { $0 }?.handle(event) }
        address = try driver.bind(TransportAddress("127.0.0.1:0")!)
        box.withLock { $0 = self }
    }

    func handle(_ event: UDPDriver.Event) {
        withTransport { t in
            guard let t else { return }
            switch event {
            case .datagram(let bytes, let from, let local, let now): t.handleReceive(bytes, from: from, local: local, now: now)
            case .timer(let now), .closed(_, let now, _): t.handleTimeout(now: now)
            case .stopped: return
            }
            while let x = t.pollTransmit() { driver.send(x.bytes, from: x.source, to: x.destination) }
            while let e = t.pollEvent() { events.withLock { $0.append(e) } }
            driver.setDeadline(t.pollTimeout())
        }
    }

    func install(_ t: MediaTransport) {
        lock.lock(); transportStorage = t; lock.unlock()
        driver.start()
        driver.wake()
    }

    func has(_ predicate: (MediaTransportEvent) -> Bool) -> Bool { events.withLock { $0.contains(where: predicate) } }

    /// Waits (bounded) for a condition; tests assert the outcome, never the time taken.
    static func wait(seconds: Double = 10, _ cond: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end { if cond() { return true }; usleep(2000) }
        return cond()
    }
}

func isDTLSConnected(_ e: MediaTransportEvent) -> Bool { if case .dtls(.connected) = e { true } else { false } }

final class LoopbackTransportTests: XCTestCase {
    /// Two loopback peers negotiated through SDP text (A offers, B answers), started; returns when both are set up
    /// to connect, with the time the offer was created.
    static func startPair(_ a: LoopbackPeer, _ b: LoopbackPeer) throws -> Instant {
        let certA = try DTLSCertificate(), certB = try DTLSCertificate()
        var rng = SystemRandomNumberGenerator()
        let credA = ICEConfig.randomCredentials(using: &rng), credB = ICEConfig.randomCredentials(using: &rng)
        let start = MonotonicClock.now()

        // Offer from A (ICE controlling), answer from B.
        let iceA = ICEAgent(config: ICEConfig(role: .controlling, localUfrag: credA.ufrag, localPwd: credA.pwd, tieBreaker: .random(in: 0 ... .max), seed: 1))
        let candA = iceA.addLocalCandidate(a.address)
        var localA = SDPLocalParameters(iceUfrag: credA.ufrag, icePwd: credA.pwd, fingerprint: certA.fingerprint)
        localA.candidates = candA.map { [$0] } ?? []
        localA.audioTrack = SDPLocalTrack(ssrc: 11, streamID: "a", trackID: "a-audio", cname: "a")
        localA.videoTrack = SDPLocalTrack(ssrc: 12, rtxSSRC: 13, streamID: "a", trackID: "a-video", cname: "a")
        let offer = SDPNegotiation.offer(localA).serialized()

        let iceB = ICEAgent(config: ICEConfig(role: .controlled, localUfrag: credB.ufrag, localPwd: credB.pwd, tieBreaker: .random(in: 0 ... .max), seed: 2))
        let candB = iceB.addLocalCandidate(b.address)
        var localB = SDPLocalParameters(iceUfrag: credB.ufrag, icePwd: credB.pwd, fingerprint: certB.fingerprint)
        localB.candidates = candB.map { [$0] } ?? []
        let (answerSD, negB) = try SDPNegotiation.answer(to: try SessionDescription.parse(offer), local: localB)
        let answer = answerSD.serialized()
        iceB.setRemoteCredentials(ufrag: negB.remoteIceUfrag, pwd: negB.remoteIcePwd)
        negB.remoteCandidates.forEach(iceB.addRemoteCandidate)
        let dtlsB = try DTLSEndpoint(role: negB.localIsDTLSClient ? .client : .server, certificate: certB, remoteFingerprint: negB.remoteFingerprint)
        b.install(MediaTransport(ice: iceB, dtls: dtlsB))

        let negA = try SDPNegotiation.accept(answer: try SessionDescription.parse(answer), offer: try SessionDescription.parse(offer))
        iceA.setRemoteCredentials(ufrag: negA.remoteIceUfrag, pwd: negA.remoteIcePwd)
        negA.remoteCandidates.forEach(iceA.addRemoteCandidate)
        let dtlsA = try DTLSEndpoint(role: negA.localIsDTLSClient ? .client : .server, certificate: certA, remoteFingerprint: negA.remoteFingerprint)
        a.install(MediaTransport(ice: iceA, dtls: dtlsA))
        return start
    }

    func testTwoPeersConnectOverLoopbackThroughSDP() throws {
        let a = try LoopbackPeer(), b = try LoopbackPeer()
        defer { a.driver.stop(); b.driver.stop() }
        let start = try Self.startPair(a, b)
        XCTAssertEqual(a.withTransport { $0?.dtls.role }, .server)
        XCTAssertEqual(b.withTransport { $0?.dtls.role }, .client)

        XCTAssertTrue(LoopbackPeer.wait { a.has(isDTLSConnected) && b.has(isDTLSConnected) })
        let setup = MonotonicClock.now() - start
        print("LOOPBACK_SETUP offer->dtls-connected ms: \(Double(setup.microseconds) / 1000)")

        // Keys agree; a protected-media-shaped datagram travels on the selected pair.
        let ka = a.withTransport { $0?.dtls.keyingMaterial }, kb = b.withTransport { $0?.dtls.keyingMaterial }
        XCTAssertEqual(ka?.localKey, kb?.remoteKey)
        XCTAssertNotNil(ka)
        let media: [UInt8] = [0x80, 111, 0, 1, 0, 0, 0, 0, 0, 0, 0, 11, 1, 2, 3]
        a.withTransport { _ = $0?.sendMedia(media) }
        a.driver.wake()
        XCTAssertTrue(LoopbackPeer.wait { b.has { $0 == .srtp(media, rtcp: false) } })
        XCTAssertEqual(a.withTransport { $0?.ice.selectedPair?.remote.address }, b.address)
    }

    func testHostAddressesAndLANFilter() {
        let all = UDPDriver.hostAddresses(includeLoopback: true)
        XCTAssertTrue(all.contains(.v4(0x7F00_0001)))
        let noLAN = UDPDriver.hostAddresses(filterLAN: true, includeLoopback: true)
        XCTAssertFalse(noLAN.contains { $0.isLAN })
        XCTAssertEqual(UDPDriver.filter([IPAddress("10.0.0.1")!, IPAddress("8.8.8.8")!], filterLAN: true), [IPAddress("8.8.8.8")!])
    }

    func testDriverDeliversDatagramsAndTimers() throws {
        let got = Mutex<[String]>([])
        let d = try UDPDriver { e in
            switch e {
            case .datagram(let bytes, _, _, _): got.withLock { $0.append("dgram \(bytes)") }
            case .timer: got.withLock { $0.append("timer") }
            case .closed: got.withLock { $0.append("closed") }
            case .stopped: break
            }
        }
        defer { d.stop() }
        let addr = try d.bind(TransportAddress("127.0.0.1:0")!)
        XCTAssertNotEqual(addr.port, 0)
        d.start()
        d.setDeadline(MonotonicClock.now() + .milliseconds(20))
        XCTAssertTrue(d.send([1, 2, 3], from: addr, to: addr))
        XCTAssertTrue(LoopbackPeer.wait { got.withLock { $0.contains("dgram [1, 2, 3]") && $0.contains("timer") } })
        XCTAssertFalse(d.send([1], from: TransportAddress("127.0.0.1:1")!, to: addr))
    }
}
