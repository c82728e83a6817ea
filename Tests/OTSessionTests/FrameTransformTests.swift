import Foundation
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import XCTest

/// XORs every byte past the clear prefix WebRTC frame encryption keeps (VP8 header, Opus TOC).
struct XORTransform: FrameTransform {
    var isIdentity: Bool { false }
    let key: UInt8
    func clear(_ info: EncodedFrameInfo) -> Int { info.kind == .audio ? 1 : (info.isKeyframe ? 10 : 3) }
    func apply(_ frame: UnsafeRawBufferPointer, _ info: EncodedFrameInfo, _ output: inout [UInt8]) {
        output.removeAll(keepingCapacity: true)
        let n = min(clear(info), frame.count)
        for (i, b) in frame.enumerated() { output.append(i < n ? b : b ^ key) }
    }
    func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws { apply(frame, info, &output) }
    func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws { apply(frame, info, &output) }
}

/// The per-frame transform place (end-to-end encryption): publisher and subscriber transforms compose.
final class FrameTransformTests: XCTestCase {
    func testMatchingTransformsDecodeAndAMissingOneDoesNot() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let publisher = try Publisher(delegate: nil, settings: PublisherSettings(videoSource: .testPattern, width: 320, height: 240, fps: 15,
                                                                                frameTransform: XORTransform(key: 0x5A)))
        try a.publish(publisher)
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let stream = try XCTUnwrap(b.streams.values.first)
        let good = MediaRecorder("with key"), bad = MediaRecorder("without key")
        let withKey = Subscriber(stream: stream, delegate: good, settings: SubscriberSettings(frameTransform: XORTransform(key: 0x5A)))
        let withoutKey = Subscriber(stream: stream, delegate: bad)
        try b.subscribe(withKey)
        try b.subscribe(withoutKey)
        good.waitForFrames(10)
        XCTAssertFalse(good.stamps.isEmpty, "the matching transform restores the pictures")
        bad.waitFor(.connected)
        let deadline = Date().addingTimeInterval(15)
        while withoutKey.stats.videoPacketsReceived < 40 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertGreaterThanOrEqual(withoutKey.stats.videoPacketsReceived, 40)
        XCTAssertTrue(bad.stamps.isEmpty, "without the transform no picture decodes to the pattern")
    }
}
