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
final class RoutedPublishSubscribeTests: RoutedServerTestCase {
    func testSubscriberReceivesThePatternAndToneThroughTheRouter() throws {
        let t = try server.publishTone(try server.session(relayed: false))
        defer { t.disconnect() }
        let (a, b, publisher, pubRec, stream) = (t.a, t.b, t.publisher, t.pubRec, t.stream)
        XCTAssertFalse(a.isRelayed)

        let (subscriber, subRec, firstFrame) = try t.subscribeB(frames: 1)
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
        XCTAssertFalse(subscriber.isConnected)
        try a.unpublish(publisher)
        pubRec.waitFor(.streamDestroyed(stream.id))
        t.bRec.waitFor(.streamDestroyed(stream.id))
        XCTAssertEqual(subRec.events, [.connected], "neither the unsubscribe nor the stream's end is a subscriber event")
    }

    func testSubscribingToYourOwnStreamLoopsThroughTheRouter() throws {
        try server.assertSubscribingToOwnStream(relayed: false)
    }

    func testSubscribeToVideoTogglesThroughTheRouter() throws {
        let t = try server.publishTone(try server.session(relayed: false))
        defer { t.disconnect() }
        let publisher = t.publisher
        let (subscriber, subRec, _) = try t.subscribeB(frames: 5)
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
        try server.assertCyclesReleaseSocketsAndThreads(try server.session(relayed: false), label: "routed") { router.peerCount == 0 }
        XCTAssertEqual(router.peerCount, 0, "the router dropped every peer connection")
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
            XCTAssertEqual(s.streams.count, 3, "the session's streams include its own")
            for stream in s.streams.values where !s.isOwn(stream) {
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
