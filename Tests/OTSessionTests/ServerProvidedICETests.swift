import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import OTTransport
import OTWire
import XCTest

/// ICE servers the session server hands its clients (`ot-server --ice-server`, `--turn-secret`): coturn started by
/// the test with `use-auth-secret`, clients under the relay-only policy with no TURN server of their own.
final class ServerProvidedICETests: XCTestCase {
    private let project = Project.generate()

    private func server(_ ice: ICEServerPolicy) throws -> SessionServer {
        let s = SessionServer(.init(projects: [project], iceServers: ice))
        try s.start()
        addTeardownBlock { s.stop() }
        return s
    }

    /// A publishes the tone and test pattern in a relayed session, B subscribes; both with `ice` and `caFile`.
    private func call(_ server: SessionServer, ice: SessionICEConfig, caFile: String? = nil) throws
        -> (a: Session, b: Session, publisher: Publisher, subscriber: Subscriber, rec: MediaRecorder) {
        let sid = try server.createSession(apiKey: project.apiKey, relayed: true)
        func client(_ name: String) throws -> (Session, Recorder) {
            let rec = Recorder(name)
            let s = Session(apiKey: project.apiKey, sessionId: sid, delegate: rec,
                            settings: SessionSettings(serverURL: server.signalingURL, iceConfig: ice, tlsCAFile: caFile))
            try s.connect(token: server.token(sessionId: sid))
            rec.waitFor(.connected)
            return (s, rec)
        }
        let (a, _) = try client("A")
        let (b, bRec) = try client("B")
        let (publisher, _, stream) = try publishTone(a, seenBy: bRec)
        let rec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: rec)
        try b.subscribe(subscriber)
        return (a, b, publisher, subscriber, rec)
    }

    private func localCandidate(_ report: String) throws -> [String: Any] {
        let objects = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.utf8)) as? [[String: Any]])
        let pair = try XCTUnwrap(objects.first { $0["type"] as? String == "candidate-pair" }, report)
        return try XCTUnwrap(objects.first { $0["id"] as? String == pair["localCandidateId"] as? String }, report)
    }

    /// The server names coturn `localhost` (resolved by each client) and mints each connection's credentials; the
    /// clients configure nothing but the relay-only policy, and media flows relay to relay.
    func testRelayOnlyClientsConnectWithTheServersTURNCredentials() throws {
        let turn = try Coturn(authSecret: "north-wind")
        let server = try server(ICEServerPolicy(urls: ["turn:localhost:\(turn.port)?transport=udp"], turnSecret: "north-wind"))
        let (a, b, _, subscriber, rec) = try call(server, ice: SessionICEConfig(transportPolicy: .relay))
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.connected)
        rec.waitForFrames(10)
        XCTAssertGreaterThan(rec.stamps.last?.frameNumber ?? 0, rec.stamps.first?.frameNumber ?? 0)
        let local = try localCandidate(subscriber.rtcStatsReport())
        XCTAssertEqual(local["candidateType"] as? String, "relay")
        XCTAssertEqual(local["relayProtocol"] as? String, "udp")
    }

    /// `turns:`: TURN over TLS to coturn's TLS port, its certificate checked against the session's CA file and the
    /// URL's host name.
    func testTURNOverTLSFromTheServersList() throws {
        let ca = try TestCA()
        let turn = try Coturn(authSecret: "north-wind", tls: try ca.issue(["localhost"], label: "coturn"))
        let tlsPort = try XCTUnwrap(turn.tlsPort)
        let server = try server(ICEServerPolicy(urls: ["turns:localhost:\(tlsPort)"], turnSecret: "north-wind"))
        let (a, b, publisher, subscriber, rec) = try call(server, ice: SessionICEConfig(transportPolicy: .relay), caFile: ca.caFile)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.connected)
        rec.waitForFrames(10)
        XCTAssertEqual(try localCandidate(subscriber.rtcStatsReport())["relayProtocol"] as? String, "tls")
        XCTAssertEqual(try localCandidate(publisher.rtcStatsReport())["relayProtocol"] as? String, "tls")
    }

    /// The same coturn, but the clients trust another CA: the TLS connection to it fails with the certificate
    /// refused, and the relay-only subscriber fails saying so.
    func testTURNOverTLSWithAnUntrustedCertificateFails() throws {
        let ca = try TestCA()
        let turn = try Coturn(authSecret: "north-wind", tls: try ca.issue(["localhost"], label: "coturn"))
        let server = try server(ICEServerPolicy(urls: ["turns:localhost:\(try XCTUnwrap(turn.tlsPort))"], turnSecret: "north-wind"))
        let other = try TestCA(name: "another CA")
        let (a, b, _, _, rec) = try call(server, ice: SessionICEConfig(transportPolicy: .relay), caFile: other.caFile)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.failed(OTErrorCode.subscriberWebRTC.rawValue))
        let message = try XCTUnwrap(rec.failureMessages.first)
        XCTAssertTrue(message.contains("TURN: the TLS connection to localhost failed") && message.contains("was not accepted"), message)
    }

    /// `includeServers = .custom` ignores what the server provides: relay-only without custom TURN servers is
    /// refused when subscribing (as documented: 1011 naming the setting).
    func testIncludeServersCustomWithoutCustomServersIsRefused() throws {
        let server = try server(ICEServerPolicy(urls: ["turn:localhost:3478"], turnSecret: "north-wind"))
        let sid = try server.createSession(apiKey: project.apiKey, relayed: true)
        let rec = Recorder("custom")
        let s = Session(apiKey: project.apiKey, sessionId: sid, delegate: rec, settings: SessionSettings(
            serverURL: server.signalingURL, iceConfig: SessionICEConfig(transportPolicy: .relay, includeServers: .custom)))
        try s.connect(token: server.token(sessionId: sid))
        rec.waitFor(.connected)
        defer { try? s.disconnect() }
        let rec2 = Recorder("B")
        let b = Session(apiKey: project.apiKey, sessionId: sid, delegate: rec2, settings: SessionSettings(serverURL: server.signalingURL))
        try b.connect(token: server.token(sessionId: sid))
        rec2.waitFor(.connected)
        defer { try? b.disconnect() }
        let (_, _, stream) = try publishTone(b, seenBy: rec)
        XCTAssertThrowsError(try s.subscribe(Subscriber(stream: stream, delegate: nil))) { e in
            XCTAssertEqual((e as? OTError)?.code, .invalidParameter)
            XCTAssertTrue((e as? OTError)?.message.contains("includeServers is custom") == true, "\(e)")
        }
    }
}
