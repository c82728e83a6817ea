import Foundation
import OTMedia
import OTServer
import OTTestSupport
import XCTest
@testable import OTSession

/// The subscriber's audio fallback end to end: sustained loss warns, then disables video (`.qualityChanged`)
/// while audio continues; recovery lifts it.
final class AudioFallbackTests: XCTestCase {
    func testSustainedLossFallsBackToAudioAndRecovers() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let t = try server.publishTone(sid)
        defer { t.disconnect() }
        let loss = ReceiveLossInjector()
        var settings = SubscriberSettings(qualityLossThreshold: 0.15, qualityWindowSeconds: 2)
        settings.lossInjector = loss
        let rec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: t.stream, delegate: rec, settings: settings)
        try t.b.subscribe(subscriber)
        rec.waitForFrames(5)

        loss.everyNth = 3  // a third of the packets lost
        rec.waitFor(.warning)
        rec.waitFor(.videoDisabled(.qualityChanged))
        let audioBefore = rec.audioTotal
        rec.wait("audio continues") { $0.audioTotal > audioBefore + 9_600 }

        loss.everyNth = 0
        rec.waitFor(.videoEnabled(.qualityChanged))
        rec.waitForFrames(5)
        XCTAssertFalse(rec.events.contains(.videoDisabled(.subscriberPropertyChanged)))
    }

    /// A stream published with `audioFallbackEnabled: false` keeps its video under the same loss.
    func testPublisherWithoutAudioFallbackKeepsVideoUnderLoss() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let device = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.5))
        try a.publish(try Publisher(delegate: MediaRecorder("publisher"), settings: PublisherSettings(
            name: "cam", videoSource: .testPattern, audioDevice: device, width: 320, height: 240, fps: 15, startBitrateKbps: 300,
            audioFallbackEnabled: false)))
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let stream = try XCTUnwrap(b.streams.values.first)
        XCTAssertFalse(stream.audioFallbackEnabled)
        let loss = ReceiveLossInjector()
        var settings = SubscriberSettings(qualityLossThreshold: 0.15, qualityWindowSeconds: 2)
        settings.lossInjector = loss
        let rec = MediaRecorder("subscriber")
        try b.subscribe(Subscriber(stream: stream, delegate: rec, settings: settings))
        rec.waitForFrames(5)
        loss.everyNth = 3
        let audio = rec.audioTotal
        rec.wait("4 s of audio under loss") { $0.audioTotal >= audio + 4 * 48_000 }  // the test above falls back within that
        XCTAssertFalse(rec.events.contains(.warning))
        XCTAssertFalse(rec.events.contains(.videoDisabled(.qualityChanged)))
    }
}
