import OTBase
import OTWire
@testable import OTTransport
import XCTest

/// The TURN client against a scripted server (no sockets).
final class TURNClientTests: XCTestCase {
    let server = TransportAddress("192.0.2.10:3478")!
    let relayed = TransportAddress("192.0.2.10:50000")!
    let peer = TransportAddress("198.51.100.7:4000")!

    func testLongTermCredentialsStaleNonceAndChannelData() throws {
        let c = TURNClient(config: .init(server: server, username: "u", password: "p"))
        let t0 = Instant(micros: 1_000_000)
        c.start(now: t0)
        let first = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        XCTAssertEqual(first.method, STUNMethod.allocate.rawValue)
        XCTAssertNil(first.username)
        XCTAssertEqual(first.attribute(STUNAttributeType.requestedTransport), .requestedTransport(17))
        // 401 with realm and nonce.
        var e = STUNMessage(method: .allocate, messageClass: .error, transactionID: first.transactionID)
        e.attributes = [.errorCode(code: 401, reason: "Unauthorized"), .realm("r"), .nonce("n1")]
        c.handleReceive(e.encode(), now: t0)
        let second = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        let key = STUNCrypto.longTermKey(username: "u", realm: "r", password: "p")
        XCTAssertEqual(second.username, "u")
        XCTAssertEqual(second.nonce, "n1")
        XCTAssertTrue(second.verifyIntegrity(key: key))
        // Stale nonce: retried with the new one.
        var stale = STUNMessage(method: .allocate, messageClass: .error, transactionID: second.transactionID)
        stale.attributes = [.errorCode(code: 438, reason: "Stale Nonce"), .realm("r"), .nonce("n2")]
        c.handleReceive(stale.encode(), now: t0)
        let third = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        XCTAssertEqual(third.nonce, "n2")
        // A success without valid integrity is ignored; with it, the allocation exists.
        var ok = STUNMessage(method: .allocate, messageClass: .success, transactionID: third.transactionID)
        ok.attributes = [.xorRelayedAddress(relayed), .xorMappedAddress(TransportAddress("203.0.113.5:1234")!), .lifetime(600)]
        c.handleReceive(ok.encode(integrityKey: [0]), now: t0)
        XCTAssertNil(c.relayedAddress)
        c.handleReceive(ok.encode(integrityKey: key), now: t0)
        XCTAssertEqual(c.pollEvent(), .allocated(relayed: relayed, mapped: TransportAddress("203.0.113.5:1234")))
        // Refresh before the lifetime ends.
        XCTAssertEqual(c.pollTimeout(), t0 + .seconds(540))

        // Sending to a new peer: ChannelBind (with permission) first; data waits.
        c.send([1, 2, 3], to: peer, now: t0)
        let perm = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        XCTAssertEqual(perm.method, STUNMethod.createPermission.rawValue)
        let bind = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        XCTAssertEqual(bind.method, STUNMethod.channelBind.rawValue)
        XCTAssertNil(c.pollTransmit())
        c.handleReceive(STUNMessage(method: .channelBind, messageClass: .success, transactionID: bind.transactionID).encode(integrityKey: key), now: t0)
        XCTAssertEqual(c.pollTransmit(), [0x40, 0x00, 0, 3, 1, 2, 3])
        // Incoming ChannelData and Data indications.
        c.handleReceive([0x40, 0x00, 0, 2, 9, 9], now: t0)
        XCTAssertEqual(c.pollEvent(), .data(from: peer, [9, 9]))
        let ind = STUNMessage(method: .data, messageClass: .indication, attributes: [.xorPeerAddress(peer), .data([5])])
        c.handleReceive(ind.encode(), now: t0)
        XCTAssertEqual(c.pollEvent(), .data(from: peer, [5]))
        // Unknown channels and garbage are ignored.
        c.handleReceive([0x40, 0x07, 0, 1, 1], now: t0)
        c.handleReceive([0x40], now: t0)
        XCTAssertNil(c.pollEvent())
    }

    func testNoServerAnswerTimesOut() {
        let c = TURNClient(config: .init(server: server, username: "u", password: "p"))
        var now = Instant(micros: 0)
        c.start(now: now)
        var sent = 0
        while let t = c.pollTimeout(), sent < 20 {
            while c.pollTransmit() != nil { sent += 1 }
            now = t
            c.handleTimeout(now: now)
        }
        while c.pollTransmit() != nil { sent += 1 }
        XCTAssertEqual(sent, 7)
        guard case .failed(let e)? = c.pollEvent() else { return XCTFail() }
        XCTAssertEqual(e.code, .connectionTimedOut)
    }

    /// Over TCP a request is sent once (RFC 8489 §6.2.2) and times out after `tcpTransactionTimeout`; a closed
    /// connection fails the client at once, and a failed client starts nothing.
    func testTCPTransactionsAreNotResentAndAClosedConnectionFails() throws {
        var cfg = TURNClient.Config(server: server, username: "u", password: "p")
        cfg.transport = .tcp
        let silent = TURNClient(config: cfg)
        let t0 = Instant(micros: 0)
        silent.start(now: t0)
        XCTAssertNotNil(silent.pollTransmit())
        silent.handleTimeout(now: t0 + .seconds(10))
        XCTAssertNil(silent.pollTransmit(), "no retransmission over TCP")
        XCTAssertNil(silent.pollEvent())
        XCTAssertEqual(silent.pollTimeout(), t0 + cfg.tcpTransactionTimeout)
        silent.handleTimeout(now: t0 + cfg.tcpTransactionTimeout)
        guard case .failed(let timedOut)? = silent.pollEvent() else { return XCTFail("no failure") }
        XCTAssertEqual(timedOut.code, .connectionTimedOut)

        let closed = TURNClient(config: cfg)
        closed.start(now: t0)
        _ = closed.pollTransmit()
        closed.connectionClosed(now: t0 + .milliseconds(5))
        guard case .failed(let e)? = closed.pollEvent() else { return XCTFail("no failure") }
        XCTAssertEqual(e.code, .connectionFailed)
        XCTAssertTrue(e.message.contains("TCP connection to \(server)"), e.message)
        XCTAssertNil(closed.pollTimeout())

        let never = TURNClient(config: cfg)
        never.connectionClosed(now: t0)
        never.start(now: t0)
        XCTAssertNil(never.pollTransmit())
        XCTAssertTrue(never.isFailed)
    }

    func testTCPStreamFramingAcrossChunks() throws {
        var cfg = TURNClient.Config(server: server, username: "u", password: "p")
        cfg.transport = .tcp
        let c = TURNClient(config: cfg)
        let t0 = Instant(micros: 0)
        c.start(now: t0)
        let req = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        var e = STUNMessage(method: .allocate, messageClass: .error, transactionID: req.transactionID)
        e.attributes = [.errorCode(code: 401, reason: "Unauthorized"), .realm("r"), .nonce("n")]
        let key = STUNCrypto.longTermKey(username: "u", realm: "r", password: "p")
        let bytes = e.encode()
        // Split mid-header and mid-body.
        c.handleReceive(Array(bytes[0..<3]), now: t0)
        XCTAssertNil(c.pollTransmit())
        c.handleReceive(Array(bytes[3..<30]), now: t0)
        XCTAssertNil(c.pollTransmit())
        c.handleReceive(Array(bytes[30...]), now: t0)
        let auth = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        var ok = STUNMessage(method: .allocate, messageClass: .success, transactionID: auth.transactionID)
        ok.attributes = [.xorRelayedAddress(relayed), .lifetime(600)]
        // The success and a bind: then padded ChannelData arrives glued to the next message.
        c.handleReceive(ok.encode(integrityKey: key), now: t0)
        XCTAssertEqual(c.pollEvent(), .allocated(relayed: relayed, mapped: nil))
        c.bindChannel(peer, now: t0)
        let bind = try STUNMessage.parse(XCTUnwrap(c.pollTransmit()))
        let bound = STUNMessage(method: .channelBind, messageClass: .success, transactionID: bind.transactionID).encode(integrityKey: key)
        let channelData: [UInt8] = [0x40, 0x00, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0]
        let stream = bound + channelData + [0x40, 0x00, 0, 1, 7, 0, 0, 0]
        c.handleReceive(Array(stream[0..<(bound.count + 6)]), now: t0)
        XCTAssertNil(c.pollEvent())
        c.handleReceive(Array(stream[(bound.count + 6)...]), now: t0)
        XCTAssertEqual(c.pollEvent(), .data(from: peer, [1, 2, 3, 4, 5]))
        XCTAssertEqual(c.pollEvent(), .data(from: peer, [7]))
        // Outgoing ChannelData is padded to 4 bytes over TCP.
        c.send([1, 2, 3], to: peer, now: t0)
        XCTAssertEqual(c.pollTransmit(), [0x40, 0x00, 0, 3, 1, 2, 3, 0])
        // A byte that starts no TURN message fails the stream.
        c.handleReceive([0xFF, 0, 0, 0], now: t0)
        guard case .failed? = c.pollEvent() else { return XCTFail() }
    }
}
