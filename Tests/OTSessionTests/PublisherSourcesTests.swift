import Foundation
import OTMedia
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// Video sources and audio playout, over relayed sessions.
final class PublisherSourcesTests: XCTestCase {
    /// Bitrates beyond any encoder's (up to `Int.max` kbit/s, whose bit/s overflow when a connection starts) are refused
    /// when the publisher is made; the highest accepted is 100 Mbit/s.
    func testAbsurdBitratesAreRefused() throws {
        for (start, max) in [(Int.max, Int.max), (600, Int.max), (600, PublisherSettings.maxVideoBitrateKbps + 1)] {
            XCTAssertThrowsError(try Publisher(delegate: nil, settings: PublisherSettings(startBitrateKbps: start, maxBitrateKbps: max)),
                                 "start \(start), max \(max)") { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) }
        }
        XCTAssertNoThrow(try Publisher(delegate: nil, settings: PublisherSettings(maxBitrateKbps: PublisherSettings.maxVideoBitrateKbps)))
        XCTAssertEqual(PublisherSettings.maxVideoBitrateKbps, 100_000)
    }

    /// The Opus bitrate is checked for Swift users too (until stop 25 only the C ABI checked it): 6000 to 510000 bit/s.
    /// The refusal names the setting as its caller calls it: the Swift property, or (`validate(naming:)`) a C member.
    func testAudioBitrateOutsideOpusRangeIsRefused() throws {
        for bps in [Int.min, -1, 0, 5_999, 510_001, Int.max] {
            XCTAssertThrowsError(try Publisher(delegate: nil, settings: PublisherSettings(audioBitrateBps: bps)), "\(bps)") {
                XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter)
                XCTAssertTrue(($0 as? OTError)?.message.hasPrefix("audioBitrateBps \(bps) is not 6000..510000") == true, "\($0)")
            }
        }
        XCTAssertNoThrow(try Publisher(delegate: nil, settings: PublisherSettings(audioBitrateBps: 6_000)))
        XCTAssertThrowsError(try PublisherSettings(audioBitrateBps: 0).validate(naming: { $0 == "audioBitrateBps" ? "audio_bitrate_bps" : $0 })) {
            XCTAssertTrue(($0 as? OTError)?.message.hasPrefix("audio_bitrate_bps 0 is not") == true, "\($0)")
        }
    }

    /// A custom capturer pushing NV12 frames from the test's own thread; the subscriber decodes them.
    func testCustomCapturerFramesInNV12Arrive() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let capturer = try CallbackVideoCapturer(settings: VideoCaptureSettings(format: .nv12, width: 160, height: 120, fps: 20))
        let pubRec = MediaRecorder("publisher")
        let publisher = try Publisher(delegate: pubRec, settings: PublisherSettings(videoSource: .capturer(capturer), audioTrack: false,
                                                                                   videoType: .custom, width: 160, height: 120))
        try a.publish(publisher)
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }
        let stream = try XCTUnwrap(publisher.stream)
        XCTAssertEqual(stream.videoType, "custom")
        XCTAssertFalse(stream.hasAudio)
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
        let subRec = MediaRecorder("subscriber")
        try b.subscribe(Subscriber(stream: stream, delegate: subRec))
        subRec.waitFor(.connected)
        let stop = Flag()
        let pusher = Thread {
            var n: UInt8 = 0
            while !stop.isSet {
                let y = [UInt8](repeating: 60 &+ n, count: 160 * 120), uv = [UInt8](repeating: 128, count: 160 * 60)
                _ = capturer.provideFrame(CapturedFrame(format: .nv12, width: 160, height: 120, planes: [y, uv], strides: [160, 160],
                                                        timestampMicros: Int64(Date().timeIntervalSince1970 * 1e6)))
                n &+= 1
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        pusher.start()
        defer { stop.set() }
        subRec.waitForFrames(5)
        XCTAssertEqual(subRec.lastFrameSize.width, 160)
        XCTAssertEqual(subRec.lastFrameSize.height, 120)
        XCTAssertTrue(subRec.stamps.isEmpty, "custom frames carry no test-pattern stamp")
    }

    /// Subscribed audio plays on the session's audio device (mixed), not only through the audio-data callback.
    func testSubscribedAudioPlaysOnTheSessionsAudioDevice() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let speaker = try HeadlessAudioDevice(render: .record(maxSamples: 48_000))
        try b.setAudioDevice(speaker)
        let tone = try HeadlessAudioDevice(capture: .tone(frequency: 660, amplitude: 0.5))
        let publisher = try Publisher(delegate: nil, settings: PublisherSettings(videoSource: .none, audioDevice: tone))
        try a.publish(publisher)
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let stream = try XCTUnwrap(b.streams.values.first)
        XCTAssertFalse(stream.hasVideo)
        let subRec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: subRec)
        try b.subscribe(subscriber)
        subRec.wait("1 s of audio") { $0.audio.samples.count >= 48_000 }
        XCTAssertTrue(speaker.isRendering)
        let played = speaker.recordedSamples()
        XCTAssertEqual(toneFrequency(played.suffix(12_000), sampleRate: 48_000), 660, accuracy: 20)
        XCTAssertThrowsError(try b.setAudioDevice(try HeadlessAudioDevice())) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        try b.unsubscribe(subscriber)
        XCTAssertFalse(speaker.isRendering, "playout stops with the last subscriber")
    }

    /// One relayed publisher, two subscribers: the same encoded stream goes to each peer connection.
    func testRelayedPublisherFansOutToTwoSubscribers() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        let (c, cRec) = try server.client(sid, name: "C")
        defer { for s in [a, b, c] { try? s.disconnect() } }
        let (_, pubRec, stream) = try publishTone(a, seenBy: bRec)
        cRec.wait("stream at C") { $0.contains(.streamCreated(stream)) }
        let r1 = MediaRecorder("B-sub"), r2 = MediaRecorder("C-sub")
        try b.subscribe(Subscriber(stream: stream, delegate: r1))
        try c.subscribe(Subscriber(stream: stream, delegate: r2))
        r1.waitForFrames(10)
        r2.waitForFrames(10)
        pubRec.wait("two connections") { $0.publisherStats.contains { $0.connections == 2 } }
        XCTAssertFalse(r1.stamps.isEmpty)
        XCTAssertFalse(r2.stamps.isEmpty)
    }
}

extension PublisherSourcesTests {
    /// A file of raw I420 frames is published and looped.
    func testRawFileSourceIsPublished() throws {
        let path = NSTemporaryDirectory() + "ot-raw-\(UUID().uuidString).yuv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let pattern = try TestPatternSource(width: 160, height: 120)
        var bytes: [UInt8] = []
        for i in 0..<3 {
            let f = pattern.render(frameNumber: UInt32(i), timestampMicros: Int64(i) * 66_000)
            for row in 0..<120 { bytes += f.y[(row * f.strideY)..<(row * f.strideY + 160)] }
            for row in 0..<60 { bytes += f.u[(row * f.strideU)..<(row * f.strideU + 80)] }
            for row in 0..<60 { bytes += f.v[(row * f.strideV)..<(row * f.strideV + 80)] }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let publisher = try Publisher(delegate: nil, settings: PublisherSettings(videoSource: .rawFile(path: path), audioTrack: false,
                                                                                width: 160, height: 120, fps: 15))
        try a.publish(publisher)
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let rec = MediaRecorder("subscriber")
        try b.subscribe(Subscriber(stream: try XCTUnwrap(b.streams.values.first), delegate: rec))
        rec.waitForFrames(8)
        // The file's frames carry the stamps they were rendered with: numbers 0, 1, 2 repeating.
        XCTAssertTrue(rec.stamps.allSatisfy { $0.frameNumber < 3 }, "\(rec.stamps)")
        XCTAssertEqual(Set(rec.stamps.map(\.frameNumber)).count, 3)
    }
}

extension PublisherSourcesTests {
    /// A custom capturer that changes size: others see the stream's dimensions change, frames the new size.
    func testCapturerSizeChangeUpdatesTheStreamDimensions() throws {
        let server = try TestServer()
        let sid = try server.session(relayed: true)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let capturer = try CallbackVideoCapturer(settings: VideoCaptureSettings(format: .i420, width: 160, height: 120, fps: 20))
        let publisher = try Publisher(delegate: nil, settings: PublisherSettings(videoSource: .capturer(capturer), audioTrack: false))
        try a.publish(publisher)
        bRec.wait("stream at B") { $0.contains { if case .streamCreated = $0 { true } else { false } } }
        let stream = try XCTUnwrap(b.streams.values.first)
        XCTAssertEqual(stream.width, 160)
        let rec = MediaRecorder("subscriber")
        try b.subscribe(Subscriber(stream: stream, delegate: rec))
        rec.waitFor(.connected)
        let big = Flag(), stop = Flag()
        let pusher = Thread {
            var n: UInt32 = 0
            while !stop.isSet {
                let (w, h) = big.isSet ? (320, 240) : (160, 120)
                let f = (try? TestPatternSource(width: w, height: h))?.render(frameNumber: n, timestampMicros: Int64(n) * 50_000)
                if let f { _ = capturer.provideFrame(CapturedFrame(f)) }
                n += 1
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        pusher.start()
        defer { stop.set() }
        rec.waitForFrames(3)
        XCTAssertEqual(rec.lastFrameSize.width, 160)
        big.set()
        bRec.waitFor(.changed(stream.id, .dimensions(width: 320, height: 240)))
        rec.wait("320×240 frames") { $0.lastFrameSize.width == 320 && $0.lastFrameSize.height == 240 }
    }
}
