import Foundation
import OTBase
import OTServer
import OTSession
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
