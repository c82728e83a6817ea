import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import XCTest

/// The V4L2 camera through a routed session, without a kernel module: each test runs `CameraCallChild` in a child
/// copy of this test binary with the user-space V4L2 stand-in (Tests/fixtures/fake-v4l2, built here from its C source)
/// preloaded, so the library's open/ioctl/mmap/poll calls meet a fake /dev/video77 that sends a known picture, in each
/// camera format the library takes from V4L2 devices: YUYV, MJPEG, NV12 and I420 (YU12).
/// (The machine's kernel has no v4l2loopback; the stand-in speaks the same ioctl protocol to the same code.)
final class CameraTests: XCTestCase {
    static let device = "/dev/video77"

    /// Builds the stand-in once per run; nil (skip) without a C compiler or libjpeg's headers.
    static let standIn: String? = {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("fixtures/fake-v4l2/fake_v4l2.c").path
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("ot-fake-v4l2-\(getpid()).so").path
        let cc = Process()
        cc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        cc.arguments = ["cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", out, source, "-ldl", "-ljpeg", "-lpthread"]
        guard (try? cc.run()) != nil else { return nil }
        cc.waitUntilExit()
        return cc.terminationStatus == 0 ? out : nil
    }()

    /// Runs `CameraCallChild/testCameraCall` under the stand-in offering `format`; fails with the child's output.
    func runChild(format: String, file: StaticString = #filePath, line: UInt = #line) throws {
        guard let shim = Self.standIn else { throw XCTSkip("cannot build the V4L2 stand-in (cc and libjpeg-dev are needed)") }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = ["OTSessionTests.CameraCallChild/testCameraCall"]
        var env = ProcessInfo.processInfo.environment
        env["LD_PRELOAD"] = shim
        env["FAKE_V4L2_DEVICE"] = Self.device
        env["FAKE_V4L2_FORMATS"] = format
        env["FAKE_V4L2_SIZES"] = "640x480,320x240"
        env["FAKE_V4L2_FPS"] = "30,15"
        env["OT_CAMERA_CHILD"] = format
        child.environment = env
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("ot-camera-child-\(getpid())-\(format).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        child.standardOutput = handle
        child.standardError = handle
        try child.run()
        child.waitUntilExit()
        try handle.close()
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: log)
        for figure in output.split(separator: "\n") where figure.hasPrefix("[figures]") { print(figure) }
        let ran = output.contains("Executed 1 test") && !output.contains("skipped")
        XCTAssertTrue(child.terminationStatus == 0 && ran, "the camera child (\(format)) failed:\n\(output.suffix(6000))", file: file, line: line)
    }

    func testYUYVCameraThroughARoutedSessionAndUnplugged() throws { try runChild(format: "YUYV") }
    func testMJPEGCameraThroughARoutedSessionAndUnplugged() throws { try runChild(format: "MJPG") }
    func testNV12CameraThroughARoutedSessionAndUnplugged() throws { try runChild(format: "NV12") }
    func testI420CameraThroughARoutedSessionAndUnplugged() throws { try runChild(format: "YU12") }
}

/// Runs only as the child of `CameraTests` (OT_CAMERA_CHILD set, the stand-in preloaded): enumerates the fake camera,
/// publishes it into a routed session, checks the subscriber decodes the known picture, then pulls the cable.
final class CameraCallChild: XCTestCase {
    func testCameraCall() throws {
        guard let format = ProcessInfo.processInfo.environment["OT_CAMERA_CHILD"] else {
            throw XCTSkip("runs as CameraTests' child process only")
        }
        let expected = try XCTUnwrap(["MJPG": PixelFormat.mjpeg, "YUYV": .yuy2, "NV12": .nv12, "YU12": .i420][format])

        // Enumeration: the fake camera with its formats, sizes and rates.
        let camera = try XCTUnwrap(V4L2Cameras.list().first { $0.path == CameraTests.device }, "\(V4L2Cameras.list())")
        XCTAssertEqual(camera.name, "Fake Camera")
        XCTAssertEqual(Set(camera.modes.map(\.format)), [expected])
        XCTAssertEqual(Set(camera.modes.map { "\($0.width)x\($0.height)" }), ["640x480", "320x240"])
        XCTAssertEqual(camera.modes.first?.frameRates, [30, 15])

        let server = try TestServer(routed: true)
        let sid = try server.session(relayed: false)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let pubRec = MediaRecorder("publisher")
        // By name; the closest mode to 320x240 @ 15.
        let publisher = try Publisher(delegate: pubRec, settings: PublisherSettings(name: "cam", videoSource: .camera(device: "Fake Camera"),
                                                                                   audioTrack: false, width: 320, height: 240, fps: 15))
        let capturer = try XCTUnwrap(publisher.videoCapturer as? V4L2Capturer)
        XCTAssertEqual(capturer.mode.format, expected)
        XCTAssertEqual(capturer.captureSettings.width, 320); XCTAssertEqual(capturer.captureSettings.height, 240)
        XCTAssertEqual(capturer.captureSettings.fps, 15)
        try a.publish(publisher)
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }
        let stream = try XCTUnwrap(publisher.stream)
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
        let subRec = MediaRecorder("subscriber")
        try b.subscribe(Subscriber(stream: stream, delegate: subRec))
        subRec.waitForFrames(20)

        // The known picture came through: the quadrants' colours, after capture, conversion, VP8 and the router.
        let frame = try XCTUnwrap(subRec.lastFrame)
        XCTAssertEqual(frame.width, 320); XCTAssertEqual(frame.height, 240)
        let error = FourQuadrants.largestError(frame)
        XCTAssertLessThanOrEqual(error, 12, "\(FourQuadrants.means(frame))")
        print(String(format: "[figures] camera %@ 320x240: largest quadrant colour error after VP8 %.1f (of 255)", format, error))

        // Pull the cable: the publisher hears of it, the call goes on with black frames.
        typealias Unplug = @convention(c) () -> Void
        let unplug = try XCTUnwrap(dlsym(nil, "fake_v4l2_unplug"), "the stand-in is not preloaded")  // RTLD_DEFAULT
        unsafeBitCast(unplug, to: Unplug.self)()
        pubRec.waitFor(.deviceFailed(.camera, .deviceLost))
        subRec.wait("black frames") { rec in
            guard let f = rec.lastFrame else { return false }
            return f.y.reduce(0) { $0 + Int($1) } / f.y.count < 24
        }
        let before = subRec.frames
        subRec.waitForFrames(10)
        XCTAssertGreaterThanOrEqual(subRec.frames, before + 10)
        XCTAssertFalse(bRec.events.contains(.disconnected))
        XCTAssertFalse(subRec.events.contains(.disconnected))
        XCTAssertEqual(a.status, .connected); XCTAssertEqual(b.status, .connected)
        XCTAssertFalse(V4L2Cameras.list().contains { $0.path == CameraTests.device }, "an unplugged camera is no longer listed")
    }
}
