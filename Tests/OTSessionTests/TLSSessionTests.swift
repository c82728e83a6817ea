import Foundation
import OTBase
import OTServer
import OTSession
import OTTestSupport
import OTTransport
import OTWire
import XCTest

/// Sessions over TLS (`wss://`): a server with a certificate of a CA made by the test, clients that trust that CA
/// (`tlsCAFile`), or another one, or the system store; host names in server URLs, resolved again at reconnection.
final class TLSSessionTests: XCTestCase {
    private var ca: TestCA!
    private var project = Project.generate()

    override func setUpWithError() throws { ca = try TestCA() }

    private func tlsServer(names: [String] = ["localhost", "127.0.0.1"]) throws -> (SessionServer, String, String) {
        let (cert, key) = try ca.issue(names)
        let server = SessionServer(.init(projects: [project], tls: SessionServer.TLSSettings(certificateFile: cert, keyFile: key)))
        try server.start()
        addTeardownBlock { server.stop() }
        return (server, cert, key)
    }

    private func connect(_ server: SessionServer, _ sid: String, url: String, caFile: String?) throws -> (Session, Recorder) {
        let rec = Recorder(url)
        let s = Session(apiKey: project.apiKey, sessionId: sid, delegate: rec, settings: SessionSettings(serverURL: url, tlsCAFile: caFile))
        try s.connect(token: server.token(sessionId: sid))
        return (s, rec)
    }

    private func waitFailure(_ rec: Recorder, file: StaticString = #filePath, line: UInt = #line) -> OTError? {
        rec.wait("a failure", file: file, line: line) { $0.contains { if case .failed = $0 { true } else { false } } }
        XCTAssertFalse(rec.events.contains(.connected), file: file, line: line)
        return rec.errors.first
    }

    func testAWSSClientConnectsTrustingTheCAFile() throws {
        let (server, _, _) = try tlsServer()
        XCTAssertTrue(server.signalingURL.hasPrefix("wss://"))
        XCTAssertTrue(server.apiURL.hasPrefix("https://"))
        let sid = try server.createSession(apiKey: project.apiKey)
        let (a, aRec) = try connect(server, sid, url: "wss://localhost:\(server.port)", caFile: ca.caFile)
        aRec.waitFor(.connected)
        let (b, bRec) = try connect(server, sid, url: "https://127.0.0.1:\(server.port)", caFile: ca.caFile)
        bRec.waitFor(.connected)
        defer { try? a.disconnect(); try? b.disconnect() }
        try a.signal(type: "t", data: "over TLS")
        bRec.wait("signal") { $0.contains { if case .signal("t", "over TLS", _) = $0 { true } else { false } } }
    }

    func testAServerOfAnotherCAFailsWithTheTLSCode() throws {
        let (server, _, _) = try tlsServer()
        let other = try TestCA(name: "another CA")
        let (s, rec) = try connect(server, try server.createSession(apiKey: project.apiKey), url: "wss://localhost:\(server.port)", caFile: other.caFile)
        defer { try? s.disconnect() }
        let e = try XCTUnwrap(waitFailure(rec))
        XCTAssertEqual(e.code, .tlsCertificateRejected)
        XCTAssertTrue(e.message.contains("unable to get local issuer certificate"), e.message)
        XCTAssertEqual(s.status, .failed)
    }

    /// The system store does not know the test CA: the default is verification, never a silent fallback.
    func testTheSystemStoreIsTheDefaultTrust() throws {
        let (server, _, _) = try tlsServer()
        let (s, rec) = try connect(server, try server.createSession(apiKey: project.apiKey), url: "wss://localhost:\(server.port)", caFile: nil)
        defer { try? s.disconnect() }
        XCTAssertEqual(waitFailure(rec)?.code, .tlsCertificateRejected)
    }

    func testAnotherHostNameFailsWithTheTLSCode() throws {
        let (server, _, _) = try tlsServer(names: ["otsession.test"])
        let (s, rec) = try connect(server, try server.createSession(apiKey: project.apiKey), url: "wss://localhost:\(server.port)", caFile: ca.caFile)
        defer { try? s.disconnect() }
        let e = try XCTUnwrap(waitFailure(rec))
        XCTAssertEqual(e.code, .tlsCertificateRejected)
        XCTAssertTrue(e.message.contains("hostname mismatch") && e.message.contains("localhost"), e.message)
    }

    /// A `ws://` client on a TLS port gets the server's refusal, not a session in clear.
    func testAPlainClientOnTheTLSPortIsRefused() throws {
        let (server, _, _) = try tlsServer()
        let (s, rec) = try connect(server, try server.createSession(apiKey: project.apiKey), url: "ws://localhost:\(server.port)", caFile: nil)
        defer { try? s.disconnect() }
        let e = try XCTUnwrap(waitFailure(rec))
        XCTAssertEqual(e.code, .connectionFailed)
        XCTAssertTrue(e.message.contains("400"), e.message)
    }

    /// `reloadTLS` (ot-server's SIGHUP) after the files changed: new connections get the new certificate, sessions
    /// on the old one carry on.
    func testReloadServesTheNewCertificateWithoutDroppingSessions() throws {
        let (server, cert, key) = try tlsServer()
        let sid = try server.createSession(apiKey: project.apiKey)
        let (a, aRec) = try connect(server, sid, url: "wss://localhost:\(server.port)", caFile: ca.caFile)
        aRec.waitFor(.connected)
        defer { try? a.disconnect() }
        let renewed = try TestCA(name: "renewal CA")
        let (newCert, newKey) = try renewed.issue(["localhost"])
        try FileManager.default.removeItem(atPath: cert)
        try FileManager.default.removeItem(atPath: key)
        try FileManager.default.copyItem(atPath: newCert, toPath: cert)
        try FileManager.default.copyItem(atPath: newKey, toPath: key)
        try server.reloadTLS()
        let (b, bRec) = try connect(server, sid, url: "wss://localhost:\(server.port)", caFile: renewed.caFile)
        bRec.waitFor(.connected)
        defer { try? b.disconnect() }
        try a.signal(type: "still", data: "here")
        bRec.wait("A's signal") { $0.contains { if case .signal("still", "here", _) = $0 { true } else { false } } }
        XCTAssertFalse(aRec.events.contains(.reconnecting))
        let (c, cRec) = try connect(server, sid, url: "wss://localhost:\(server.port)", caFile: ca.caFile)
        defer { try? c.disconnect() }
        XCTAssertEqual(waitFailure(cRec)?.code, .tlsCertificateRejected)
        // A reload with unusable files keeps serving the current certificate.
        try "junk".write(toFile: cert, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try server.reloadTLS())
        let (d, dRec) = try connect(server, sid, url: "wss://localhost:\(server.port)", caFile: renewed.caFile)
        dRec.waitFor(.connected)
        try? d.disconnect()
    }

    /// The server URL's host name is looked up again for every socket: at connect, and when the session reconnects
    /// after its socket was cut.
    func testTheServerNameIsResolvedAgainOnReconnection() throws {
        let server = SessionServer(.init(projects: [project], limits: { var l = ServerLimits(); l.reconnectGrace = .seconds(10); return l }()))
        try server.start()
        defer { server.stop() }
        let proxy = try TCPProxy(targetPort: server.port)
        defer { proxy.stop() }
        let sid = try server.createSession(apiKey: project.apiKey)
        let before = HostResolver.lookups(of: "localhost")
        let (s, rec) = try connect(server, sid, url: "ws://localhost:\(proxy.port)", caFile: nil)
        defer { try? s.disconnect() }
        rec.waitFor(.connected)
        XCTAssertGreaterThanOrEqual(HostResolver.lookups(of: "localhost"), before + 1)
        let afterConnect = HostResolver.lookups(of: "localhost")
        proxy.severAll()
        rec.waitFor(.reconnected)
        XCTAssertGreaterThanOrEqual(HostResolver.lookups(of: "localhost"), afterConnect + 1)
    }

    func testAnUnknownHostNameFailsToConnect() throws {
        let rec = Recorder()
        let s = Session(apiKey: project.apiKey, sessionId: SessionID(apiKey: project.apiKey, createTimeMillis: 1).string, delegate: rec,
                        settings: SessionSettings(serverURL: "wss://no-such-host.invalid"))
        try s.connect(token: "T1==x")
        let e = try XCTUnwrap(waitFailure(rec))
        XCTAssertEqual(e.code, .connectionFailed)
        XCTAssertTrue(e.message.contains("no-such-host.invalid"), e.message)
    }

    func testBadURLsAndCAFilesAreRefusedAtConnect() throws {
        for (url, ca) in [("ftp://h:1", nil), ("wss://h:0", nil), ("wss://u:p@h", nil), ("wss://localhost", "/nonexistent/ca.pem")] {
            let s = Session(apiKey: "1", sessionId: "x", delegate: nil, settings: SessionSettings(serverURL: url, tlsCAFile: ca))
            XCTAssertThrowsError(try s.connect(token: "t"), url) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter, url) }
        }
        XCTAssertThrowsError(try SessionSettings(proxyURL: "https://p:1").validate())
    }
}
