import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTransport
import OTWire
import OTTestSupport
import XCTest

/// `SessionICEConfig.transportPolicy = .relay`: media goes through the custom TURN server.
final class ForceTurnTests: XCTestCase {
    func testRelayedMediaThroughTURNOnly() throws {
        let turn = try Coturn()
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let ice = try SessionICEConfig(customServers: [IceServer(urls: ["turn:127.0.0.1:\(turn.port)?transport=udp"], username: Coturn.user,
                                                                 credential: Coturn.password)], transportPolicy: .relay)
        func client(_ name: String) throws -> (Session, Recorder) {
            let rec = Recorder(name)
            let s = Session(apiKey: server.project.apiKey, sessionId: sid, delegate: rec,
                            settings: SessionSettings(serverURL: server.server.signalingURL, iceConfig: ice))
            try s.connect(token: server.server.token(sessionId: sid))
            rec.waitFor(.connected)
            return (s, rec)
        }
        let (a, _) = try client("A")
        let (b, bRec) = try client("B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let publisher = try tonePublisher(MediaRecorder("publisher"))
        try a.publish(publisher)
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let rec = MediaRecorder("subscriber")
        try b.subscribe(Subscriber(stream: try XCTUnwrap(b.streams.values.first), delegate: rec))
        rec.waitFor(.connected)
        rec.waitForFrames(10)
        XCTAssertFalse(rec.stamps.isEmpty)
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
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? b.disconnect() }
        try b.publish(try tonePublisher(MediaRecorder()))
        rec.wait("stream") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        XCTAssertThrowsError(try s.subscribe(Subscriber(stream: try XCTUnwrap(s.streams.values.first), delegate: nil))) {
            XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter)
        }
        _ = bRec
    }
}
