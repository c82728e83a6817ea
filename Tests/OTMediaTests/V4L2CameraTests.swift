import OTBase
import XCTest
@testable import OTMedia

/// The camera's mode choice and lookups that need no device (the stand-in tests in OTSessionTests cover capture).
final class V4L2CameraTests: XCTestCase {
    let modes = [
        CameraMode(format: .yuy2, width: 640, height: 480, frameRates: [30, 15]),
        CameraMode(format: .yuy2, width: 1280, height: 720, frameRates: [10, 5]),
        CameraMode(format: .mjpeg, width: 640, height: 480, frameRates: [30, 15]),
        CameraMode(format: .mjpeg, width: 1280, height: 720, frameRates: [30, 15]),
        CameraMode(format: .mjpeg, width: 1920, height: 1080, frameRates: [30]),
        CameraMode(format: .nv12, width: 320, height: 240, frameRates: [30]),
    ]

    func testBestModePrefersSizeThenRateThenTheCheaperFormat() throws {
        // Exact size and rate in both formats: the raw one (no JPEG decoding).
        var best = try XCTUnwrap(V4L2Cameras.bestMode(modes, width: 640, height: 480, fps: 30))
        XCTAssertEqual(best.mode.format, .yuy2); XCTAssertEqual(best.fps, 30)
        // 720p30: YUYV only reaches 10 fps there, MJPEG 30.
        best = try XCTUnwrap(V4L2Cameras.bestMode(modes, width: 1280, height: 720, fps: 30))
        XCTAssertEqual(best.mode.format, .mjpeg); XCTAssertEqual(best.mode.width, 1280); XCTAssertEqual(best.fps, 30)
        // 720p at 5 fps: YUYV's 5 fps (the lowest rate at least the target).
        best = try XCTUnwrap(V4L2Cameras.bestMode(modes, width: 1280, height: 720, fps: 5))
        XCTAssertEqual(best.mode.format, .yuy2); XCTAssertEqual(best.fps, 5)
        // 15 fps asked at 640x480: 15, not 30.
        XCTAssertEqual(V4L2Cameras.bestMode(modes, width: 640, height: 480, fps: 15)?.fps, 15)
        // A size no mode has: the nearest one (by area and shape).
        XCTAssertEqual(V4L2Cameras.bestMode(modes, width: 352, height: 288, fps: 30)?.mode.width, 320)
        XCTAssertEqual(V4L2Cameras.bestMode(modes, width: 1920, height: 1200, fps: 30)?.mode.height, 1080)
        // Faster than anything offered: the fastest at the nearest size.
        XCTAssertEqual(V4L2Cameras.bestMode(modes, width: 1920, height: 1080, fps: 60)?.fps, 30)
        XCTAssertNil(V4L2Cameras.bestMode([], width: 640, height: 480, fps: 30))
    }

    func testMissingCamerasAreReportedNotTrappedOn() {
        XCTAssertThrowsError(try V4L2Cameras.find("/dev/null")) { XCTAssertEqual(($0 as? OTError)?.code, .deviceUnavailable) }
        XCTAssertThrowsError(try V4L2Cameras.find("/nonexistent/video0")) { XCTAssertEqual(($0 as? OTError)?.code, .deviceUnavailable) }
        XCTAssertThrowsError(try V4L2Capturer(device: "No Such Camera", directory: "/nonexistent")) {
            XCTAssertEqual(($0 as? OTError)?.code, .deviceUnavailable)
        }
        XCTAssertEqual(V4L2Cameras.list(directory: "/nonexistent"), [])
        XCTAssertThrowsError(try V4L2Capturer(device: nil, width: 0, height: 480, fps: 30)) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) }
    }
}
