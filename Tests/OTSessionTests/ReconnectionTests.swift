import Foundation
import OTBase
import OTServer
import OTSession
import OTTestSupport
import OTWire
import XCTest

/// Automatic reconnection over real sockets: clients reach the embedded server through a `TCPProxy` that cuts
/// every connection on demand (and can refuse new ones for a while).
final class ReconnectionTests: XCTestCase {
    private func limits(grace: Duration) -> ServerLimits {
        var l = ServerLimits()
        l.reconnectGrace = grace
        return l
    }

    /// A server, a session on it and a `TCPProxy` in front of it (stopped at teardown).
    private func proxiedServer(_ limits: ServerLimits = ServerLimits()) throws -> (TestServer, String, TCPProxy) {
        let ts = try TestServer(limits: limits)
        let sid = try ts.session()
        let proxy = try TCPProxy(targetPort: ts.server.port)
        addTeardownBlock { proxy.stop() }
        return (ts, sid, proxy)
    }

    /// Cuts every connection through `proxy` (refusing new ones when asked) and waits until `rec` reports reconnecting.
    private func cutOff(_ proxy: TCPProxy, refusing: Bool, until rec: Recorder) {
        proxy.refusing = refusing
        proxy.severAll()
        rec.waitFor(.reconnecting)
    }

    private func count(_ e: Recorder.Event, in events: [Recorder.Event]) -> Int { events.filter { $0 == e }.count }

    func testSeveredConnectionResumesWithTheSameConnectionId() throws {
        let (ts, sid, proxy) = try proxiedServer()
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        let (b, recB) = try ts.client(sid, name: "b")
        let idA = try XCTUnwrap(a.connection?.id)
        recB.waitFor(.connectionCreated(idA))

        let severedAt = MonotonicClock.now()
        proxy.severAll()
        recA.waitFor(.reconnecting)
        // As in OpenTok, the status stays connected while reconnecting.
        XCTAssertEqual(a.status, .connected)
        recA.waitFor(.reconnected)
        // Not asserted (depends on the machine's load): the first attempt waits 100 ms.
        print(String(format: "[figures] signaling: severed to reconnected %.0f ms", Double((MonotonicClock.now() - severedAt).microseconds) / 1000))
        XCTAssertFalse(a.isReconnecting)
        XCTAssertEqual(a.connection?.id, idA)
        XCTAssertEqual(a.status, .connected)
        XCTAssertEqual(Set(a.connections.keys), [try XCTUnwrap(b.connection?.id)])
        XCTAssertGreaterThanOrEqual(proxy.acceptedCount, 2)

        // The others saw nothing (the connection was never gone), and signals flow both ways again.
        try a.signal(type: "after", data: "from-a")
        recB.waitFor(.signal("after", "from-a", idA))
        try b.signal(type: "back", data: "from-b")
        recA.waitFor(.signal("back", "from-b", b.connection?.id))
        XCTAssertFalse(recB.events.contains(.connectionDestroyed(idA)))
        XCTAssertFalse(recA.events.contains(.disconnected))
        XCTAssertEqual(ts.server.connections(in: sid).count, 2)
        try a.disconnect(); try b.disconnect()
        recA.waitFor(.disconnected)
    }

    func testSilentConnectionIsDetectedByPingTimeoutAndResumed() throws {
        let (ts, sid, proxy) = try proxiedServer()
        let rec = Recorder("a")
        let a = Session(apiKey: ts.project.apiKey, sessionId: sid, delegate: rec,
                        settings: SessionSettings(serverURL: proxy.url, pingInterval: .milliseconds(200)))
        try a.connect(token: ts.server.token(sessionId: sid))
        rec.waitFor(.connected)
        let id = try XCTUnwrap(a.connection?.id)
        // The connection stays up but nothing gets through: only the keepalive notices.
        proxy.blackhole = true
        rec.waitFor(.reconnecting)
        proxy.blackhole = false
        rec.waitFor(.reconnected)
        XCTAssertEqual(a.connection?.id, id)
        try a.signal(type: "alive", data: "")
        rec.waitFor(.signal("alive", "", id))
        XCTAssertFalse(rec.events.contains(.disconnected))
        try a.disconnect()
    }

    func testSignalsSentWhileReconnectingArriveOnceAfterReconnecting() throws {
        let (ts, sid, proxy) = try proxiedServer()
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        let (b, recB) = try ts.client(sid, name: "b")
        let idA = try XCTUnwrap(a.connection?.id)

        cutOff(proxy, refusing: true, until: recA)
        XCTAssertTrue(a.isReconnecting)
        let sent = Box<OTError?>()
        try a.signal(type: "queued", data: "1") { sent.put($0) }
        try a.signal(type: "queued", data: "2", to: b.connection?.id)
        // Opted out of the retry: refused at once, never sent.
        XCTAssertThrowsError(try a.signal(type: "dropped", data: "x", retryAfterReconnect: false)) {
            XCTAssertEqual(($0 as? OTError)?.code, .notConnected)
        }
        // A few refused attempts, then the server is reachable again.
        let refusedBefore = proxy.acceptedCount
        let deadline = Date().addingTimeInterval(10)
        while proxy.acceptedCount < refusedBefore + 2 && Date() < deadline { usleep(20_000) }
        XCTAssertFalse(recA.events.contains(.reconnected))
        proxy.refusing = false
        recA.waitFor(.reconnected)
        XCTAssertNil(sent.get() ?? nil, "the queued signal was sent and accepted")
        recB.wait("both queued signals") { $0.contains(.signal("queued", "1", idA)) && $0.contains(.signal("queued", "2", idA)) }
        // The sender (a signal to all includes it) gets its own signal too; a late duplicate would show up behind a marker.
        recA.waitFor(.signal("queued", "1", idA))
        try a.signal(type: "marker", data: "")
        recB.waitFor(.signal("marker", "", idA))
        recA.waitFor(.signal("marker", "", idA))
        let evB = recB.events, evA = recA.events
        XCTAssertEqual(count(.signal("queued", "1", idA), in: evB), 1)
        XCTAssertEqual(count(.signal("queued", "2", idA), in: evB), 1)
        XCTAssertEqual(count(.signal("queued", "1", idA), in: evA), 1)
        XCTAssertFalse(evB.contains { if case .signal("dropped", _, _) = $0 { return true }; return false })
        // The queued signals went out after the resume, in order.
        let order = evB.compactMap { e -> String? in if case .signal("queued", let d, _) = e { return d }; return nil }
        XCTAssertEqual(order, ["1", "2"])
        try a.disconnect(); try b.disconnect()
    }

    func testStreamAndConnectionChangesDuringTheOutageAreReportedAfterReconnecting() throws {
        let (ts, sid, proxy) = try proxiedServer()
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        let (b, _) = try ts.client(sid, name: "b")
        let (c, _) = try ts.client(sid, name: "c")
        let idB = try XCTUnwrap(b.connection?.id), idC = try XCTUnwrap(c.connection?.id)
        recA.waitFor(.connectionCreated(idC))
        // b publishes a stream before the outage; a sees it.
        let before = Box<Result<StreamInfo, OTError>>()
        try b.publishStream(PublishRequest(name: "before", hasAudio: true, hasVideo: true, videoType: "camera", width: 320, height: 240)) { before.put($0) }
        let oldStream = try XCTUnwrap(try before.get()?.get())
        recA.wait("old stream") { $0.contains(.streamCreated(oldStream)) }

        cutOff(proxy, refusing: true, until: recA)
        // During the outage: b withdraws its stream and publishes a new one, c leaves, d joins.
        try b.unpublishStream(oldStream.id)
        let during = Box<Result<StreamInfo, OTError>>()
        try b.publishStream(PublishRequest(name: "during", hasAudio: true, hasVideo: false, videoType: "screen", width: 640, height: 360)) { during.put($0) }
        let newStream = try XCTUnwrap(try during.get()?.get())
        try c.disconnect()
        let (d, _) = try ts.client(sid, name: "d")
        let idD = try XCTUnwrap(d.connection?.id)
        // Let the server settle (c gone) before the resume.
        let settle = Date().addingTimeInterval(10)
        while ts.server.connections(in: sid).contains(where: { $0.id == idC }) && Date() < settle { usleep(10_000) }
        XCTAssertFalse(recA.events.contains(.streamCreated(newStream)))
        proxy.refusing = false

        let ev = recA.wait("reconciled roster") {
            $0.contains(.reconnected) && $0.contains(.streamDestroyed(oldStream.id)) && $0.contains(.streamCreated(newStream))
                && $0.contains(.connectionDestroyed(idC)) && $0.contains(.connectionCreated(idD))
        }
        // Each change reported exactly once, after the reconnection.
        let tail = Array(ev.drop { $0 != .reconnected })
        for e: Recorder.Event in [.streamDestroyed(oldStream.id), .streamCreated(newStream), .connectionDestroyed(idC), .connectionCreated(idD)] {
            XCTAssertEqual(count(e, in: tail), 1, "\(e) in \(tail)")
        }
        XCTAssertEqual(count(.streamCreated(newStream), in: ev), 1)
        XCTAssertEqual(Set(a.streams.keys), [newStream.id])
        XCTAssertEqual(Set(a.connections.keys), [idB, idD])
        // Nothing arrives twice later either (the server replays what it queued behind the roster).
        try b.signal(type: "marker", data: "")
        recA.waitFor(.signal("marker", "", idB))
        let all = recA.events
        XCTAssertEqual(count(.streamCreated(newStream), in: all), 1)
        XCTAssertEqual(count(.connectionCreated(idD), in: all), 1)
        XCTAssertEqual(count(.connectionDestroyed(idC), in: all), 1)
        try a.disconnect(); try b.disconnect(); try d.disconnect()
    }

    func testOutageLongerThanTheGracePeriodEndsInDisconnectWithConnectionDropped() throws {
        let (ts, sid, proxy) = try proxiedServer(limits(grace: .milliseconds(1500)))
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        let (b, recB) = try ts.client(sid, name: "b")
        let idA = try XCTUnwrap(a.connection?.id)

        cutOff(proxy, refusing: true, until: recA)
        let queued = Box<OTError?>()
        try a.signal(type: "never", data: "") { queued.put($0) }
        let ev = recA.wait("disconnect after the grace period") { $0.contains(.disconnected) }
        XCTAssertEqual(Array(ev.suffix(2)), [.failed(OTErrorCode.connectionDropped.rawValue), .disconnected])
        XCTAssertFalse(ev.contains(.reconnected))
        XCTAssertEqual(a.status, .notConnected)
        XCTAssertFalse(a.isReconnecting)
        XCTAssertEqual(queued.get()??.code, .notConnected)
        // The others see the connection go when the server's grace period ends.
        recB.waitFor(.connectionDestroyed(idA))
        XCTAssertFalse(recB.events.contains { if case .signal("never", _, _) = $0 { return true }; return false })
        proxy.refusing = false
        try b.disconnect()
    }

    func testResumeRefusedByTheServerEndsInDisconnect() throws {
        // A moderator removes the dropped connection while its client retries: the server refuses the resume.
        let (ts, sid, proxy) = try proxiedServer()
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        let (mod, recM) = try ts.client(sid, role: .moderator, name: "mod")
        let idA = try XCTUnwrap(a.connection?.id)
        cutOff(proxy, refusing: true, until: recA)
        try mod.forceDisconnect(idA)
        recM.waitFor(.connectionDestroyed(idA))
        proxy.refusing = false
        let ev = recA.wait("disconnect") { $0.contains(.disconnected) }
        XCTAssertEqual(Array(ev.suffix(2)), [.failed(OTErrorCode.connectionDropped.rawValue), .disconnected])
        XCTAssertFalse(ev.contains(.reconnected))
        XCTAssertEqual(a.status, .notConnected)
        try mod.disconnect()
    }

    func testExplicitDisconnectNeverReconnects() throws {
        let (ts, sid, proxy) = try proxiedServer()
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        try a.disconnect()
        recA.waitFor(.disconnected)
        let accepted = proxy.acceptedCount
        // Give a (wrong) reconnection every chance to start: sever anything left and wait past the first retries.
        proxy.severAll()
        let (b, recB) = try ts.client(sid, name: "b")
        try b.signal(type: "x", data: "")
        recB.waitFor(.signal("x", "", b.connection?.id))
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(proxy.acceptedCount, accepted)
        XCTAssertFalse(recA.events.contains(.reconnecting))
        XCTAssertEqual(a.status, .notConnected)
        try b.disconnect()
    }

    func testDisconnectWhileReconnectingEndsAtOnce() throws {
        let (ts, sid, proxy) = try proxiedServer()
        let (a, recA) = try ts.client(sid, name: "a", via: proxy)
        cutOff(proxy, refusing: true, until: recA)
        try a.disconnect()
        let ev = recA.wait("disconnected") { $0.contains(.disconnected) }
        XCTAssertFalse(ev.contains(.failed(OTErrorCode.connectionDropped.rawValue)))
        XCTAssertEqual(a.status, .notConnected)
        let accepted = proxy.acceptedCount
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(proxy.acceptedCount, accepted, "no attempt after the disconnect")
    }

    func testSessionReleasedWhileReconnectingStopsTrying() throws {
        let (ts, sid, proxy) = try proxiedServer()
        weak var released: Session?
        let rec = Recorder("a")
        do {
            let (a, _) = try ts.client(sid, name: "a", via: proxy)
            a.delegate = rec
            released = a
            cutOff(proxy, refusing: true, until: rec)
        }
        // Nothing else holds the session: it goes, and so do its attempts.
        let gone = Date().addingTimeInterval(10)
        while released != nil && Date() < gone { usleep(10_000) }
        XCTAssertNil(released)
        let accepted = proxy.acceptedCount
        Thread.sleep(forTimeInterval: 1)
        XCTAssertLessThanOrEqual(proxy.acceptedCount, accepted + 1, "at most an attempt already under way")
        XCTAssertFalse(rec.events.contains(.reconnected))
    }
}
