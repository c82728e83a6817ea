import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// Publish and subscribe in routed sessions: every client has one peer connection per stream to the
/// embedded server's media router (`MediaRouter` installed as `SessionServer.mediaRouting`).
final class RoutedPublishSubscribeTests: XCTestCase {
    var server: TestServer!
    var router: MediaRouter!

    override func setUpWithError() throws {
        server = try TestServer()
        router = try MediaRouter()
        server.server.mediaRouting = router
    }

    override func tearDown() {
        router?.stop()
        server = nil
        router = nil
    }

    private func published(_ session: Session, _ rec: MediaRecorder) throws -> Publisher {
        let p = try tonePublisher(rec)
        try session.publish(p)
        rec.wait("streamCreated") { $0.publisherStreamCreated }
        return p
    }

    func testSubscriberReceivesThePatternAndToneThroughTheRouter() throws {
        let sid = try server.session(relayed: false)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        XCTAssertFalse(a.isRelayed)
        let pubRec = MediaRecorder("publisher")
        let publisher = try published(a, pubRec)
        let stream = try XCTUnwrap(publisher.stream)
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }

        let subRec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: subRec)
        let subscribedAt = MonotonicClock.now()
        try b.subscribe(subscriber)
        subRec.waitForFrames(1)
        let firstFrame = MonotonicClock.now() - subscribedAt
        subRec.waitFor(.connected)
        subRec.waitForFrames(20)
        subRec.wait("1 s of audio") { $0.audio.samples.count >= 48_000 }
        let stamps = subRec.stamps
        XCTAssertGreaterThanOrEqual(stamps.count, 15)
        for (x, y) in zip(stamps, stamps.dropFirst()) { XCTAssertLessThan(x.frameNumber, y.frameNumber) }
        report(label: "routed", subRec, firstFrame: firstFrame)
        let (pcm, rate) = subRec.audio
        XCTAssertEqual(toneFrequency(pcm.suffix(24_000), sampleRate: rate), 440, accuracy: 15)
        let counters = try XCTUnwrap(router.counters(streamId: stream.id))
        XCTAssertGreaterThan(counters.packetsIn, 0)
        XCTAssertGreaterThan(counters.packetsOut, 0, "the router forwarded the stream")
        XCTAssertEqual(publisher.stats.connections, 1, "one connection: to the router")

        try b.unsubscribe(subscriber)
        subRec.waitFor(.disconnected)
        try a.unpublish(publisher)
        pubRec.waitFor(.streamDestroyed(stream.id))
    }

    func testSubscribingToYourOwnStreamLoopsThroughTheRouter() throws {
        let sid = try server.session(relayed: false)
        let (a, _) = try server.client(sid, name: "A")
        defer { try? a.disconnect() }
        let pubRec = MediaRecorder("publisher")
        let publisher = try published(a, pubRec)
        let subRec = MediaRecorder("self")
        try a.subscribe(Subscriber(stream: try XCTUnwrap(publisher.stream), delegate: subRec))
        subRec.waitFor(.connected)
        subRec.waitForFrames(10)
        XCTAssertFalse(subRec.stamps.isEmpty)
        try a.unpublish(publisher)
        subRec.waitFor(.disconnected)
    }

    func testSubscribeToVideoTogglesThroughTheRouter() throws {
        let sid = try server.session(relayed: false)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let publisher = try published(a, MediaRecorder("publisher"))
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let subRec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: try XCTUnwrap(publisher.stream), delegate: subRec)
        try b.subscribe(subscriber)
        subRec.waitForFrames(5)
        subscriber.subscribeToVideo = false
        subRec.waitFor(.videoDisabled(.subscriberPropertyChanged))
        subscriber.subscribeToVideo = true
        subRec.waitFor(.videoEnabled(.subscriberPropertyChanged))
        subRec.waitForFrames(5)
        publisher.publishVideo = false
        subRec.waitFor(.videoDisabled(.publisherPropertyChanged))
        publisher.publishVideo = true
        subRec.waitFor(.videoEnabled(.publisherPropertyChanged))
        subRec.waitForFrames(5)
    }

    func testDisconnectReleasesEverything() throws {
        let sid = try server.session(relayed: false)
        func cycle() throws {
            let (a, aRec) = try server.client(sid, name: "A")
            let (b, bRec) = try server.client(sid, name: "B")
            let pubRec = MediaRecorder("publisher")
            _ = try published(a, pubRec)
            bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
            let subRec = MediaRecorder("subscriber")
            try b.subscribe(Subscriber(stream: try XCTUnwrap(b.streams.values.first), delegate: subRec))
            subRec.waitForFrames(3)
            try b.disconnect()
            try a.disconnect()
            subRec.waitFor(.disconnected)
            pubRec.wait("streamDestroyed") { $0.events.contains { if case .streamDestroyed = $0 { true } else { false } } }
            aRec.waitFor(.disconnected)
            bRec.waitFor(.disconnected)
        }
        try cycle()
        Thread.sleep(forTimeInterval: 0.5)
        let fds = openFileDescriptors(), threads = threadCount()
        for _ in 0..<3 { try cycle() }
        let deadline = Date().addingTimeInterval(5)
        while (openFileDescriptors() > fds + 2 || router.peerCount > 0) && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        XCTAssertLessThanOrEqual(openFileDescriptors(), fds + 2, "file descriptors leaked across routed cycles")
        XCTAssertLessThanOrEqual(threadCount(), threads + 4, "threads leaked across routed cycles")
        XCTAssertEqual(router.peerCount, 0, "the router dropped every peer connection")
        XCTAssertEqual(server.server.mediaPeerCount, 0)
    }
}

extension RoutedPublishSubscribeTests {
    /// Three clients each publish and subscribe to the two others: every subscriber renders every stream.
    func testThreePartiesEachSeeEveryOtherStream() throws {
        let sid = try server.session(relayed: false)
        var clients: [(Session, Recorder)] = []
        for i in 0..<3 { clients.append(try server.client(sid, name: "client\(i)")) }
        defer { for (s, _) in clients { try? s.disconnect() } }
        var publishers: [Publisher] = []
        for (i, (s, _)) in clients.enumerated() {
            let rec = MediaRecorder("publisher\(i)")
            let p = try Publisher(delegate: rec, settings: PublisherSettings(name: "p\(i)", videoSource: .testPattern,
                                                                            width: 160, height: 120, fps: 10, startBitrateKbps: 150))
            try s.publish(p)
            rec.wait("streamCreated") { $0.publisherStreamCreated }
            publishers.append(p)
        }
        var recorders: [MediaRecorder] = []
        var subscribers: [Subscriber] = []
        for (i, (s, rec)) in clients.enumerated() {
            rec.wait("two streams") { ev in ev.filter { if case .streamCreated = $0 { true } else { false } }.count >= 2 }
            for stream in s.streams.values {
                let r = MediaRecorder("client\(i) <- \(stream.name)")
                let sub = Subscriber(stream: stream, delegate: r)
                try s.subscribe(sub)
                recorders.append(r)
                subscribers.append(sub)
            }
        }
        XCTAssertEqual(recorders.count, 6)
        for r in recorders {
            r.waitForFrames(5)
            XCTAssertFalse(r.stamps.isEmpty, r.name)
        }
        XCTAssertEqual(router.peerCount, 9, "3 publishing + 6 subscribing connections")
    }
}
