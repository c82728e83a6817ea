import Foundation
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

final class SessionEventsTests: XCTestCase {
    func testConnectionEventsIncludeThosePresentAtConnect() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let (a, ra) = try ts.client(sid, name: "a")
        let (b, rb) = try ts.client(sid, name: "b")
        guard let aid = a.connection?.id, let bid = b.connection?.id else { return XCTFail("no connection ids") }
        XCTAssertNotEqual(aid, bid)
        ra.waitFor(.connectionCreated(bid))
        rb.waitFor(.connectionCreated(aid))
        XCTAssertEqual(rb.events.first, .connected, "didConnect comes before connections already present")
        XCTAssertEqual(Set(b.connections.keys), [aid])

        // A suppressed client gets no connection events (the others still see it).
        let (c, rc) = try ts.client(sid, suppressed: true, name: "c")
        let (d, rd) = try ts.client(sid, name: "d")
        guard let cid = c.connection?.id, d.connection != nil else { return XCTFail() }
        rd.wait("a, b and c") { $0.contains(.connectionCreated(aid)) && $0.contains(.connectionCreated(bid)) && $0.contains(.connectionCreated(cid)) }
        ra.waitFor(.connectionCreated(cid))
        XCTAssertEqual(rc.events, [.connected])
        XCTAssertTrue(c.connections.isEmpty)

        try b.disconnect()
        rb.waitFor(.disconnected)
        ra.waitFor(.connectionDestroyed(bid))
        rd.waitFor(.connectionDestroyed(bid))
        XCTAssertFalse(rc.events.contains(.connectionDestroyed(bid)))
        XCTAssertNil(a.connections[bid])
    }

    func testStreamsAreAnnouncedKeptCurrentAndWithdrawn() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let (pub, _) = try ts.client(sid, name: "pub")
        let (sub, rs) = try ts.client(sid, role: .subscriber, name: "sub")
        let box = Box<Result<StreamInfo, OTError>>()
        try pub.publishStream(PublishRequest(name: "cam", hasAudio: true, hasVideo: true, videoType: "camera", width: 640, height: 480)) { box.put($0) }
        guard case .success(let stream)? = box.get() else { return XCTFail("publish failed") }
        XCTAssertEqual(stream.connectionId, pub.connection?.id)
        XCTAssertEqual(stream.name, "cam")
        XCTAssertGreaterThan(stream.creationTime, 0)
        rs.waitFor(.streamCreated(stream))
        XCTAssertEqual(sub.streams[stream.id], stream)
        XCTAssertEqual(ts.server.streams(in: sid), [stream])

        // A client joining later learns about the stream at connect.
        let (late, rl) = try ts.client(sid, name: "late")
        rl.waitFor(.streamCreated(stream))
        XCTAssertEqual(late.streams.count, 1)

        try pub.updateStream(stream.id, hasAudio: false)
        try pub.updateStream(stream.id, hasVideo: false)
        try pub.updateStream(stream.id, width: 1280, height: 720)
        rs.waitFor(.changed(stream.id, .dimensions(width: 1280, height: 720)))
        let changes = rs.events.compactMap { if case .changed(_, let c) = $0 { c } else { nil } }
        XCTAssertEqual(changes, [.hasAudio(false), .hasVideo(false), .dimensions(width: 1280, height: 720)])
        XCTAssertEqual(sub.streams[stream.id]?.hasAudio, false)
        XCTAssertEqual(sub.streams[stream.id]?.width, 1280)

        // Subscribing is a role matter: a subscriber may, the server refuses a publisher-only.
        let okBox = Box<Result<StreamInfo, OTError>>()
        try sub.requestSubscribe(stream.id) { okBox.put($0) }
        guard case .success? = okBox.get() else { return XCTFail("subscriber could not subscribe") }
        let (po, _) = try ts.client(sid, role: .publisheronly, name: "po")
        let noBox = Box<Result<StreamInfo, OTError>>()
        try po.requestSubscribe(stream.id) { noBox.put($0) }
        guard case .failure(let e)? = noBox.get() else { return XCTFail("publisheronly subscribed") }
        XCTAssertEqual(e.code, .forceUnpublishOrInvalidStream)

        // A subscriber cannot publish.
        let refused = Box<Result<StreamInfo, OTError>>()
        try sub.publishStream(PublishRequest()) { refused.put($0) }
        guard case .failure(let pe)? = refused.get() else { return XCTFail("subscriber published") }
        XCTAssertEqual(pe.code, .unableToPublish)

        let done = Box<OTError?>()
        try pub.unpublishStream(stream.id) { done.put($0) }
        XCTAssertEqual(done.get() ?? nil, nil)
        rs.waitFor(.streamDestroyed(stream.id))
        rl.waitFor(.streamDestroyed(stream.id))
        XCTAssertTrue(sub.streams.isEmpty)
        XCTAssertTrue(ts.server.streams(in: sid).isEmpty)
    }

    func testSignalsToAllAndToOneWithSender() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let (a, ra) = try ts.client(sid, name: "a")
        let (b, rb) = try ts.client(sid, name: "b")
        let (c, rc) = try ts.client(sid, role: .subscriber, name: "c")
        guard let aid = a.connection?.id, let bid = b.connection?.id, let cid = c.connection?.id else { return XCTFail() }
        let sent = Box<OTError?>()
        try a.signal(type: "chat", data: "hello all") { sent.put($0) }
        XCTAssertEqual(sent.get() ?? nil, nil)
        for r in [ra, rb, rc] { r.waitFor(.signal("chat", "hello all", aid)) }
        try b.signal(type: "dm", data: "just c", to: cid)
        rc.waitFor(.signal("dm", "just c", bid))
        // Empty type and data are valid; unicode data counts in bytes.
        try a.signal(type: "", data: "")
        rb.waitFor(.signal("", "", aid))
        XCTAssertFalse(ra.events.contains(.signal("dm", "just c", bid)))
        XCTAssertFalse(rb.events.contains(.signal("dm", "just c", bid)))

        // Local validation, with OpenTok codes, before anything is sent.
        func code(_ f: () throws -> Void) -> OTErrorCode? {
            do { try f(); return nil } catch let e as OTError { return e.code } catch { return nil }
        }
        XCTAssertEqual(code { try a.signal(type: String(repeating: "t", count: 129), data: "") }, .signalTypeTooLong)
        XCTAssertNil(code { try a.signal(type: String(repeating: "t", count: 128), data: "") })
        XCTAssertEqual(code { try a.signal(type: "bad type", data: "") }, .invalidSignalType)
        XCTAssertEqual(code { try a.signal(type: "é", data: "") }, .invalidSignalType)
        XCTAssertEqual(code { try a.signal(type: "ok", data: String(repeating: "x", count: 8193)) }, .signalDataTooLong)
        XCTAssertEqual(code { try a.signal(type: "ok", data: String(repeating: "é", count: 4097)) }, .signalDataTooLong)
        XCTAssertNil(code { try a.signal(type: "ok", data: String(repeating: "x", count: 8192)) })
        XCTAssertEqual(code { try c.signal(type: "ok", data: "") }, .forceUnpublishOrInvalidStream)

        // Signal to a connection that is not in the session: the server refuses.
        let bad = Box<OTError?>()
        try a.signal(type: "x", data: "", to: "nobody") { bad.put($0) }
        XCTAssertEqual((bad.get() ?? nil)?.code, .invalidParameter)

        // Signals from one sender arrive in order.
        for i in 0..<50 { try a.signal(type: "seq", data: String(i)) }
        let ev = rb.wait("50 ordered signals") { $0.filter { if case .signal("seq", _, _) = $0 { true } else { false } }.count == 50 }
        let seq = ev.compactMap { if case .signal("seq", let d, _) = $0 { Int(d) } else { nil } }
        XCTAssertEqual(seq, Array(0..<50))
    }

    func testForceMuteAllStreamAndDisable() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let (mod, rm) = try ts.client(sid, role: .moderator, name: "mod")
        let (p1, r1) = try ts.client(sid, name: "p1")
        let (p2, r2) = try ts.client(sid, name: "p2")
        func publish(_ s: Session) throws -> StreamInfo {
            let box = Box<Result<StreamInfo, OTError>>()
            try s.publishStream(PublishRequest(name: "x")) { box.put($0) }
            guard case .success(let st)? = box.get() else { throw OTError(.unableToPublish) }
            return st
        }
        let s1 = try publish(p1), s2 = try publish(p2)
        rm.wait("two streams") { $0.contains(.streamCreated(s1)) && $0.contains(.streamCreated(s2)) }
        XCTAssertEqual(mod.streams.count, 2)

        // Non-moderators are refused locally with 1535.
        XCTAssertThrowsError(try p1.forceMuteAll()) { XCTAssertEqual(($0 as? OTError)?.code, .forceUnpublishOrInvalidStream) }
        XCTAssertThrowsError(try p1.forceMuteStream(s2.id)) { XCTAssertEqual(($0 as? OTError)?.code, .forceUnpublishOrInvalidStream) }
        XCTAssertThrowsError(try p1.disableForceMute()) { XCTAssertEqual(($0 as? OTError)?.code, .forceUnpublishOrInvalidStream) }

        try mod.forceMuteAll(excluding: [s2.id])
        for r in [rm, r1, r2] { r.waitFor(.muteForced(true, nil)) }
        rm.waitFor(.changed(s1.id, .hasAudio(false)))
        r2.waitFor(.changed(s1.id, .hasAudio(false)))
        XCTAssertFalse(rm.events.contains(.changed(s2.id, .hasAudio(false))), "excluded stream stays unmuted")
        XCTAssertTrue(p2.isMuteForced)

        // A stream published while the mute is active starts muted.
        let (p3, _) = try ts.client(sid, name: "p3")
        XCTAssertTrue(p3.isMuteForced)
        let s3 = try publish(p3)
        XCTAssertFalse(s3.hasAudio)

        try mod.disableForceMute()
        for r in [rm, r1, r2] { r.waitFor(.muteForced(false, nil)) }
        XCTAssertFalse(p1.isMuteForced)

        try mod.forceMuteStream(s2.id)
        for r in [rm, r1, r2] { r.waitFor(.muteForced(true, s2.id)) }
        r1.waitFor(.changed(s2.id, .hasAudio(false)))
        let unknown = Box<OTError?>()
        try mod.forceMuteStream("nope") { unknown.put($0) }
        XCTAssertEqual((unknown.get() ?? nil)?.code, .serverCannotFindStream)
    }

    func testForceDisconnect() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let (mod, rm) = try ts.client(sid, role: .moderator, name: "mod")
        let (victim, rv) = try ts.client(sid, name: "victim")
        let (other, ro) = try ts.client(sid, name: "other")
        let box = Box<Result<StreamInfo, OTError>>()
        try victim.publishStream(PublishRequest(name: "v")) { box.put($0) }
        guard case .success(let st)? = box.get(), let vid = victim.connection?.id else { return XCTFail() }
        ro.waitFor(.streamCreated(st))

        // OTSessionUnableToForceDisconnect (1520): not a moderator (refused locally), or no such connection (the server).
        XCTAssertThrowsError(try other.forceDisconnect(vid)) { XCTAssertEqual(($0 as? OTError)?.code, .unableToForceDisconnect) }
        let nobody = Box<OTError?>()
        try mod.forceDisconnect("nobody") { nobody.put($0) }
        XCTAssertEqual((nobody.get() ?? nil)?.code, .unableToForceDisconnect)
        let done = Box<OTError?>()
        try mod.forceDisconnect(vid) { done.put($0) }
        XCTAssertEqual(done.get() ?? nil, nil)
        rv.waitFor(.disconnected)
        XCTAssertFalse(rv.events.contains { if case .failed = $0 { true } else { false } }, "a forced disconnect is not an error")
        XCTAssertEqual(victim.status, .notConnected)
        ro.waitFor(.streamDestroyed(st.id))
        ro.waitFor(.connectionDestroyed(vid))
        rm.waitFor(.connectionDestroyed(vid))
        let ev = ro.events
        if let si = ev.firstIndex(of: .streamDestroyed(st.id)), let ci = ev.firstIndex(of: .connectionDestroyed(vid)) {
            XCTAssertLessThan(si, ci, "the stream goes before its connection")
        }
        XCTAssertTrue(ts.server.connections(in: sid).allSatisfy { $0.id != vid })
    }

    func testReportIssueIsLoggedByTheServer() throws {
        let ts = try TestServer()
        let sid = try ts.session()
        let (a, _) = try ts.client(sid)
        let box = Box<Result<String, OTError>>()
        let issueId = try a.reportIssue("audio cuts out") { box.put($0) }
        guard case .success(let confirmed)? = box.get() else { return XCTFail() }
        XCTAssertEqual(confirmed, issueId)
        let logged = ts.server.reportedIssues
        XCTAssertEqual(logged.count, 1)
        XCTAssertEqual(logged.first?.issueId, issueId)
        XCTAssertEqual(logged.first?.description, "audio cuts out")
        XCTAssertEqual(logged.first?.connectionId, a.connection?.id)
        XCTAssertEqual(logged.first?.sessionId, sid)
    }
}

final class SessionLifetimeTests: XCTestCase {
    func testReleasingAConnectedSessionLeavesPromptly() throws {
        var limits = ServerLimits()
        limits.reconnectGrace = .seconds(120)
        let ts = try TestServer(limits: limits)
        let sid = try ts.session()
        let (a, ra) = try ts.client(sid)
        var b: Session? = try ts.client(sid).0
        guard let bid = b?.connection?.id else { return XCTFail() }
        ra.waitFor(.connectionCreated(bid))
        b = nil
        // Long before the resume grace period ends: the leave is explicit, not a drop.
        ra.waitFor(.connectionDestroyed(bid))
        XCTAssertEqual(ts.server.connections(in: sid).map(\.id), [a.connection?.id ?? ""])
        _ = b
    }
}
