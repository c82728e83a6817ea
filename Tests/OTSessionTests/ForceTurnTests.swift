import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTransport
import OTWire
import OTTestSupport
import XCTest

/// A coturn `turnserver` started by the test on 127.0.0.1 (lt-cred-mech, no TLS), stopped after.
private final class TestTURNServer {
    let process = Process()
    let port: UInt16
    let dir: URL
    static let user = "otuser", password = "otpass"

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/turnserver") else { throw XCTSkip("coturn is not installed") }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ot-session-coturn-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        port = UInt16.random(in: 20000 ... 29999)
        let minPort = Int.random(in: 0 ..< 300) * 50 + 30000
        let conf = """
            listening-ip=127.0.0.1
            relay-ip=127.0.0.1
            listening-port=\(port)
            min-port=\(minPort)
            max-port=\(minPort + 49)
            lt-cred-mech
            user=\(Self.user):\(Self.password)
            realm=otsession.test
            allow-loopback-peers
            no-tls
            no-dtls
            no-cli
            no-rfc5780
            no-stdout-log
            log-file=\(dir.path)/turn.log
            pidfile=\(dir.path)/turn.pid
            userdb=\(dir.path)/turndb
            """
        try conf.write(to: dir.appendingPathComponent("turnserver.conf"), atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/turnserver")
        process.arguments = ["-c", dir.appendingPathComponent("turnserver.conf").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try waitReady()
    }

    /// Polls with STUN Binding requests until the server answers (at most 10 s).
    private func waitReady() throws {
        let got = Flag()
        let d = try UDPDriver { e in if case .datagram = e { got.set() } }
        defer { d.stop() }
        let local = try d.bind(TransportAddress(ip: .v4(0x7F00_0001), port: 0))
        d.start()
        let server = TransportAddress(ip: .v4(0x7F00_0001), port: port)
        let deadline = Date().addingTimeInterval(10)
        while !got.isSet && Date() < deadline {
            d.send(STUNMessage(method: .binding, messageClass: .request).encode(), from: local, to: server)
            Thread.sleep(forTimeInterval: 0.05)
        }
        if !got.isSet { throw XCTSkip("turnserver did not answer on port \(port)") }
    }

    deinit {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: dir)
    }
}

/// `SessionSettings.forceTurn`: media goes through the TURN server of `iceServers`.
final class ForceTurnTests: XCTestCase {
    func testRelayedMediaThroughTURNOnly() throws {
        let turn = try TestTURNServer()
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let ice = [IceServer(urls: ["turn:127.0.0.1:\(turn.port)?transport=udp"], username: TestTURNServer.user, credential: TestTURNServer.password)]
        func client(_ name: String) throws -> (Session, Recorder) {
            let rec = Recorder(name)
            let s = Session(apiKey: server.project.apiKey, sessionId: sid, delegate: rec,
                            settings: SessionSettings(serverURL: server.server.signalingURL, iceServers: ice, forceTurn: true))
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
                        settings: SessionSettings(serverURL: server.server.signalingURL, forceTurn: true))
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
