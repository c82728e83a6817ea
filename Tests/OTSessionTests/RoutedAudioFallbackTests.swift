import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTransport
import OTWire
import OTTestSupport
import XCTest

/// The media router's audio fallback over real sockets. The router here judges any measurable round-trip time
/// as poor (a 1 µs limit), so a loopback link, clean as it is, counts as degraded: the router warns the
/// subscriber, then stops forwarding video, over signaling. Real packet loss and recovery: the Python test
/// bindings/python/tests/test_audio_fallback_netns.py (nftables in network namespaces).
final class RoutedAudioFallbackTests: XCTestCase {
    var server: TestServer!
    var router: MediaRouter!
    var subscribers: [Subscriber] = []

    override func setUpWithError() throws {
        server = try TestServer(media: .init(quality: QualityFallbackConfig(rttThreshold: .microseconds(1), warnAfter: .seconds(1),
                                                                            disableAfter: .seconds(2), recoverAfter: .seconds(1))))
        router = server.router
    }

    override func tearDown() {
        subscribers = []
        server = nil
        router = nil
    }

    private func streamStats(_ streamId: String) throws -> [String: Any] {
        let obj = try JSONSerialization.jsonObject(with: Data(router.statsJSON(apiKey: nil))) as? [String: Any]
        let sessions = try XCTUnwrap(obj?["sessions"] as? [String: Any])
        for case let sess as [String: Any] in sessions.values {
            if let s = (sess["streams"] as? [String: Any])?[streamId] as? [String: Any] { return s }
        }
        throw OTError(.invalidParameter, "no stream \(streamId) in the router's stats")
    }

    private func subscribe(_ allowFallback: Bool, video: Bool = true) throws -> (Session, Session, MediaRecorder, StreamInfo) {
        let sid = try server.session(relayed: false)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        let pubRec = MediaRecorder("publisher")
        let device = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.5))
        let publisher = try Publisher(delegate: pubRec, settings: PublisherSettings(
            name: "cam", videoSource: .testPattern, audioDevice: device, width: 320, height: 240, fps: 15, startBitrateKbps: 300,
            audioFallbackEnabled: allowFallback))
        try a.publish(publisher)
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }
        let stream = try XCTUnwrap(publisher.stream)
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
        let seen = try XCTUnwrap(b.streams[stream.id])
        XCTAssertEqual(seen.audioFallbackEnabled, allowFallback, "the setting travels with the stream")
        let rec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: seen, delegate: rec, settings: SubscriberSettings(subscribeToVideo: video))
        try b.subscribe(subscriber)
        if video { rec.waitForFrames(5) } else { rec.waitFor(.connected) }
        subscribers.append(subscriber)
        return (a, b, rec, stream)
    }

    func testRouterWarnsThenStopsVideoWhileAudioContinues() throws {
        let (a, b, rec, stream) = try subscribe(true)
        defer { try? a.disconnect(); try? b.disconnect() }
        rec.waitFor(.videoDisabled(.qualityChanged))
        let events = rec.events
        let warning = try XCTUnwrap(events.firstIndex(of: .warning))
        let disabled = try XCTUnwrap(events.firstIndex(of: .videoDisabled(.qualityChanged)))
        XCTAssertLessThan(warning, disabled, "the warning comes first")
        XCTAssertFalse(events.contains(.warningLifted))

        // Audio keeps flowing; video does not.
        let frames = rec.frames, audio = rec.audioTotal
        rec.wait("1 s more audio") { $0.audioTotal >= audio + 48_000 }
        XCTAssertLessThanOrEqual(rec.frames, frames + 1, "at most a frame in flight after video stopped")

        let fb = try XCTUnwrap(try streamStats(stream.id)["audioFallback"] as? [String: Any])
        XCTAssertEqual(fb["enabled"] as? Bool, true)
        XCTAssertEqual(fb["subscribersVideoDisabled"] as? Int, 1)
        XCTAssertEqual(fb["videoDisabled"] as? Int, 1)
        let subs = try XCTUnwrap(fb["subscribers"] as? [String: Any])
        XCTAssertEqual((subs.values.first as? [String: Any])?["state"] as? String, "videoDisabled")
        XCTAssertNotNil((subs.values.first as? [String: Any])?["rttMs"], "the link is still judged (from audio reports)")
    }

    func testPublisherWithoutAudioFallbackNeverLosesVideo() throws {
        let (a, b, rec, stream) = try subscribe(false)
        defer { try? a.disconnect(); try? b.disconnect() }
        // Longer than warning and disabling take for a stream that allows it (see the test above).
        let audio = rec.audioTotal
        rec.wait("4 s of audio") { $0.audioTotal >= audio + 4 * 48_000 }
        rec.waitForFrames(10)
        XCTAssertFalse(rec.events.contains(.warning))
        XCTAssertFalse(rec.events.contains(.videoDisabled(.qualityChanged)))
        let fb = try XCTUnwrap(try streamStats(stream.id)["audioFallback"] as? [String: Any])
        XCTAssertEqual(fb["enabled"] as? Bool, false)
        XCTAssertEqual(fb["warnings"] as? Int, 0)
        XCTAssertEqual((fb["subscribers"] as? [String: Any])?.count, 0, "no subscriber is judged")
    }

    func testSubscriberWithoutVideoIsNotWarnedUntilItAsksForVideo() throws {
        let (a, b, rec, _) = try subscribe(true, video: false)
        defer { try? a.disconnect(); try? b.disconnect() }
        let audio = rec.audioTotal
        rec.wait("4 s of audio") { $0.audioTotal >= audio + 4 * 48_000 }
        XCTAssertFalse(rec.events.contains(.warning), "no video, nothing to warn about")
        XCTAssertEqual(rec.frames, 0)
        subscribers[0].subscribeToVideo = true
        rec.waitFor(.videoEnabled(.subscriberPropertyChanged))
        rec.waitFor(.videoDisabled(.qualityChanged))
        XCTAssertEqual(rec.events.filter { $0 == .warning }.count, 1)
    }
}
