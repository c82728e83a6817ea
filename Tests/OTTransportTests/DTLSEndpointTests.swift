import OTBase
import OTWire
@testable import OTTransport
import XCTest

final class DTLSEndpointTests: XCTestCase {
    static let certA = try? DTLSCertificate(commonName: "a")
    static let certB = try? DTLSCertificate(commonName: "b")

    struct Setup {
        var pair: EmulatedPair
        let client: DTLSEndpoint
        let server: DTLSEndpoint
    }

    func setup(loss: Double = 0, reorder: Double = 0, seed: UInt64, mtu: Int = 1200, serverExpects: SDPFingerprint? = nil,
               clientProfiles: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmHmacSha1_80]) throws -> Setup {
        let ca = try XCTUnwrap(Self.certA), cb = try XCTUnwrap(Self.certB)
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: seed)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: seed + 1)
        let client = try DTLSEndpoint(role: .client, certificate: ca, remoteFingerprint: cb.fingerprint, mtu: mtu, srtpProfiles: clientProfiles,
                                      timerMode: .virtualClock(realTimer: .milliseconds(20)))
        let server = try DTLSEndpoint(role: .server, certificate: cb, remoteFingerprint: serverExpects ?? ca.fingerprint, mtu: mtu,
                                      timerMode: .virtualClock(realTimer: .milliseconds(20)))
        a.dtls = client
        b.dtls = server
        var conditions = LinkConditions(delay: .milliseconds(15), jitter: .milliseconds(10), loss: loss, reorder: reorder)
        conditions.reorderDelay = .milliseconds(25)
        let pair = EmulatedPair(seed: seed, conditions: conditions, a: a, b: b)
        signal(a, b, now: pair.clock.now())
        return Setup(pair: pair, client: client, server: server)
    }

    func handshake(_ s: inout Setup, limit: Duration = .seconds(60)) -> Bool {
        let a = s.pair.a, b = s.pair.b
        return s.pair.run(for: limit) { a.dtlsConnected && b.dtlsConnected }
    }

    func assertKeysMatch(_ s: Setup, file: StaticString = #filePath, line: UInt = #line) {
        guard let kc = s.client.keyingMaterial, let ks = s.server.keyingMaterial else { return XCTFail("no keys", file: file, line: line) }
        XCTAssertEqual(kc.profile, ks.profile, file: file, line: line)
        XCTAssertEqual(kc.localKey, ks.remoteKey, file: file, line: line)
        XCTAssertEqual(kc.localSalt, ks.remoteSalt, file: file, line: line)
        XCTAssertEqual(kc.remoteKey, ks.localKey, file: file, line: line)
        XCTAssertNotEqual(kc.localKey, kc.remoteKey, file: file, line: line)
        XCTAssertEqual(kc.localKey.count, kc.profile.keyLength, file: file, line: line)
        XCTAssertEqual(kc.localSalt.count, kc.profile.saltLength, file: file, line: line)
    }

    func testHandshakeOverICEWithoutLossExportsSRTPKeys() throws {
        var s = try setup(seed: 100)
        XCTAssertTrue(handshake(&s))
        assertKeysMatch(s)
        XCTAssertEqual(s.client.keyingMaterial?.profile, .aeadAes128Gcm)
        // Application data both ways.
        try s.client.send(Array("hello".utf8))
        try s.server.send(Array("world".utf8))
        let a = s.pair.a, b = s.pair.b
        XCTAssertTrue(s.pair.run(for: .seconds(1)) {
            a.dtlsEvents.contains(.applicationData(Array("world".utf8))) && b.dtlsEvents.contains(.applicationData(Array("hello".utf8)))
        })
    }

    func testHandshakeCompletesWithFiveAndTwentyPercentLoss() throws {
        for (loss, seeds) in [(0.05, [110, 111, 112] as [UInt64]), (0.20, [120, 121, 122, 123, 124, 125, 126, 127])] {
            for seed in seeds {
                var s = try setup(loss: loss, reorder: 0.1, seed: seed)
                XCTAssertTrue(handshake(&s), "loss \(loss) seed \(seed)")
                assertKeysMatch(s)
            }
        }
    }

    func testLostFinalFlightIsRecovered() throws {
        var s = try setup(seed: 130)
        // Drop the server's first post-ChangeCipherSpec flight once: the client repeats its flight, the server answers again.
        var dropped = 0
        s.pair.b.dropDTLS = { d in
            if dropped == 0 && recordTypes(d).contains(20) { dropped += 1; return true }
            return false
        }
        XCTAssertTrue(handshake(&s))
        XCTAssertEqual(dropped, 1)
        assertKeysMatch(s)
    }

    /// Timer choice: a lost flight is sent again after twice the round-trip time ICE measured (libwebrtc's rule), not
    /// after RFC 6347's fixed 1 s.
    func testLostFirstFlightIsRetransmittedAfterTwiceTheICERoundTrip() throws {
        var s = try setup(seed: 140)
        var dropped = 0
        s.pair.a.dropDTLS = { _ in
            if dropped < 2 { dropped += 1; return true }
            return false
        }
        let a = s.pair.a
        XCTAssertTrue(s.pair.run(for: .seconds(5)) { a.connected })
        let started = s.pair.clock.now()
        let iceRTT = try XCTUnwrap(a.agent.roundTripTime)
        XCTAssertGreaterThanOrEqual(iceRTT, .milliseconds(30), "15 ms each way, plus jitter")
        let rto = s.client.initialRTO
        XCTAssertEqual(rto, iceRTT * 2)
        XCTAssertTrue(handshake(&s))
        XCTAssertEqual(dropped, 2)
        // Two ClientHellos lost: the third goes out after 2 + 4 RTTs of virtual time, then the handshake takes about 2 RTTs.
        let took = s.pair.clock.now() - started
        XCTAssertGreaterThanOrEqual(took, rto * 3)
        XCTAssertLessThan(took, rto * 3 + .milliseconds(300))
        XCTAssertLessThan(took, .seconds(1), "RFC 6347's 1 s + 2 s would be 3 s")
    }

    func testTimerChoiceFromTheRoundTripTime() {
        XCTAssertEqual(DTLSEndpoint.initialTimeout(forRoundTripTime: .microseconds(200)), .milliseconds(50), "loopback: the floor")
        XCTAssertEqual(DTLSEndpoint.initialTimeout(forRoundTripTime: .milliseconds(120)), .milliseconds(240))
        XCTAssertEqual(DTLSEndpoint.initialTimeout(forRoundTripTime: .seconds(4)), .seconds(3), "the cap")
    }

    /// On the wall clock the first retransmission comes after the RTT-based timeout (OpenSSL's timer, armed through
    /// `DTLS_set_timer_cb`, is due by then) and the next after twice that (OpenSSL's default would be 1 s, then 2 s).
    func testWallClockTimerStartsFromTheRoundTripTimeAndDoubles() throws {
        let client = try DTLSEndpoint(role: .client, certificate: try XCTUnwrap(Self.certA))
        client.setRoundTripTime(.milliseconds(30))
        XCTAssertEqual(client.initialRTO, .milliseconds(60))
        let start = MonotonicClock.now()
        client.start(now: start)
        XCTAssertNotNil(client.pollTransmit(), "the ClientHello")
        let first = try XCTUnwrap(client.pollTimeout()) - start
        XCTAssertGreaterThanOrEqual(first, .zero)
        XCTAssertLessThanOrEqual(first, .milliseconds(60))
        // Nobody answers: wait for the timer, then the flight goes again with the timer doubled.
        var now = MonotonicClock.now()
        while let due = client.pollTimeout(), due > now { usleep(UInt32(max(1000, (due - now).microseconds))); now = MonotonicClock.now() }
        client.handleTimeout(now: now)
        XCTAssertNotNil(client.pollTransmit(), "the ClientHello again")
        let second = try XCTUnwrap(client.pollTimeout()) - now
        XCTAssertLessThanOrEqual(second, .milliseconds(120))
        XCTAssertGreaterThan(second, .milliseconds(60), "backed off")
    }

    /// The server's final flight is lost and its media reaches the client first (the server completed on our
    /// Finished): the client sends its flight again at once, without waiting out its backed-off timer, and the server
    /// answers with its final flight again.
    func testPeerMediaBringsTheLostFinalFlightBackAtOnce() throws {
        let client = try DTLSEndpoint(role: .client, certificate: try XCTUnwrap(Self.certA), remoteFingerprint: try XCTUnwrap(Self.certB).fingerprint,
                                      timerMode: .virtualClock(realTimer: .milliseconds(20)))
        let server = try DTLSEndpoint(role: .server, certificate: try XCTUnwrap(Self.certB), remoteFingerprint: try XCTUnwrap(Self.certA).fingerprint,
                                      timerMode: .virtualClock(realTimer: .milliseconds(20)))
        var now = Instant(micros: 1_000_000)
        // Loss-free exchange, except every datagram of the server's once it is connected (its final flight) is lost
        // while `dropServerFinal` is set; `exchange` delivers everything sent, 1 ms per hop, and runs due timers.
        var dropServerFinal = true, serverFinalsLost = 0
        func exchange(until deadline: Instant) {
            while now < deadline && !client.isConnected {
                while let d = client.pollTransmit() { server.handleReceive(d, now: now) }
                while let d = server.pollTransmit() {
                    if dropServerFinal && server.isConnected { serverFinalsLost += 1; continue }
                    client.handleReceive(d, now: now)
                }
                now = now + .milliseconds(1)
                client.handleTimeout(now: now)
                server.handleTimeout(now: now)
            }
        }
        client.start(now: now)
        // The ClientHello's answer gives the client a round-trip time (2 ms): its timeout is the 50 ms floor.
        exchange(until: now + .milliseconds(20))
        XCTAssertTrue(server.isConnected)
        XCTAssertFalse(client.isConnected)
        XCTAssertEqual(client.initialRTO, .milliseconds(50))
        // Two timer retransmissions go unanswered too (50 ms, then 100 ms): the next is due 200 ms later.
        exchange(until: now + .milliseconds(160))
        XCTAssertGreaterThanOrEqual(serverFinalsLost, 3)
        let timerDue = try XCTUnwrap(client.pollTimeout())
        XCTAssertGreaterThan(timerDue - now, .milliseconds(100))
        // The server's SRTP arrives: the client's flight goes again now, and this time the server's answer gets through.
        dropServerFinal = false
        let mediaAt = now
        client.handlePeerMedia(now: now)
        exchange(until: now + .seconds(2))
        XCTAssertTrue(client.isConnected)
        XCTAssertLessThan(now - mediaAt, .milliseconds(10), "not after the backed-off timer (\(timerDue - mediaAt) away)")
        XCTAssertEqual(client.keyingMaterial?.localKey, server.keyingMaterial?.remoteKey)
    }

    /// Media before the client sent its Finished proves nothing about its flights: the timer keeps its schedule.
    func testPeerMediaBeforeOurFinishedChangesNothing() throws {
        let client = try DTLSEndpoint(role: .client, certificate: try XCTUnwrap(Self.certA), timerMode: .virtualClock(realTimer: .milliseconds(20)))
        let now = Instant(micros: 1_000_000)
        client.start(now: now)
        XCTAssertNotNil(client.pollTransmit(), "the ClientHello")
        let due = try XCTUnwrap(client.pollTimeout())
        client.handlePeerMedia(now: now + .milliseconds(1))
        XCTAssertEqual(client.pollTimeout(), due)
    }

    func testSmallMTUFragmentsFlights() throws {
        var s = try setup(seed: 150, mtu: 300)
        var largest = 0
        s.pair.a.dropDTLS = { largest = max(largest, $0.count); return false }
        s.pair.b.dropDTLS = { largest = max(largest, $0.count); return false }
        XCTAssertTrue(handshake(&s), "\(s.pair.a.dtlsEvents) \(s.pair.b.dtlsEvents)")
        XCTAssertLessThanOrEqual(largest, 300)
        XCTAssertGreaterThan(largest, 100)
    }

    /// A flight nobody answers goes again from `defaultInitialRTO` (no round trip known), doubling to 4 × it, as often as
    /// OpenSSL allows (12 retransmissions of one flight); then the handshake fails with our timeout, not OpenSSL's.
    func testUnansweredHandshakeBacksOffToFourInitialTimeoutsThenTimesOut() throws {
        let client = try DTLSEndpoint(role: .client, certificate: try XCTUnwrap(Self.certA), timerMode: .virtualClock(realTimer: .milliseconds(20)))
        var now = Instant(micros: 0)
        client.start(now: now)
        var sent = 0, gaps: [Duration] = []
        var last = now
        while let t = client.pollTimeout(), sent < 40 {
            while client.pollTransmit() != nil { sent += 1 }
            gaps.append(t - last)
            last = t
            now = t
            client.handleTimeout(now: now)
        }
        while client.pollTransmit() != nil { sent += 1 }
        XCTAssertEqual(sent, 13, "ClientHello and 12 retransmissions")
        XCTAssertEqual(gaps, [.milliseconds(100), .milliseconds(200)] + Array(repeating: .milliseconds(400), count: 11))
        guard case .failed(let e)? = client.pollEvent() else { return XCTFail() }
        XCTAssertEqual(e.code, .connectionTimedOut)
        XCTAssertTrue(e.message.contains("12 retransmissions"), e.message)
    }

    func testCloseNotifyReachesThePeer() throws {
        var s = try setup(seed: 180)
        XCTAssertTrue(handshake(&s))
        s.client.close()
        let b = s.pair.b
        XCTAssertTrue(s.pair.run(for: .seconds(1)) { b.dtlsEvents.contains(.closed) })
        XCTAssertThrowsError(try s.client.send([1]))
    }

    func testFingerprintMismatchRefusesTheConnection() throws {
        let wrong = SDPFingerprint(algorithm: "sha-256", bytes: Array(repeating: 0x42, count: 32))
        var s = try setup(seed: 160, serverExpects: wrong)
        let a = s.pair.a, b = s.pair.b
        XCTAssertTrue(s.pair.run(for: .seconds(10)) { s.server.isFailed && s.client.isFailed })
        XCTAssertFalse(a.dtlsConnected)
        XCTAssertFalse(b.dtlsConnected)
        guard case .failed(let e)? = b.dtlsEvents.last else { return XCTFail("server did not fail: \(b.dtlsEvents)") }
        XCTAssertEqual(e.code, .connectionRefused)
        XCTAssertTrue(e.message.contains("fingerprint"), e.message)
    }

    func testFingerprintCheckedAfterHandshakeWhenLearnedLate() throws {
        let ca = try XCTUnwrap(Self.certA), cb = try XCTUnwrap(Self.certB)
        let client = try DTLSEndpoint(role: .client, certificate: ca)
        let server = try DTLSEndpoint(role: .server, certificate: cb)
        client.setRemoteFingerprint(SDPFingerprint(algorithm: "sha-256", bytes: Array(repeating: 1, count: 32)))
        client.start(now: .zero)
        // Direct wiring without a network.
        for _ in 0..<10 {
            while let d = client.pollTransmit() { server.handleReceive(d, now: .zero) }
            while let d = server.pollTransmit() { client.handleReceive(d, now: .zero) }
        }
        XCTAssertTrue(client.isFailed)
        XCTAssertFalse(client.isConnected)
    }

    func testUseSRTPProfileNegotiation() throws {
        var s = try setup(seed: 170, clientProfiles: [.aes128CmHmacSha1_80])
        XCTAssertTrue(handshake(&s))
        XCTAssertEqual(s.server.keyingMaterial?.profile, .aes128CmHmacSha1_80)
        XCTAssertEqual(s.server.keyingMaterial?.localSalt.count, 14)
        assertKeysMatch(s)
    }

    func testCertificateFingerprintIsSHA256OfDER() throws {
        let c = try XCTUnwrap(Self.certA)
        XCTAssertEqual(c.fingerprint.algorithm, "sha-256")
        XCTAssertEqual(c.fingerprint.bytes.count, 32)
        XCTAssertNotEqual(c.fingerprint, try XCTUnwrap(Self.certB).fingerprint)
        XCTAssertEqual(try SDPFingerprint(parsing: c.fingerprint.description), c.fingerprint)
    }

    func testPackRecordsKeepsRecordsWhole() {
        func record(_ type: UInt8, _ n: Int) -> [UInt8] { [type, 0xFE, 0xFD] + Array(repeating: 0, count: 8) + [UInt8(n >> 8), UInt8(n & 0xFF)] + Array(repeating: 7, count: n) }
        let joined = record(22, 100) + record(22, 150) + record(20, 1) + record(22, 40)
        let out = DTLSEndpoint.packRecords(joined, mtu: 200)
        XCTAssertEqual(out.map(\.count), [113, 163 + 14, 53])
        XCTAssertEqual(out.flatMap { $0 }, joined)
    }
}

/// The content types of the DTLS records in a datagram.
func recordTypes(_ d: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var i = 0
    while i + 13 <= d.count {
        out.append(d[i])
        i += 13 + (Int(d[i + 11]) << 8 | Int(d[i + 12]))
    }
    return out
}
