import Foundation
import OTBase
import OTServer
@testable import OTSession
import OTTestSupport
import Synchronization
import XCTest

/// One client subscribes to the same stream and unsubscribes it again four times, then subscribes a fifth time and
/// stays: only the live subscriber receives. The ended ones get no frame after their unsubscribe, the session lets
/// go of them (their receive pipelines and peer connections with them), and the other side stops sending to them: a
/// relayed publisher is back to one connection up, the media router to one subscriber of the stream, the server to
/// the live peer connections. The stream's end then ends the live one alike.
final class SubscriberTeardownTests: XCTestCase {
    func testRelayedUnsubscribedSubscribersStopReceiving() throws { try assertOnlyTheLiveSubscriberReceives(relayed: true) }
    func testRoutedUnsubscribedSubscribersStopReceiving() throws { try assertOnlyTheLiveSubscriberReceives(relayed: false) }

    /// A subscribe or publish refused because the object is live (in the same session or the other): `onAccepted`
    /// never runs, and the live subscription and publish stay where they are: unsubscribe and unpublish still find
    /// them there (a refused subscribe into the subscriber's own session used to detach it from that session).
    func testARefusedSubscribeOrPublishLeavesTheLiveOneWhereItIs() throws {
        let server = try TestServer(routed: true)
        let t = try server.publishTone(try server.session(relayed: false))
        defer { t.disconnect() }
        let (sub, rec, _) = try t.subscribeB(frames: 3)
        let accepted = Mutex(0)
        for session in [t.b, t.a] {
            XCTAssertThrowsError(try session.subscribe(sub) { accepted.withLock { $0 += 1 } }) {
                XCTAssertEqual(($0 as? OTError)?.code, .illegalState)
            }
            XCTAssertThrowsError(try session.publish(t.publisher) { accepted.withLock { $0 += 1 } })
        }
        XCTAssertEqual(accepted.withLock { $0 }, 0)
        rec.waitForFrames(rec.frames + 3)
        XCTAssertNoThrow(try t.b.unsubscribe(sub))
        XCTAssertNoThrow(try t.a.unpublish(t.publisher))
        t.pubRec.wait("streamDestroyed") { $0.events.contains { if case .streamDestroyed = $0 { true } else { false } } }
    }

    /// A stop that lands while a subscribe or a publish is starting (just after the session accepted it, held there by
    /// a test hook while another thread stops it) cancels it: the subscribe or publish throws, and nothing it started
    /// is left running: the media router has no subscriber of the stream and the server no peer connection but the
    /// publisher's, the cancelled subscriber gets no frame while another subscriber gets many, the publisher's
    /// capture (its audio device) is not running and its stream never reached the other client. Both are idle after,
    /// and subscribe or publish again. (The stop used to find nothing to end yet, and the start then went on with no one
    /// to end it: media sent to a subscriber no one could reach, a microphone left open.)
    func testAStopWhileTheStartRunsCancelsIt() throws {
        let server = try TestServer(routed: true)
        let sid = try server.session(relayed: false)
        let t = try server.publishTone(sid)
        defer { t.disconnect() }

        let rec = MediaRecorder("cancelled")
        let sub = Subscriber(stream: t.stream, delegate: rec)
        sub.afterAcceptForTesting = { Self.onAnotherThread { sub.stop() } }
        XCTAssertThrowsError(try t.b.subscribe(sub)) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        sub.afterAcceptForTesting = nil
        func settled() -> Bool { server.router?.peerCount == 1 && server.server.mediaPeerCount == 1 }
        let deadline = Date().addingTimeInterval(10)
        while !settled() && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertEqual(server.router?.peerCount, 1, "the media router has a connection of the cancelled subscribe")
        XCTAssertEqual(server.server.mediaPeerCount, 1, "the server has a peer connection of the cancelled subscribe")
        let (_, live, _) = try t.subscribeB(frames: 30)
        XCTAssertGreaterThanOrEqual(live.frames, 30)
        XCTAssertEqual(rec.frames, 0, "the cancelled subscriber received frames")
        try t.b.subscribe(sub)
        rec.waitForFrames(3)

        let (c, _) = try server.client(sid, name: "C")
        defer { try? c.disconnect() }
        let pubRec = MediaRecorder("cancelled publisher")
        let publisher = try tonePublisher(pubRec, name: "cancelled")
        publisher.afterAcceptForTesting = { Self.onAnotherThread { publisher.stop(notify: true) } }
        XCTAssertThrowsError(try c.publish(publisher)) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        publisher.afterAcceptForTesting = nil
        XCTAssertFalse(publisher.audioDevice.isCapturing, "the cancelled publish left its capture running")
        try c.publish(publisher)
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }
        let stream = try XCTUnwrap(publisher.stream)
        t.bRec.wait("C's stream") { $0.contains(.streamCreated(stream)) }
        // Signaling is ordered: a stream of the cancelled publish would have reached B before this one.
        XCTAssertEqual(t.bRec.events.filter { if case .streamCreated(let s) = $0 { s.name == "cancelled" } else { false } }.count, 1)
    }

    /// Runs `body` on a new thread and returns once it has returned, or after 2 s when it waits (for the caller: a stop
    /// waits for the start it cancelled).
    private static func onAnotherThread(_ body: @escaping @Sendable () -> Void) {
        let entered = DispatchSemaphore(value: 0), returned = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            entered.signal()
            body()
            returned.signal()
        }
        entered.wait()
        _ = returned.wait(timeout: .now() + 2)
    }

    private final class Ended: @unchecked Sendable {
        weak var subscriber: Subscriber?
        let recorder: MediaRecorder
        let framesAtEnd: Int
        init(_ s: Subscriber, _ r: MediaRecorder) { subscriber = s; recorder = r; framesAtEnd = r.frames }
    }

    private func assertOnlyTheLiveSubscriberReceives(relayed: Bool) throws {
        let server = try TestServer(routed: !relayed)
        let t = try server.publishTone(try server.session(relayed: relayed))
        defer { t.disconnect() }
        // The live subscriber's peer connection; routed, the publisher's to the router too.
        let livePeers = relayed ? 1 : 2
        var ended: [Ended] = []
        for _ in 0..<4 {
            let (sub, rec, _) = try t.subscribeB(frames: 3)
            try t.b.unsubscribe(sub)
            // The subscription is over when unsubscribe returns: no frame may follow.
            ended.append(Ended(sub, rec))
        }
        // Held weakly here: the session holds it while the subscription lasts.
        let live = try { () -> Ended in let (s, r, _) = try t.subscribeB(frames: 3); return Ended(s, r) }()

        func routedSubscribers() -> Int? {
            guard let router = server.router,
                  let obj = try? JSONSerialization.jsonObject(with: Data(router.statsJSON(apiKey: nil))) as? [String: Any],
                  let sessions = obj["sessions"] as? [String: Any] else { return nil }
            for case let s as [String: Any] in sessions.values {
                if let st = (s["streams"] as? [String: Any])?[t.stream.id] as? [String: Any] { return st["subscribers"] as? Int }
            }
            return nil
        }
        func settled() -> Bool {
            let sending = relayed ? t.publisher.stats.connections == 1 : routedSubscribers() == 1
            return sending && server.server.mediaPeerCount == livePeers && (server.router?.peerCount ?? livePeers) == livePeers
                && ended.allSatisfy { $0.subscriber == nil }
        }
        let deadline = Date().addingTimeInterval(10)
        while !settled() && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if relayed {
            XCTAssertEqual(t.publisher.stats.connections, 1, "the publisher still sends to unsubscribed subscribers")
        } else {
            XCTAssertEqual(routedSubscribers(), 1, "the media router still forwards to unsubscribed subscribers")
        }
        XCTAssertEqual(server.server.mediaPeerCount, livePeers, "peer connections of unsubscribed subscribers are still open")
        if let router = server.router { XCTAssertEqual(router.peerCount, livePeers, "the media router keeps unsubscribed subscribers' connections") }
        XCTAssertEqual(ended.filter { $0.subscriber != nil }.count, 0, "the session still holds unsubscribed subscribers")

        // A second of media later (30 more frames at 15 fps), the live subscriber has them and the others none.
        live.recorder.waitForFrames(30)
        for (i, e) in ended.enumerated() {
            XCTAssertEqual(e.recorder.frames, e.framesAtEnd, "subscriber \(i + 1) received frames after its unsubscribe")
        }
        XCTAssertEqual(live.subscriber?.isConnected, true)

        // The stream's end ends the live subscription the same way.
        try t.a.unpublish(t.publisher)
        t.bRec.waitFor(.streamDestroyed(t.stream.id))
        let end = Date().addingTimeInterval(10)
        while (server.server.mediaPeerCount > 0 || (server.router?.peerCount ?? 0) > 0 || live.subscriber != nil) && Date() < end {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertEqual(server.server.mediaPeerCount, 0, "peer connections left after the stream ended")
        XCTAssertEqual(server.router?.peerCount ?? 0, 0, "router connections left after the stream ended")
        XCTAssertNil(live.subscriber, "the session still holds the subscriber of an ended stream")
    }
}
