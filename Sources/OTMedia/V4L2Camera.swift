import COTShims
import Glibc
import OTBase

/// A capture mode a camera offers: pixel format, picture size and frame rates.
public struct CameraMode: Sendable, Equatable, CustomStringConvertible {
    public var format: PixelFormat
    public var width: Int
    public var height: Int
    /// The frame rates offered at this size (frames per second), highest first.
    public var frameRates: [Double]

    public init(format: PixelFormat, width: Int, height: Int, frameRates: [Double]) {
        self.format = format; self.width = width; self.height = height; self.frameRates = frameRates
    }

    public var description: String {
        "\(format) \(width)x\(height) @ " + frameRates.map { $0 == $0.rounded() ? String(Int($0)) : String($0) }.joined(separator: "/") + " fps"
    }
}

/// A V4L2 video capture device (a `/dev/video*` node that captures and streams).
public struct CameraInfo: Sendable, Equatable {
    /// The device node, what `V4L2Capturer(device:)` takes.
    public var path: String
    /// The driver's name for the camera ("HD Pro Webcam C920"), which `V4L2Capturer(device:)` also takes.
    public var name: String
    /// Where it is attached ("usb-0000:00:14.0-1").
    public var busInfo: String
    /// Every mode in a pixel format the library converts (I420, NV12, NV21, YUYV, UYVY, BGR24, MJPEG).
    public var modes: [CameraMode]

    public init(path: String, name: String, busInfo: String, modes: [CameraMode]) {
        self.path = path; self.name = name; self.busInfo = busInfo; self.modes = modes
    }
}

/// Cameras on V4L2: enumeration and the choice of a capture mode.
public enum V4L2Cameras {
    /// The V4L2 fourccs the library converts, and the pixel format each is.
    static let formats: [(fourcc: UInt32, format: PixelFormat)] = [
        (otshim_v4l2_fourcc(0x59, 0x55, 0x31, 0x32), .i420),  // YU12
        (otshim_v4l2_fourcc(0x4E, 0x56, 0x31, 0x32), .nv12),  // NV12
        (otshim_v4l2_fourcc(0x4E, 0x56, 0x32, 0x31), .nv21),  // NV21
        (otshim_v4l2_fourcc(0x59, 0x55, 0x59, 0x56), .yuy2),  // YUYV
        (otshim_v4l2_fourcc(0x55, 0x59, 0x56, 0x59), .uyvy),  // UYVY
        (otshim_v4l2_fourcc(0x42, 0x47, 0x52, 0x33), .rgb24), // BGR3: B, G, R in memory
        (otshim_v4l2_fourcc(0x4D, 0x4A, 0x50, 0x47), .mjpeg), // MJPG
        (otshim_v4l2_fourcc(0x4A, 0x50, 0x45, 0x47), .mjpeg), // JPEG
    ]
    static func fourcc(of format: PixelFormat) -> UInt32? { formats.first { $0.format == format }?.fourcc }

    /// Every capture device under `directory` (video0 before video1 …). Nodes that do not capture and stream (a UVC
    /// camera's metadata node), or whose formats the library cannot convert, are left out.
    public static func list(directory: String = "/dev") -> [CameraInfo] {
        guard let dir = opendir(directory) else { return [] }
        var numbers: [Int] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix("video"), let n = Int(name.dropFirst(5)), n >= 0, numbers.count < 256 { numbers.append(n) }
        }
        closedir(dir)
        return numbers.sorted().compactMap { describe(path: "\(directory)/video\($0)") }
    }

    /// The camera at `path`, or nil when it is not a usable capture device.
    public static func describe(path: String) -> CameraInfo? {
        let fd = otshim_v4l2_open(path)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var cap = v4l2_capability()
        guard otshim_v4l2_querycap(fd, &cap) == 0 else { return nil }
        let caps = cap.capabilities & UInt32(V4L2_CAP_DEVICE_CAPS) != 0 ? cap.device_caps : cap.capabilities
        guard caps & UInt32(V4L2_CAP_VIDEO_CAPTURE) != 0, caps & UInt32(V4L2_CAP_STREAMING) != 0 else { return nil }
        let modes = self.modes(fd)
        guard !modes.isEmpty else { return nil }
        return CameraInfo(path: path, name: text(cap.card), busInfo: text(cap.bus_info), modes: modes)
    }

    private static func text<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// The modes a device offers in the formats the library converts (bounded: a driver cannot make this loop forever).
    private static func modes(_ fd: Int32) -> [CameraMode] {
        var modes: [CameraMode] = []
        for index in 0..<64 {
            var desc = v4l2_fmtdesc()
            desc.index = UInt32(index)
            desc.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
            guard otshim_v4l2_enum_fmt(fd, &desc) == 0 else { break }
            guard let format = formats.first(where: { $0.fourcc == desc.pixelformat })?.format,
                  !modes.contains(where: { $0.format == format }) else { continue }
            for (w, h) in sizes(fd, fourcc: desc.pixelformat) {
                let rates = frameRates(fd, fourcc: desc.pixelformat, width: w, height: h)
                modes.append(CameraMode(format: format, width: w, height: h, frameRates: rates.isEmpty ? [30] : rates))
            }
        }
        return modes
    }

    /// Sizes common cameras offer, tried within a stepwise or continuous range.
    private static let commonSizes = [(160, 120), (320, 240), (640, 360), (640, 480), (800, 600), (960, 540), (1280, 720),
                                      (1280, 960), (1920, 1080), (2560, 1440), (3840, 2160)]

    private static func sizes(_ fd: Int32, fourcc: UInt32) -> [(Int, Int)] {
        var out: [(Int, Int)] = []
        for index in 0..<128 {
            var size = v4l2_frmsizeenum()
            size.index = UInt32(index)
            size.pixel_format = fourcc
            guard otshim_v4l2_enum_framesizes(fd, &size) == 0 else { break }
            if size.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                let (w, h) = (Int(size.discrete.width), Int(size.discrete.height))
                if (1...8192).contains(w), (1...8192).contains(h) { out.append((w, h)) }
            } else {
                let s = size.stepwise
                let stepW = max(Int(s.step_width), 1), stepH = max(Int(s.step_height), 1)
                for (w, h) in commonSizes + [(Int(s.max_width), Int(s.max_height))]
                where w >= Int(s.min_width) && w <= min(Int(s.max_width), 8192) && h >= Int(s.min_height) && h <= min(Int(s.max_height), 8192)
                    && (w - Int(s.min_width)) % stepW == 0 && (h - Int(s.min_height)) % stepH == 0 && !out.contains(where: { $0 == (w, h) }) {
                    out.append((w, h))
                }
                break
            }
        }
        return out
    }

    private static func frameRates(_ fd: Int32, fourcc: UInt32, width: Int, height: Int) -> [Double] {
        var rates: [Double] = []
        for index in 0..<64 {
            var ival = v4l2_frmivalenum()
            ival.index = UInt32(index)
            ival.pixel_format = fourcc
            ival.width = UInt32(width); ival.height = UInt32(height)
            guard otshim_v4l2_enum_frameintervals(fd, &ival) == 0 else { break }
            if ival.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                if ival.discrete.numerator > 0, ival.discrete.denominator > 0 {
                    rates.append(Double(ival.discrete.denominator) / Double(ival.discrete.numerator))
                }
            } else {
                // A range of intervals: its fastest rate and the common rates inside it.
                let fastest = ival.stepwise.min, slowest = ival.stepwise.max
                guard fastest.numerator > 0, fastest.denominator > 0, slowest.numerator > 0 else { break }
                let top = Double(fastest.denominator) / Double(fastest.numerator)
                let bottom = Double(slowest.denominator) / Double(slowest.numerator)
                rates.append(top)
                rates += [60.0, 30, 25, 20, 15, 10, 5].filter { $0 < top && $0 >= bottom }
                break
            }
        }
        return Array(Set(rates.filter { $0 > 0 && $0 <= 1000 })).sorted(by: >)
    }

    /// Finds a camera by path (`/dev/video2`) or by name (exact, then case-insensitive); nil: the first camera.
    /// Throws `deviceUnavailable` when there is none.
    public static func find(_ device: String?, directory: String = "/dev") throws -> CameraInfo {
        if let device, device.hasPrefix("/") {
            guard let info = describe(path: device) else {
                throw OTError(.deviceUnavailable, "\(device) is not a V4L2 capture device the library can use")
            }
            return info
        }
        let all = list(directory: directory)
        guard let device else {
            guard let first = all.first else { throw OTError(.deviceUnavailable, "no camera under \(directory)") }
            return first
        }
        guard let info = all.first(where: { $0.name == device }) ?? all.first(where: { $0.name.lowercased() == device.lowercased() }) else {
            throw OTError(.deviceUnavailable, "no camera named \"\(device)\" (cameras: \(all.map { "\($0.name) (\($0.path))" }.joined(separator: ", ")))")
        }
        return info
    }

    /// Preference among formats at equal size and rate: no conversion work first, compressed last.
    private static let formatRank: [PixelFormat] = [.i420, .nv12, .yuy2, .uyvy, .nv21, .rgb24, .mjpeg]

    /// The mode closest to `width`×`height` at `fps`, and the rate to ask for: the nearest size (by area and aspect
    /// ratio), then a rate of at least `fps` (the lowest such, else the highest offered), then the cheapest format
    /// to convert. Nil when there are no modes.
    public static func bestMode(_ modes: [CameraMode], width: Int, height: Int, fps: Int) -> (mode: CameraMode, fps: Double)? {
        let area = Double(max(width, 1) * max(height, 1)), aspect = Double(max(width, 1)) / Double(max(height, 1))
        func rate(_ m: CameraMode) -> Double {
            m.frameRates.filter { $0 >= Double(fps) - 0.01 }.min() ?? m.frameRates.max() ?? Double(fps)
        }
        func cost(_ m: CameraMode) -> Double {
            let size = abs(log(Double(m.width * m.height) / area)) + 0.5 * abs(log(Double(m.width) / Double(m.height) / aspect))
            let r = rate(m)
            let slow = r >= Double(fps) - 0.01 ? 0 : log(Double(fps) / r)
            return ((size + slow) * 1000).rounded() / 1000
        }
        let best = modes.filter { $0.width > 0 && $0.height > 0 }.min { a, b in
            let (ca, cb) = (cost(a), cost(b))
            if ca != cb { return ca < cb }
            return (formatRank.firstIndex(of: a.format) ?? 99) < (formatRank.firstIndex(of: b.format) ?? 99)
        }
        return best.map { ($0, rate($0)) }
    }
}
