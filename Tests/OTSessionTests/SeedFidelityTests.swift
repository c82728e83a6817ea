import Foundation
import OTBase
import OTMedia
import OTServer
@testable import OTSession
import OTTestSupport
import OTWire
import XCTest

/// The seeds' semantics end to end through the embedded server and its media router: moderation that mutes (what is
/// sent, not only the flags), the subscriber's interruption events (routed publisher outage, a subscription that cannot
/// be re-established), session navigation, and one ordered delivery of a session's messages on its `apiQueue`.
final class SeedFidelityTests: RoutedServerTestCase {
    /// A small publisher (160x120 at 10 fps) with a tone, recorded by a new recorder.
    private func publish(_ s: Session, name: String) throws -> (Publisher, MediaRecorder, StreamInfo) {
        let rec = MediaRecorder(name)
        let device = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.5))
        let p = try Publisher(delegate: rec, settings: PublisherSettings(name: name, videoSource: .testPattern, audioDevice: device,
                                                                        width: 160, height: 120, fps: 10, startBitrateKbps: 150))
        try s.publish(p)
        rec.wait("\(name) streamCreated") { $0.publisherStreamCreated }
        return (p, rec, try XCTUnwrap(p.stream))
    }

    /// Subscribes `s` to `stream` and waits for media (audio and video packets).
    private func subscribe(_ s: Session, _ stream: StreamInfo, name: String) throws -> (Subscriber, MediaRecorder) {
        let rec = MediaRecorder(name)
        let sub = Subscriber(stream: stream, delegate: rec)
        try s.subscribe(sub)
        rec.waitFor(.connected)
        // Polled: `stats` waits for the media thread, which must not wait for the recorder's lock meanwhile.
        XCTAssertTrue(within(10) { sub.stats.audioPacketsReceived > 10 && sub.stats.videoPacketsReceived > 10 },
                      "\(name): audio and video; \(mediaReport(sub, stream))")
        return (sub, rec)
    }

    /// What `sub` and the router saw of `stream`, for a failure's message (which kind stopped where).
    private func mediaReport(_ sub: Subscriber, _ stream: StreamInfo) -> String {
        let s = sub.stats
        let link = sub.mediaPeerId.flatMap { router.peerStats(peerId: $0) }
        return "subscriber connected \(sub.isConnected), \(s.audioPacketsReceived) audio and \(s.videoPacketsReceived) video packets, "
            + "\(s.framesDecoded) frames; router's stream: \(router.counters(streamId: stream.id).map { "\($0)" } ?? "none"); "
            + "router's link to the subscriber: \(link.map { "\($0)" } ?? "none")"
    }

    /// Polls `cond` every 50 ms for up to `seconds`; true once it holds.
    private func within(_ seconds: Double, _ cond: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !cond() {
            if Date() > deadline { return false }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return true
    }

    /// Waits until `sub`'s received audio packets stay the same for 600 ms (bounded); true when they did.
    private func audioStops(_ sub: Subscriber) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        var last = sub.stats.audioPacketsReceived
        while Date() < deadline {
            Thread.sleep(forTimeInterval: 0.6)
            let now = sub.stats.audioPacketsReceived
            if now == last { return true }
            last = now
        }
        return false
    }

    /// Waits until `sub` has received `more` audio packets than now; true when it did.
    private func audioFlows(_ sub: Subscriber, more: Int = 20) -> Bool {
        let start = sub.stats.audioPacketsReceived
        return within(10) { sub.stats.audioPacketsReceived >= start + more }
    }

    func testForceMuteAllStopsAudioAtEverySubscriberAndNewPublishersJoinMutedUntilDisabled() throws {
        let sid = try server.session(relayed: false)
        let (mod, modRec) = try server.client(sid, role: .moderator, name: "mod")
        let (a, aRec) = try server.client(sid, name: "A")
        let (b, _) = try server.client(sid, name: "B")
        defer { for s in [mod, a, b] { try? s.disconnect() } }
        let (pubA, recA, streamA) = try publish(a, name: "a")
        let (pubB, recB, streamB) = try publish(b, name: "b")
        let (pubM, recM, streamM) = try publish(mod, name: "m")
        modRec.wait("streams at mod") { $0.contains(.streamCreated(streamA)) && $0.contains(.streamCreated(streamB)) }
        let (modFromA, _) = try subscribe(mod, streamA, name: "mod <- a")
        let (modFromB, _) = try subscribe(mod, streamB, name: "mod <- b")
        aRec.wait("m at A") { $0.contains(.streamCreated(streamM)) }
        let (aFromM, _) = try subscribe(a, streamM, name: "a <- m")

        // Mute all but B: the session event names no stream and lists the excluded one.
        let done = Box<OTError?>()
        try mod.forceMuteAll(excludingStreams: [streamB]) { done.put($0) }
        XCTAssertEqual(done.get() ?? nil, nil)
        for r in [modRec, aRec] { r.waitFor(.muteForced(true, nil)) }
        // Every publisher concerned, the moderator's own included, stops sending audio and says so.
        recA.waitFor(.muteForced)
        recM.waitFor(.muteForced)
        XCTAssertFalse(pubA.publishAudio)
        XCTAssertFalse(pubM.publishAudio)
        XCTAssertTrue(pubB.publishAudio, "the excluded stream keeps its audio")
        XCTAssertTrue(audioStops(modFromA), "A's audio stops at its subscriber")
        XCTAssertTrue(audioStops(aFromM), "the moderator's own audio stops too")
        XCTAssertTrue(audioFlows(modFromB), "the excluded stream's audio keeps flowing")
        XCTAssertFalse(recB.events.contains(.muteForced))
        XCTAssertGreaterThan(modFromA.stats.videoPacketsReceived, 0)
        let videoBefore = modFromA.stats.videoPacketsReceived
        XCTAssertEqual(mod.streams[streamA.id]?.hasAudio, false)
        XCTAssertEqual(mod.streams[streamM.id]?.hasAudio, false, "the own stream, as the session lists it")
        XCTAssertTrue(mod.streams[streamB.id]?.hasAudio ?? false)

        // A publisher that joins while the mute is active publishes muted: no audio reaches its subscriber.
        let (late, lateRec) = try server.client(sid, name: "late")
        defer { try? late.disconnect() }
        XCTAssertTrue(late.isMuteForced)
        let (pubL, recL, streamL) = try publish(late, name: "l")
        XCTAssertFalse(streamL.hasAudio)
        recL.waitFor(.muteForced)
        XCTAssertFalse(pubL.publishAudio)
        modRec.wait("late stream at mod") { $0.contains { if case .streamCreated(let s) = $0 { s.id == streamL.id } else { false } } }
        let modFromL = Subscriber(stream: try XCTUnwrap(mod.streams[streamL.id]), delegate: nil)
        try mod.subscribe(modFromL)
        XCTAssertTrue(within(10) { modFromL.stats.videoPacketsReceived >= 20 })
        XCTAssertEqual(modFromL.stats.audioPacketsReceived, 0, "a stream published during the mute sends no audio")
        XCTAssertGreaterThan(modFromA.stats.videoPacketsReceived, videoBefore, "video was never muted")

        // Disabled: new publishers keep their audio; the muted ones stay muted until they unmute themselves.
        try mod.disableForceMute()
        lateRec.waitFor(.muteForced(false, nil))
        let (after, _) = try server.client(sid, name: "after")
        defer { try? after.disconnect() }
        let (pubAfter, recAfter, streamAfter) = try publish(after, name: "after")
        XCTAssertTrue(streamAfter.hasAudio)
        XCTAssertTrue(pubAfter.publishAudio)
        XCTAssertFalse(recAfter.events.contains(.muteForced))
        XCTAssertTrue(audioStops(modFromA))
        pubA.publishAudio = true
        XCTAssertTrue(audioFlows(modFromA), "unmuted by its own publisher")
        modRec.wait("A's audio back") { $0.contains(.changed(streamA.id, .hasAudio(true))) }
    }

    func testForceMuteStreamNamesTheStreamAndStopsItsAudio() throws {
        let sid = try server.session(relayed: false)
        let (mod, modRec) = try server.client(sid, role: .moderator, name: "mod")
        let (a, aRec) = try server.client(sid, name: "A")
        defer { for s in [mod, a] { try? s.disconnect() } }
        let (pubA, recA, streamA) = try publish(a, name: "a")
        modRec.wait("stream") { $0.contains(.streamCreated(streamA)) }
        let (sub, _) = try subscribe(mod, streamA, name: "mod <- a")
        try mod.forceMuteStream(streamA.id)
        aRec.waitFor(.muteForced(true, streamA.id))
        modRec.waitFor(.muteForced(true, streamA.id))
        recA.waitFor(.muteForced)
        XCTAssertFalse(pubA.publishAudio)
        XCTAssertFalse(a.isMuteForced, "one stream's mute is not a mute all")
        XCTAssertTrue(audioStops(sub))
    }

    func testRoutedPublisherOutageIsAnInterruptionOfItsSubscribers() throws {
        let t = try server.publishTone(try server.session(relayed: false))
        defer { t.disconnect() }
        let (sub, subRec, _) = try t.subscribeB(frames: 5)
        let peerBefore = try XCTUnwrap(sub.mediaPeerId)
        let lastFrame = { subRec.stamps.last?.frameNumber ?? 0 }
        // The router loses the publisher's connection: its subscribers hear of it, and of its return after the republish.
        router.close(peerId: try XCTUnwrap(t.publisher.routerPeerId))
        subRec.waitFor(.disconnected)
        XCTAssertFalse(sub.isConnected)
        subRec.waitFor(.reconnected)
        XCTAssertTrue(sub.isConnected)
        XCTAssertEqual(subRec.events, [.connected, .disconnected, .reconnected])
        XCTAssertEqual(sub.mediaPeerId, peerBefore, "the subscriber's own connection never failed")
        let before = lastFrame()
        subRec.wait("frames after the outage") { _ in lastFrame() > before + 5 }
        XCTAssertFalse(t.bRec.events.contains(.streamDestroyed(t.stream.id)))
        XCTAssertEqual(t.publisher.republishCount, 1)
    }

    func testSubscriptionThatCannotBeReestablishedReportsTheStreamDestroyed() throws {
        let sid = try server.session(relayed: false)
        let proxy = try TCPProxy(targetPort: server.server.port)
        defer { proxy.stop() }
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B", via: proxy)
        defer { try? a.disconnect(); try? b.disconnect() }
        let (_, _, stream) = try publish(a, name: "a")
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
        let subRec = MediaRecorder("b <- a")
        let sub = Subscriber(stream: try XCTUnwrap(b.streams[stream.id]), delegate: subRec,
                             settings: SubscriberSettings(connectTimeout: .seconds(2)))
        try b.subscribe(sub)
        subRec.waitFor(.connected)
        // B's signaling is down (its new offers wait), and the router drops B's media connection.
        proxy.refusing = true
        proxy.severAll()
        bRec.waitFor(.reconnecting)
        router.close(peerId: try XCTUnwrap(sub.mediaPeerId))
        subRec.waitFor(.disconnected)
        // Not re-established within connectTimeout: the session reports the stream destroyed (as the seeds say), no error.
        bRec.waitFor(.streamDestroyed(stream.id))
        XCTAssertNil(b.streams[stream.id])
        XCTAssertEqual(subRec.events, [.connected, .disconnected])
        XCTAssertThrowsError(try b.unsubscribe(sub)) { XCTAssertEqual(($0 as? OTError)?.code, .subscriberNotFound) }
        // The stream is alive on the server: once B is back, the roster brings it back.
        proxy.refusing = false
        bRec.waitFor(.reconnected)
        bRec.wait("stream again") { ev in ev.filter { $0 == .streamCreated(stream) }.count == 2 }
        XCTAssertNotNil(b.streams[stream.id])
    }

    func testNavigationStreamsOwnAndConnectionsWithSuppressedEvents() throws {
        let sid = try server.session(relayed: false)
        let (a, aRec) = try server.client(sid, data: "name=ann", name: "A")
        let (mod, modRec) = try server.client(sid, role: .moderator, suppressed: true, name: "mod")
        defer { try? mod.disconnect() }
        let (_, _, streamA) = try publish(a, name: "a")
        let (_, _, streamM) = try publish(mod, name: "m")
        modRec.wait("A's stream") { $0.contains { if case .streamCreated(let s) = $0 { s.id == streamA.id } else { false } } }
        XCTAssertTrue(mod.connections.isEmpty, "connection events are suppressed")
        XCTAssertEqual(Set(mod.streams.keys), [streamA.id, streamM.id], "the session's streams include its own")
        XCTAssertTrue(mod.isOwn(try XCTUnwrap(mod.streams[streamM.id])))
        XCTAssertFalse(mod.isOwn(try XCTUnwrap(mod.streams[streamA.id])))
        // The stream names its owner with the token's data: reachable without connection events.
        let owner = try XCTUnwrap(mod.streams[streamA.id]).connection
        XCTAssertEqual(owner.id, a.connection?.id)
        XCTAssertEqual(owner.data, "name=ann")
        XCTAssertEqual(try XCTUnwrap(mod.streams[streamM.id]).connection.id, mod.connection?.id)
        let sub = Subscriber(stream: streamA, delegate: nil)
        XCTAssertEqual(sub.stream.connection.data, "name=ann")
        let sent = Box<OTError?>()
        try mod.signal(type: "hello", data: "x", to: owner.id) { sent.put($0) }
        XCTAssertEqual(sent.get() ?? nil, nil)
        aRec.waitFor(.signal("hello", "x", mod.connection?.id))
        try mod.forceDisconnect(owner.id)
        aRec.waitFor(.disconnected)
        modRec.waitFor(.streamDestroyed(streamA.id))
        XCTAssertEqual(Set(mod.streams.keys), [streamM.id])
    }
}

/// One order for a session's, its publisher's and its subscribers' messages, on the app's `apiQueue`.
final class APIQueueOrderTests: RoutedServerTestCase {
    final class OrderRecorder: SessionDelegate, PublisherDelegate, SubscriberDelegate, @unchecked Sendable {
        let key: DispatchSpecificKey<String>
        private let lock = NSLock()
        private var _log: [String] = []
        private var _offQueue: [String] = []
        var onConnect: (() -> Void)?
        init(key: DispatchSpecificKey<String>) { self.key = key }
        var log: [String] { lock.withLock { _log } }
        var offQueue: [String] { lock.withLock { _offQueue } }
        private func add(_ s: String) {
            let onApp = DispatchQueue.getSpecific(key: key) == "app"
            lock.withLock { _log.append(s); if !onApp { _offQueue.append(s) } }
        }
        func waitFor(_ s: String, file: StaticString = #filePath, line: UInt = #line) {
            let deadline = Date().addingTimeInterval(15)
            while !log.contains(s) && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            XCTAssertTrue(log.contains(s), "no \(s) in \(log)", file: file, line: line)
        }
        func index(_ s: String) -> Int { log.firstIndex(of: s) ?? -1 }

        func sessionDidConnect(_ session: Session) { add("session.connected"); onConnect?() }
        func sessionDidDisconnect(_ session: Session) { add("session.disconnected") }
        func session(_ session: Session, muteForced info: MuteForcedInfo) { add("session.muteForced") }
        func session(_ session: Session, statusChanged status: SessionStatus) { add("status.\(status)") }
        func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) { add("publisher.streamCreated") }
        func publisher(_ publisher: Publisher, streamDestroyed stream: StreamInfo) { add("publisher.streamDestroyed") }
        func publisher(_ publisher: Publisher, muteForced active: Bool) { add("publisher.muteForced") }
        func subscriberDidConnect(toStream subscriber: Subscriber) { add("subscriber.connected") }
    }

    func testSessionPublisherAndSubscriberMessagesComeInOneOrderOnTheAPIQueue() throws {
        let sid = try server.session(relayed: false)
        let key = DispatchSpecificKey<String>()
        let app = DispatchQueue(label: "app", attributes: .concurrent)
        app.setSpecific(key: key, value: "app")
        let rec = OrderRecorder(key: key)
        let session = Session(apiKey: server.project.apiKey, sessionId: sid, delegate: rec,
                              settings: SessionSettings(serverURL: server.server.signalingURL, apiQueue: app))
        XCTAssertTrue(session.apiQueue === app)
        let publisher = try Publisher(delegate: rec, settings: PublisherSettings(width: 160, height: 120, fps: 10, startBitrateKbps: 150))
        let published = Box<OTError?>()
        // The API may be called from inside a delegate message: publish on connect.
        rec.onConnect = { published.put(Result(catching: { try session.publish(publisher) }).failure) }
        try session.connect(token: server.server.token(sessionId: sid, role: .moderator))
        XCTAssertNil(published.get() ?? nil)
        rec.waitFor("publisher.streamCreated")
        let subscriber = Subscriber(stream: try XCTUnwrap(publisher.stream), delegate: rec)
        try session.subscribe(subscriber)
        rec.waitFor("subscriber.connected")
        try session.forceMuteAll()
        rec.waitFor("publisher.muteForced")
        try session.disconnect()
        rec.waitFor("session.disconnected")
        let log = rec.log
        XCTAssertEqual(rec.offQueue, [], "every message on the app's queue")
        XCTAssertEqual(log.filter { $0.hasPrefix("status.") },
                       ["status.connecting", "status.connected", "status.disconnecting", "status.notConnected"])
        XCTAssertLessThan(rec.index("status.connected"), rec.index("session.connected"))
        XCTAssertLessThan(rec.index("session.muteForced"), rec.index("publisher.muteForced"), "the session's message, then its consequence")
        XCTAssertLessThan(rec.index("publisher.streamDestroyed"), rec.index("session.disconnected"), "the session's end comes last")
        XCTAssertEqual(log.last, "session.disconnected")
    }
}

private extension Result where Failure == Error {
    var failure: OTError? { if case .failure(let e) = self { e as? OTError ?? OTError(.internalError) } else { nil } }
}
