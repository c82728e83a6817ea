import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// The codec seam end to end: a publisher preferring VP9, through the media router or peer to peer, to a native
/// subscriber that decodes what was negotiated.
final class VP9SessionTests: RoutedServerTestCase {
    /// A test-pattern publisher at 320×240 with the given codec preference.
    func publish(_ session: Session, codecs: [VideoCodecType], seenBy watcher: Recorder) throws -> (Publisher, MediaRecorder, StreamInfo) {
        let rec = MediaRecorder("publisher")
        var settings = PublisherSettings(name: "vp9", videoSource: .testPattern, width: 320, height: 240, fps: 15, startBitrateKbps: 300)
        settings.preferredVideoCodecs = codecs
        let publisher = try Publisher(delegate: rec, settings: settings)
        try session.publish(publisher)
        rec.wait("streamCreated") { $0.publisherStreamCreated }
        let stream = try XCTUnwrap(publisher.stream)
        watcher.wait("stream at \(watcher.name)") { $0.contains(.streamCreated(stream)) }
        return (publisher, rec, stream)
    }

    /// The `mimeType` of the codec an `inbound-rtp`/`outbound-rtp` of `kind` names in a W3C stats report.
    func codecMimeType(_ report: String, _ type: String, kind: String = "video") throws -> String? {
        let objects = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.utf8)) as? [[String: Any]], report)
        let rtp = try XCTUnwrap(objects.first { $0["type"] as? String == type && $0["kind"] as? String == kind }, report)
        let codecId = try XCTUnwrap(rtp["codecId"] as? String, report)
        return objects.first { $0["id"] as? String == codecId && $0["type"] as? String == "codec" }?["mimeType"] as? String
    }

    /// Publishes with `codecs` in a session, subscribes from another client, and checks the subscriber decodes frames of
    /// the published size in `expected` (W3C codec stats on both sides).
    func assertDecodes(_ sid: String, codecs: [VideoCodecType], expected: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let (publisher, _, stream) = try publish(a, codecs: codecs, seenBy: bRec)
        let (subscriber, subRec, _) = try subscribe(b, to: stream, frames: 20)
        XCTAssertEqual(subRec.lastFrameSize.width, 320, file: file, line: line)
        XCTAssertEqual(subRec.lastFrameSize.height, 240, file: file, line: line)
        let stamps = subRec.stamps
        XCTAssertGreaterThanOrEqual(stamps.count, 15, "frames decode to the readable test pattern", file: file, line: line)
        for (x, y) in zip(stamps, stamps.dropFirst()) { XCTAssertLessThan(x.frameNumber, y.frameNumber, file: file, line: line) }
        XCTAssertEqual(try codecMimeType(subscriber.rtcStatsReport(), "inbound-rtp"), expected, file: file, line: line)
        XCTAssertEqual(try codecMimeType(publisher.rtcStatsReport(), "outbound-rtp"), expected, file: file, line: line)
        XCTAssertEqual(try codecMimeType(subscriber.rtcStatsReport(), "inbound-rtp", kind: "audio"), "audio/opus", file: file, line: line)
        XCTAssertGreaterThan(subscriber.stats.framesDecoded, 15, file: file, line: line)
        if !a.isRelayed {
            XCTAssertGreaterThan(try XCTUnwrap(router.counters(streamId: stream.id)).packetsOut, 0, "the router forwarded it", file: file, line: line)
        } else {
            XCTAssertNil(router.counters(streamId: stream.id), "peer to peer", file: file, line: line)
        }
    }

    func testVP9ThroughTheRouter() throws {
        try assertDecodes(try server.session(relayed: false), codecs: [.vp9, .vp8], expected: "video/VP9")
    }

    func testVP9PeerToPeer() throws {
        try assertDecodes(try server.session(relayed: true), codecs: [.vp9, .vp8], expected: "video/VP9")
    }

    func testVP8StaysTheDefault() throws {
        try assertDecodes(try server.session(relayed: false), codecs: [], expected: "video/VP8")
    }

    func testVP9EndToEndEncryptedThroughTheRouter() throws {
        let sid = try server.server.createSession(apiKey: server.project.apiKey, e2ee: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        try a.setEncryptionSecret("our shared secret")
        try b.setEncryptionSecret("our shared secret")
        let (_, _, stream) = try publish(a, codecs: [.vp9], seenBy: bRec)
        let (subscriber, subRec, _) = try subscribe(b, to: stream, frames: 15)
        XCTAssertGreaterThanOrEqual(subRec.stamps.count, 10, "decrypted VP9 frames decode to the readable test pattern")
        XCTAssertEqual(subRec.lastFrameSize.width, 320)
        XCTAssertEqual(try codecMimeType(subscriber.rtcStatsReport(), "inbound-rtp"), "video/VP9")
    }
}
