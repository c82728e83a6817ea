#if canImport(Glibc)
import Glibc
#endif
import Foundation
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

final class SessionConnectTests: XCTestCase {
    func testConnectReportsConnectionAndCapabilitiesByRole() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let s = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: nil, settings: SessionSettings(serverURL: ts.server.signalingURL))
        XCTAssertEqual(s.status, .notConnected)
        XCTAssertNil(s.connection)
        XCTAssertNil(s.capabilities)

        let expected: [SessionRole: SessionCapabilities] = [
            .subscriber: SessionCapabilities(role: .subscriber), .publisher: SessionCapabilities(role: .publisher),
            .publisheronly: SessionCapabilities(role: .publisheronly), .moderator: SessionCapabilities(role: .moderator),
        ]
        for (role, caps) in expected {
            let (c, rec) = try ts.client(sid, role: role, data: "user=\(role.rawValue)")
            XCTAssertEqual(c.status, .connected)
            XCTAssertEqual(c.capabilities, caps)
            XCTAssertEqual(c.connection?.data, "user=\(role.rawValue)")
            XCTAssertGreaterThan(c.connection?.creationTime ?? 0, 1_600_000_000_000)
            try c.disconnect()
            rec.waitFor(.disconnected)
            XCTAssertEqual(c.status, .notConnected)
        }
        XCTAssertEqual(expected[.subscriber]?.canPublish, false)
        XCTAssertEqual(expected[.publisheronly]?.canSubscribe, false)
        XCTAssertEqual(expected[.publisher]?.canForceMute, false)
        XCTAssertEqual(expected[.moderator]?.canForceDisconnect, true)
    }

    func testStatusGoesThroughConnectingAndDisconnecting() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let rec = Recorder()
        let s = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: rec, settings: SessionSettings(serverURL: ts.server.signalingURL))
        try s.connect(token: ts.server.token(sessionId: sid))
        XCTAssertTrue([.connecting, .connected].contains(s.status))
        XCTAssertThrowsError(try s.connect(token: "x")) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        rec.waitFor(.connected)
        XCTAssertThrowsError(try s.connect(token: "x")) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        try s.disconnect()
        XCTAssertTrue([.disconnecting, .notConnected].contains(s.status))
        rec.waitFor(.disconnected)
        XCTAssertEqual(s.status, .notConnected)
        XCTAssertThrowsError(try s.disconnect()) { XCTAssertEqual(($0 as? OTError)?.code, .notConnected) }
        XCTAssertThrowsError(try s.signal(type: "a", data: "b")) { XCTAssertEqual(($0 as? OTError)?.code, .notConnected) }
        // Reconnect works on the same object.
        rec.clear()
        try s.connect(token: ts.server.token(sessionId: sid))
        rec.waitFor(.connected)
        XCTAssertEqual(rec.events, [.connected])
    }

    func testFailuresCarryOpenTokCodes() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        func failure(_ sessionId: String, _ token: String, url: String? = nil) -> [Recorder.Event] {
            let rec = Recorder()
            let s = Session(apiKey: ts.project.apiKey, sessionId: sessionId, delegate: rec,
                            settings: SessionSettings(serverURL: url ?? ts.server.signalingURL))
            XCTAssertNoThrow(try s.connect(token: token))
            let ev = rec.wait("failure") { $0.contains { if case .failed = $0 { true } else { false } } }
            XCTAssertEqual(s.status, .failed)
            XCTAssertNil(s.connection)
            return ev
        }
        let good = try ts.server.token(sessionId: sid)
        // Tampered: flip a character of the signature.
        var tampered = Array(good)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == "A" ? "B" : "A"
        XCTAssertEqual(failure(sid, String(tampered)), [.failed(1004)])
        // Expired.
        let now = Int64(Date().timeIntervalSince1970)
        let expired = try ClientToken(apiKey: ts.project.apiKey, sessionId: sid, createTime: now - 100, expireTime: now - 10).mint(secret: ts.project.secret)
        XCTAssertEqual(failure(sid, expired), [.failed(1004)])
        // Token for another session of the same project.
        let other = try ts.session()
        XCTAssertEqual(failure(sid, try ts.server.token(sessionId: other)), [.failed(1004)])
        // Signed with another project's secret.
        let wrongKey = try ClientToken(apiKey: ts.project.apiKey, sessionId: sid, createTime: now).mint(secret: Project.generate().secret)
        XCTAssertEqual(failure(sid, wrongKey), [.failed(1004)])
        // Not a token at all.
        XCTAssertEqual(failure(sid, "garbage"), [.failed(1004)])
        // Unknown session (well-formed, never created) and a malformed session id.
        let unknown = SessionID(apiKey: ts.project.apiKey, createTimeMillis: 1).string
        let tokenForUnknown = try ClientToken(apiKey: ts.project.apiKey, sessionId: unknown, createTime: now).mint(secret: ts.project.secret)
        XCTAssertEqual(failure(unknown, tokenForUnknown), [.failed(1005)])
        XCTAssertEqual(failure("not-a-session", good), [.failed(1005)])
        // Server down: a port nobody listens on.
        let down = try TestServer()
        let downURL = down.server.signalingURL
        down.server.stop()
        XCTAssertEqual(failure(sid, good, url: downURL), [.failed(1006)])
        // Bad arguments are refused synchronously.
        let s = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: nil, settings: SessionSettings(serverURL: "ftp://x"))
        XCTAssertThrowsError(try s.connect(token: good)) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) }
        let s2 = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: nil, settings: SessionSettings(serverURL: ts.server.signalingURL))
        XCTAssertThrowsError(try s2.connect(token: "")) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) }
    }

    /// Times no connection can honour (`Int64.max` seconds overflowed the connect deadline) are refused when
    /// connecting, before anything goes out.
    func testAbsurdTimesAreRefusedSynchronously() throws {
        for settings in [SessionSettings(connectTimeout: .seconds(Int64.max)), SessionSettings(connectTimeout: .zero),
                         SessionSettings(pingInterval: .seconds(Int64.max)), SessionSettings(pingInterval: .milliseconds(99))] {
            let s = Session(apiKey: "1", sessionId: "1_x", delegate: nil, settings: settings)
            XCTAssertThrowsError(try s.connect(token: "t"), "\(settings.connectTimeout), \(settings.pingInterval)") {
                XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter)
            }
            XCTAssertEqual(s.status, .notConnected)
        }
    }

    func testT1TokensConnect() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let rec = Recorder()
        let s = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: rec, settings: SessionSettings(serverURL: ts.server.signalingURL))
        try s.connect(token: ts.server.token(sessionId: sid, role: .moderator, data: "a b&c=d", format: .t1))
        rec.waitFor(.connected)
        XCTAssertEqual(s.connection?.data, "a b&c=d")
        XCTAssertEqual(s.capabilities?.canForceDisconnect, true)
    }

    func testConnectedSessionReportsErrorBeforeDisconnectWhenServerGoes() throws {
        var limits = ServerLimits()
        limits.reconnectGrace = .seconds(1)
        let ts = try TestServer(limits: limits)
        let sid = try ts.session()
        let (s, rec) = try ts.client(sid)
        ts.server.stop()
        // It tries to reconnect for the grace period the server announced, then fails.
        let ev = rec.wait("disconnect") { $0.contains(.disconnected) }
        XCTAssertEqual(ev, [.connected, .reconnecting, .failed(OTErrorCode.connectionDropped.rawValue), .disconnected])
        XCTAssertEqual(s.status, .notConnected)
    }

    func testSessionLimitRefusesWith1027() throws {
        var limits = ServerLimits()
        limits.maxConnectionsPerSession = 2
        let ts = try TestServer(limits: limits)
        let sid = try ts.session()
        let first = try ts.client(sid), second = try ts.client(sid)
        let rec = Recorder()
        let s = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: rec, settings: SessionSettings(serverURL: ts.server.signalingURL))
        try s.connect(token: ts.server.token(sessionId: sid))
        rec.waitFor(.failed(1027))
        XCTAssertEqual([first.0.status, second.0.status], [.connected, .connected])
    }
}

final class SessionTimeoutTests: XCTestCase {
    func testServerThatNeverAnswersTimesOutWith1021() throws {
        // A listening socket nobody accepts from: TCP connects, the WebSocket upgrade never answers.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        listen(fd, 4)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        let port = UInt16(bigEndian: addr.sin_port)
        let rec = Recorder()
        let s = Session(apiKey: "1", sessionId: "1_x", delegate: rec,
                        settings: SessionSettings(serverURL: "ws://127.0.0.1:\(port)", connectTimeout: .milliseconds(300)))
        try s.connect(token: "t")
        rec.waitFor(.failed(OTErrorCode.connectionTimedOut.rawValue))
        XCTAssertEqual(s.status, .failed)
        XCTAssertEqual(rec.events, [.failed(1021)])
    }

    func testDisconnectWhileConnectingEndsDisconnected() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let rec = Recorder()
        let s = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: rec, settings: SessionSettings(serverURL: ts.server.signalingURL))
        try s.connect(token: ts.server.token(sessionId: sid))
        try s.disconnect()
        rec.waitFor(.disconnected)
        XCTAssertEqual(s.status, .notConnected)
        XCTAssertEqual(rec.events.last, .disconnected)
        XCTAssertFalse(rec.events.contains { if case .failed = $0 { true } else { false } })
        // And the session can connect again afterwards.
        rec.clear()
        try s.connect(token: ts.server.token(sessionId: sid))
        rec.waitFor(.connected)
    }
}
