import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// Publish and subscribe in relayed sessions: media peer to peer, the embedded server only relays signaling.
final class RelayedPublishSubscribeTests: XCTestCase {
    func testSubscriberReceivesTheTestPatternInOrderAndTheTone() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, aRec) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        XCTAssertTrue(a.isRelayed)

        let pubRec = MediaRecorder("publisher")
        let publisher = try tonePublisher(pubRec)
        try a.publish(publisher)
        pubRec.wait("streamCreated") { $0.events.contains { if case .streamCreated = $0 { true } else { false } } }
        let stream = try XCTUnwrap(publisher.stream)
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
        XCTAssertEqual(stream.name, "cam")
        XCTAssertEqual(stream.width, 320)

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
        XCTAssertGreaterThanOrEqual(stamps.count, 15, "decoded frames carry readable test-pattern stamps")
        for (x, y) in zip(stamps, stamps.dropFirst()) {
            XCTAssertLessThan(x.frameNumber, y.frameNumber, "frames arrive in capture order")
            XCTAssertLessThan(x.timestampMicros, y.timestampMicros)
        }
        report(label: "relayed", subRec, firstFrame: firstFrame)
        let (pcm, rate) = subRec.audio
        XCTAssertEqual(rate, 48_000)
        let f = toneFrequency(pcm.suffix(24_000), sampleRate: rate)
        XCTAssertEqual(f, 440, accuracy: 15, "the received audio is the publisher's 440 Hz tone")

        let st = subscriber.stats
        XCTAssertGreaterThan(st.framesDecoded, 15)
        XCTAssertGreaterThan(st.videoBytesReceived, 0)
        XCTAssertGreaterThan(st.audioPacketsReceived, 20)
        let report = subscriber.rtcStatsReport()
        XCTAssertTrue(report.contains("\"inbound-rtp\""), report)
        // The ICE pair in use (W3C candidate-pair with its candidates): host to host on loopback.
        let objects = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.utf8)) as? [[String: Any]])
        let pair = try XCTUnwrap(objects.first { $0["type"] as? String == "candidate-pair" }, report)
        XCTAssertEqual(pair["nominated"] as? Bool, true)
        XCTAssertGreaterThan(pair["bytesReceived"] as? Int ?? 0, 0)
        let local = try XCTUnwrap(objects.first { $0["id"] as? String == pair["localCandidateId"] as? String })
        let remote = try XCTUnwrap(objects.first { $0["id"] as? String == pair["remoteCandidateId"] as? String })
        XCTAssertEqual(local["type"] as? String, "local-candidate")
        XCTAssertEqual(remote["type"] as? String, "remote-candidate")
        XCTAssertEqual(local["candidateType"] as? String, "host")
        XCTAssertEqual(local["address"] as? String, "127.0.0.1")
        XCTAssertEqual(remote["address"] as? String, "127.0.0.1")
        XCTAssertNotEqual(local["port"] as? Int, remote["port"] as? Int)
        pubRec.wait("publisher stats") { $0.publisherStats.contains { $0.connections == 1 && $0.videoPacketsSent > 0 } }
        XCTAssertGreaterThan(publisher.stats.audioPacketsSent, 20)
        pubRec.wait("RTT from receiver reports") { $0.publisherStats.contains { $0.roundTripTimeMillis != nil } }
        XCTAssertTrue(publisher.rtcStatsReport().contains("\"outbound-rtp\""))
        XCTAssertTrue(publisher.rtcStatsReport().contains("\"candidate-pair\""))

        try b.unsubscribe(subscriber)
        subRec.waitFor(.disconnected)
        XCTAssertThrowsError(try b.unsubscribe(subscriber)) { XCTAssertEqual(($0 as? OTError)?.code, .subscriberNotFound) }
        try a.unpublish(publisher)
        pubRec.waitFor(.streamDestroyed(stream.id))
        bRec.waitFor(.streamDestroyed(stream.id))
        _ = aRec
    }

    func testTogglesGiveVideoEventsWithTheirReasons() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let pubRec = MediaRecorder("publisher")
        let publisher = try tonePublisher(pubRec)
        try a.publish(publisher)
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let stream = try XCTUnwrap(b.streams.values.first)
        let subRec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: subRec)
        try b.subscribe(subscriber)
        subRec.waitForFrames(5)

        publisher.publishVideo = false
        subRec.waitFor(.videoDisabled(.publisherPropertyChanged))
        bRec.waitFor(.changed(stream.id, .hasVideo(false)))
        XCTAssertFalse(subscriber.stream.hasVideo)
        publisher.publishVideo = true
        subRec.waitFor(.videoEnabled(.publisherPropertyChanged))
        subRec.waitForFrames(5)

        subscriber.subscribeToVideo = false
        subRec.waitFor(.videoDisabled(.subscriberPropertyChanged))
        subscriber.subscribeToVideo = true
        subRec.waitFor(.videoEnabled(.subscriberPropertyChanged))
        subRec.waitForFrames(5)

        publisher.publishAudio = false
        bRec.waitFor(.changed(stream.id, .hasAudio(false)))
        XCTAssertFalse(publisher.publishAudio)
        XCTAssertEqual(subRec.events.filter { if case .videoDisabled = $0 { true } else { false } }.count, 2)
    }

    func testForceMuteStopsThePublishersAudio() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (m, mRec) = try server.client(sid, role: .moderator, name: "moderator")
        defer { try? a.disconnect(); try? m.disconnect() }
        let pubRec = MediaRecorder("publisher")
        let publisher = try tonePublisher(pubRec)
        try a.publish(publisher)
        mRec.wait("stream") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }  // the publisher learns its stream on its own queue
        let stream = try XCTUnwrap(publisher.stream)
        let subRec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: subRec)
        try m.subscribe(subscriber)
        subRec.wait("audio") { $0.audio.samples.count >= 9_600 }
        try m.forceMuteStream(stream.id)
        pubRec.waitFor(.muteForced)
        XCTAssertFalse(publisher.publishAudio)
        mRec.waitFor(.changed(stream.id, .hasAudio(false)))
        Thread.sleep(forTimeInterval: 0.3)  // packets in flight
        let before = subscriber.stats.audioPacketsReceived
        subRec.waitForFrames(10)  // video goes on for a while
        XCTAssertEqual(subscriber.stats.audioPacketsReceived, before, "no audio after the force mute")
    }

    /// A stream announced without media (no Publisher answers the offer): the subscription times out with 1542.
    func testSubscriberTimesOutWhenNoMediaAnswers() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        try a.publishStream(PublishRequest(name: "signaling only")) { _ in }
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let rec = MediaRecorder("subscriber")
        let sub = Subscriber(stream: try XCTUnwrap(b.streams.values.first), delegate: rec,
                             settings: SubscriberSettings(connectTimeout: .milliseconds(500)))
        try b.subscribe(sub)
        rec.waitFor(.failed(OTErrorCode.subscriberTimedOut.rawValue))
        XCTAssertFalse(sub.isConnected)
        try b.unsubscribe(sub)
        rec.waitFor(.disconnected)
    }

    func testRoleSessionAndOnePublisherRules() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (sub, _) = try server.client(sid, role: .subscriber, name: "subscriber-role")
        let (pubOnly, _) = try server.client(sid, role: .publisheronly, name: "publisheronly")
        let other = try server.session(relayed: true)
        let (c, cRec) = try server.client(other, name: "C")
        defer { for s in [a, sub, pubOnly, c] { try? s.disconnect() } }

        let rec = MediaRecorder("publisher")
        let first = try tonePublisher(rec)
        try a.publish(first)
        rec.wait("streamCreated") { $0.events.contains { if case .streamCreated = $0 { true } else { false } } }
        let second = try tonePublisher(MediaRecorder())
        XCTAssertThrowsError(try a.publish(second)) { XCTAssertEqual(($0 as? OTError)?.code, .unableToPublish) }
        XCTAssertThrowsError(try a.unpublish(second)) { XCTAssertEqual(($0 as? OTError)?.code, .publisherNotFound) }
        XCTAssertThrowsError(try sub.publish(try tonePublisher(MediaRecorder()))) { XCTAssertEqual(($0 as? OTError)?.code, .unableToPublish) }

        let stream = try XCTUnwrap(first.stream)
        XCTAssertThrowsError(try pubOnly.subscribe(Subscriber(stream: stream, delegate: nil))) {
            XCTAssertEqual(($0 as? OTError)?.code, .forceUnpublishOrInvalidStream)
        }
        // A stream of another session is refused clearly.
        XCTAssertThrowsError(try c.subscribe(Subscriber(stream: stream, delegate: nil))) {
            XCTAssertEqual(($0 as? OTError)?.code, .serverCannotFindStream)
        }
        XCTAssertTrue(cRec.events.contains(.connected))
    }

    func testSubscribingToYourOwnStream() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        defer { try? a.disconnect() }
        let pubRec = MediaRecorder("publisher")
        let publisher = try tonePublisher(pubRec)
        try a.publish(publisher)
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }
        let subRec = MediaRecorder("self")
        try a.subscribe(Subscriber(stream: try XCTUnwrap(publisher.stream), delegate: subRec))
        subRec.waitFor(.connected)
        subRec.waitForFrames(10)
        XCTAssertFalse(subRec.stamps.isEmpty)
        try a.unpublish(publisher)
        subRec.waitFor(.disconnected)
    }

    func testDisconnectReleasesSocketsAndThreads() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        func cycle() throws {
            let (a, aRec) = try server.client(sid, name: "A")
            let (b, bRec) = try server.client(sid, name: "B")
            let pubRec = MediaRecorder("publisher")
            let publisher = try tonePublisher(pubRec)
            try a.publish(publisher)
            bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
            let subRec = MediaRecorder("subscriber")
            let subscriber = Subscriber(stream: try XCTUnwrap(b.streams.values.first), delegate: subRec)
            try b.subscribe(subscriber)
            subRec.waitForFrames(3)
            try b.disconnect()
            try a.disconnect()
            subRec.waitFor(.disconnected)
            pubRec.wait("streamDestroyed") { $0.events.contains { if case .streamDestroyed = $0 { true } else { false } } }
            aRec.waitFor(.disconnected)
            bRec.waitFor(.disconnected)
        }
        try cycle()  // warm-up: lazily made threads and sockets of the runtime
        Thread.sleep(forTimeInterval: 0.5)
        let fds = openFileDescriptors(), threads = threadCount()
        for _ in 0..<3 { try cycle() }
        // Closing is asynchronous on the server side; give it a moment, bounded.
        let deadline = Date().addingTimeInterval(5)
        while openFileDescriptors() > fds + 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        XCTAssertLessThanOrEqual(openFileDescriptors(), fds + 2, "file descriptors leaked across publish/subscribe cycles")
        XCTAssertLessThanOrEqual(threadCount(), threads + 4, "threads leaked across publish/subscribe cycles")
        XCTAssertEqual(server.server.mediaPeerCount, 0)
    }
}

extension MediaRecorder {
    var publisherStreamCreated: Bool { events.contains { if case .streamCreated = $0 { true } else { false } } }
}
