import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTransport
import OTWire
import OTTestSupport
import XCTest

/// `SessionICEConfig.transportPolicy = .relay`: media goes through the custom TURN server, reached over UDP or TCP.
final class ForceTurnTests: XCTestCase {
    /// Two clients of one relayed session with this ICE config; A publishes the tone/test pattern, B subscribes.
    /// (The subscriber's client uses `subscriberICE` when given.)
    private func publishAndSubscribe(_ ice: SessionICEConfig, subscriberICE: SessionICEConfig? = nil, server: TestServer) throws
        -> (a: Session, b: Session, publisher: Publisher, subscriber: Subscriber, rec: MediaRecorder) {
        let sid = try server.session(relayed: true)
        func client(_ name: String, _ ice: SessionICEConfig) throws -> (Session, Recorder) {
            let rec = Recorder(name)
            let s = Session(apiKey: server.project.apiKey, sessionId: sid, delegate: rec,
                            settings: SessionSettings(serverURL: server.server.signalingURL, iceConfig: ice))
            try s.connect(token: server.server.token(sessionId: sid))
            rec.waitFor(.connected)
            return (s, rec)
        }
        let (a, _) = try client("A", ice)
        let (b, bRec) = try client("B", subscriberICE ?? ice)
        let (publisher, _, stream) = try publishTone(a, seenBy: bRec)
        let rec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: rec)
        try b.subscribe(subscriber)
        return (a, b, publisher, subscriber, rec)
    }

    private func turnOnly(_ url: String, password: String = Coturn.password) throws -> SessionICEConfig {
        try SessionICEConfig(customServers: [IceServer(urls: [url], username: Coturn.user, credential: password)], transportPolicy: .relay)
    }

    /// The local and remote candidates of the selected pair in an RTC stats report.
    private func selectedCandidates(_ report: String) throws -> (local: [String: Any], remote: [String: Any]) {
        let objects = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.utf8)) as? [[String: Any]])
        let pair = try XCTUnwrap(objects.first { $0["type"] as? String == "candidate-pair" }, report)
        let local = try XCTUnwrap(objects.first { $0["id"] as? String == pair["localCandidateId"] as? String }, report)
        let remote = try XCTUnwrap(objects.first { $0["id"] as? String == pair["remoteCandidateId"] as? String }, report)
        return (local, remote)
    }

    func testRelayedMediaThroughTURNOnly() throws {
        let turn = try Coturn()
        let server = try TestServer()
        let (a, b, _, subscriber, rec) = try publishAndSubscribe(try turnOnly("turn:127.0.0.1:\(turn.port)?transport=udp"), server: server)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.connected)
        rec.waitForFrames(10)
        XCTAssertFalse(rec.stamps.isEmpty)
        let (local, remote) = try selectedCandidates(subscriber.rtcStatsReport())
        XCTAssertEqual(local["candidateType"] as? String, "relay")
        XCTAssertEqual(local["relayProtocol"] as? String, "udp")
        XCTAssertEqual(remote["candidateType"] as? String, "relay")
    }

    /// `turn:...?transport=tcp`: each peer connection opens a TCP connection to coturn, allocates a (UDP) relayed
    /// address over it, and media flows relay to relay, with the test pattern's stamps decoded at the subscriber.
    func testRelayedMediaThroughTURNOverTCP() throws {
        let turn = try Coturn()
        let server = try TestServer()
        let (a, b, publisher, subscriber, rec) = try publishAndSubscribe(try turnOnly("turn:127.0.0.1:\(turn.port)?transport=tcp"), server: server)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.connected)
        rec.waitForFrames(10)
        let stamps = rec.stamps
        XCTAssertGreaterThan(stamps.count, 5)
        XCTAssertGreaterThan(stamps.last?.frameNumber ?? 0, stamps.first?.frameNumber ?? 0)
        rec.wait("audio") { $0.audioTotal > 4800 }
        let (local, remote) = try selectedCandidates(subscriber.rtcStatsReport())
        XCTAssertEqual(local["candidateType"] as? String, "relay")
        XCTAssertEqual(local["relayProtocol"] as? String, "tcp")
        XCTAssertEqual(local["protocol"] as? String, "udp")  // the relayed address itself is UDP
        XCTAssertEqual(remote["candidateType"] as? String, "relay")
        XCTAssertNil(remote["relayProtocol"])
        // The publisher's side of the same connection went through its own TCP allocation.
        let pub = try selectedCandidates(publisher.rtcStatsReport())
        XCTAssertEqual(pub.local["relayProtocol"] as? String, "tcp")
        XCTAssertEqual(pub.local["port"] as? Int, remote["port"] as? Int)
    }

    /// A TCP TURN server nobody listens on (the subscriber's; the publisher's is fine): the subscriber fails at
    /// once with the TURN error, it does not hang.
    func testUnreachableTURNOverTCPFailsClearly() throws {
        let turn = try Coturn()
        let port = try closedTCPPort()
        let server = try TestServer()
        let (a, b, _, _, rec) = try publishAndSubscribe(try turnOnly("turn:127.0.0.1:\(turn.port)?transport=tcp"),
                                                          subscriberICE: try turnOnly("turn:127.0.0.1:\(port)?transport=tcp"), server: server)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.failed(OTErrorCode.subscriberWebRTC.rawValue))
        let message = try XCTUnwrap(rec.failureMessages.first)
        XCTAssertTrue(message.contains("TURN: the TCP connection to 127.0.0.1:\(port)"), message)
        XCTAssertFalse(rec.events.contains(.connected))
    }

    /// Wrong credentials over TCP (the subscriber's): coturn refuses the Allocate and the subscriber fails with the server's 401.
    func testRefusedTURNOverTCPAllocationFailsClearly() throws {
        let turn = try Coturn()
        let server = try TestServer()
        let (a, b, _, _, rec) = try publishAndSubscribe(try turnOnly("turn:127.0.0.1:\(turn.port)?transport=tcp"),
                                                          subscriberICE: try turnOnly("turn:127.0.0.1:\(turn.port)?transport=tcp", password: "wrong"),
                                                          server: server)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.failed(OTErrorCode.subscriberWebRTC.rawValue))
        let message = try XCTUnwrap(rec.failureMessages.first)
        XCTAssertTrue(message.contains("Allocate refused: 401"), message)
    }

    func testForceTurnWithoutATURNServerIsRefused() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let rec = Recorder("A")
        let s = Session(apiKey: server.project.apiKey, sessionId: sid, delegate: rec,
                        settings: SessionSettings(serverURL: server.server.signalingURL, iceConfig: SessionICEConfig(transportPolicy: .relay)))
        try s.connect(token: server.server.token(sessionId: sid))
        rec.waitFor(.connected)
        defer { try? s.disconnect() }
        let (b, _) = try server.client(sid, name: "B")
        defer { try? b.disconnect() }
        let (_, _, stream) = try publishTone(b, seenBy: rec)
        XCTAssertThrowsError(try s.subscribe(Subscriber(stream: stream, delegate: nil))) {
            XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter)
        }
    }
}

/// A loopback TCP port nothing listens on (bound, then closed: the kernel refuses connections to it).
func closedTCPPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw XCTSkip("no socket") }
    defer { close(fd) }
    var sin = sockaddr_in()
    sin.sin_family = sa_family_t(AF_INET)
    sin.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &sin) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
    }
    guard ok else { throw XCTSkip("could not bind a loopback TCP port") }
    return UInt16(bigEndian: sin.sin_port)
}
