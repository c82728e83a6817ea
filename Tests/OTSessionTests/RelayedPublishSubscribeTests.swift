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
    /// Subscriber settings out of range (`Int64.max` seconds overflowed the media connect deadline) are refused by
    /// `subscribe`, and the subscriber stays unsubscribed: the same one subscribes once its settings are fixed.
    func testAbsurdSubscriberSettingsAreRefused() throws {
        let server = try TestServer()
        let t = try server.publishTone(try server.session(relayed: true))
        defer { t.disconnect() }
        for settings in [SubscriberSettings(connectTimeout: .seconds(Int64.max)), SubscriberSettings(connectTimeout: .zero),
                         SubscriberSettings(qualityLossThreshold: .nan), SubscriberSettings(qualityLossThreshold: 1),
                         SubscriberSettings(qualityWindowSeconds: .max), SubscriberSettings(qualityWindowSeconds: 0)] {
            let subscriber = Subscriber(stream: t.stream, delegate: nil, settings: settings)
            XCTAssertThrowsError(try t.b.subscribe(subscriber)) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) }
        }
        let subRec = MediaRecorder("subscriber")
        try t.b.subscribe(Subscriber(stream: t.stream, delegate: subRec))
        subRec.waitFor(.connected)
    }

    func testSubscriberReceivesTheTestPatternInOrderAndTheTone() throws {
        let server = try TestServer()
        let t = try server.publishTone(try server.session(relayed: true))
        defer { t.disconnect() }
        let (a, b, publisher, pubRec, stream) = (t.a, t.b, t.publisher, t.pubRec, t.stream)
        XCTAssertTrue(a.isRelayed)
        XCTAssertEqual(stream.name, "cam")
        XCTAssertEqual(stream.width, 320)

        let (subscriber, subRec, firstFrame) = try t.subscribeB(frames: 1)
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
        XCTAssertFalse(subscriber.isConnected)
        XCTAssertThrowsError(try b.unsubscribe(subscriber)) { XCTAssertEqual(($0 as? OTError)?.code, .subscriberNotFound) }
        try a.unpublish(publisher)
        pubRec.waitFor(.streamDestroyed(stream.id))
        t.bRec.waitFor(.streamDestroyed(stream.id))
    }

    func testTogglesGiveVideoEventsWithTheirReasons() throws {
        let server = try TestServer()
        let t = try server.publishTone(try server.session(relayed: true))
        defer { t.disconnect() }
        let (publisher, bRec, stream) = (t.publisher, t.bRec, t.stream)
        let (subscriber, subRec, _) = try t.subscribeB(frames: 5)

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
        let (publisher, pubRec, stream) = try publishTone(a, seenBy: mRec)
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
        XCTAssertFalse(rec.events.contains(.disconnected), "a connection that never came up is not interrupted")
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

        let (_, _, stream) = try publishTone(a)
        let second = try tonePublisher(MediaRecorder())
        XCTAssertThrowsError(try a.publish(second)) { XCTAssertEqual(($0 as? OTError)?.code, .unableToPublish) }
        XCTAssertThrowsError(try a.unpublish(second)) { XCTAssertEqual(($0 as? OTError)?.code, .publisherNotFound) }
        XCTAssertThrowsError(try sub.publish(try tonePublisher(MediaRecorder()))) { XCTAssertEqual(($0 as? OTError)?.code, .unableToPublish) }

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
        try TestServer().assertSubscribingToOwnStream(relayed: true)
    }

    func testDisconnectReleasesSocketsAndThreads() throws {
        let server = try TestServer()
        try server.assertCyclesReleaseSocketsAndThreads(try server.session(relayed: true), label: "publish/subscribe")
    }
}
