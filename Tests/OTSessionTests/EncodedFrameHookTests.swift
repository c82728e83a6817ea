import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import XCTest

/// Keeps the encoded frames `didReceiveEncodedVideoFrame` lends and the stamps of the pictures that follow.
private final class EncodedRecorder: SubscriberDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _encoded: [(data: [UInt8], info: EncodedFrameInfo)] = []
    private var _stamps: [TestPatternStamp?] = []
    /// Pictures that arrived without an encoded frame lent just before them.
    private var _unpaired = 0
    private var pending = false

    var encoded: [(data: [UInt8], info: EncodedFrameInfo)] { lock.withLock { _encoded } }
    var stamps: [TestPatternStamp?] { lock.withLock { _stamps } }
    var unpaired: Int { lock.withLock { _unpaired } }

    func subscriber(_ subscriber: Subscriber, didReceiveEncodedVideoFrame frame: UnsafeRawBufferPointer, info: EncodedFrameInfo) {
        lock.withLock { _encoded.append((Array(frame), info)); pending = true }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {
        let stamp = TestPatternReader.read(frame)
        lock.withLock {
            if !pending { _unpaired += 1 }
            pending = false
            _stamps.append(stamp)
        }
    }
}

final class EncodedFrameHookTests: XCTestCase {
    private func check(relayed: Bool) throws {
        let server = try TestServer(routed: !relayed)
        let t = try server.publishTone(try server.session(relayed: relayed))
        defer { t.disconnect() }

        let rec = EncodedRecorder()
        let subscriber = Subscriber(stream: t.stream, delegate: rec)
        try t.b.subscribe(subscriber)
        let deadline = Date().addingTimeInterval(15)
        while rec.stamps.count < 20 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        try t.b.unsubscribe(subscriber)
        let encoded = rec.encoded, stamps = rec.stamps
        XCTAssertGreaterThanOrEqual(stamps.count, 20)
        XCTAssertEqual(rec.unpaired, 0, "every picture follows its encoded frame")
        XCTAssertEqual(encoded.count, stamps.count)
        XCTAssertTrue(encoded.first?.info.isKeyframe ?? false, "the first decoded frame is a keyframe")
        XCTAssertEqual(encoded.first?.info.kind, .video)

        // The lent frames decode on their own, in order, to the same pictures the subscriber rendered.
        let decoder = try VP8Decoder()
        var picture = VideoFrame(width: 2, height: 2)
        var decoded: [TestPatternStamp?] = []
        for (data, info) in encoded {
            XCTAssertTrue(try decoder.decode(data[...], into: &picture))
            decoded.append(TestPatternReader.read(picture))
            XCTAssertEqual(info.ssrc, encoded[0].info.ssrc)
        }
        XCTAssertEqual(decoded, stamps)
        XCTAssertGreaterThan(decoded.compactMap { $0 }.count, 15)
        for (x, y) in zip(encoded, encoded.dropFirst()) {
            XCTAssertGreaterThan(Int32(bitPattern: y.info.rtpTimestamp &- x.info.rtpTimestamp), 0, "RTP timestamps increase")
        }
    }

    func testRoutedSubscriberLendsEachDecodedVP8Frame() throws { try check(relayed: false) }
    func testRelayedSubscriberLendsEachDecodedVP8Frame() throws { try check(relayed: true) }
}
