import COTShims
import Dispatch
import Glibc
import OTBase
import Synchronization

/// A camera on V4L2 as a `VideoCapturer`: opens the device in the mode closest to the requested size and rate
/// (`V4L2Cameras.bestMode`), captures into mmap'ed buffers on its own thread ("otsession-camera") and hands each
/// frame, in the camera's format (MJPEG, YUYV, NV12, I420, …), to the consumer, which converts it to I420.
///
/// When the camera cannot be opened at start, or vanishes while capturing (unplugged), the capturer reports a
/// `DeviceError` to its observers and goes on delivering black frames of the same size and rate, so the stream and
/// the session continue; the next start tries the camera again.
public final class V4L2Capturer: VideoCapturer, DeviceErrorReporting, @unchecked Sendable {
    /// The camera and the mode chosen for it.
    public let camera: CameraInfo
    public let mode: CameraMode
    public let captureSettings: VideoCaptureSettings

    private struct State {
        var consumer: (any VideoFrameConsumer)?
        var running = false
        /// The capture thread's wake-up pipe (write end) and its exit signal, while it runs.
        var wake: Int32 = -1
        var exited: DispatchSemaphore?
        var thread: pthread_t?
    }
    private let state = Mutex(State())
    private let observers = DeviceErrorObservers()

    /// Opens nothing yet: finds the camera (`device`: a path such as /dev/video0, a camera name, or nil for the first
    /// camera) and chooses its mode. Throws `deviceUnavailable` when there is no such camera, `invalidParameter` for
    /// an implausible size or rate.
    public init(device: String? = nil, width: Int = 640, height: Int = 480, fps: Int = 30, directory: String = "/dev") throws {
        try VideoCaptureSettings(width: width, height: height, fps: fps).validate()
        camera = try V4L2Cameras.find(device, directory: directory)
        guard let (mode, rate) = V4L2Cameras.bestMode(camera.modes, width: width, height: height, fps: fps) else {
            throw OTError(.deviceUnavailable, "\(camera.path) offers no mode the library can convert")
        }
        self.mode = mode
        captureSettings = VideoCaptureSettings(format: mode.format, width: mode.width, height: mode.height,
                                               fps: max(1, min(240, Int(rate.rounded()))))
    }

    public func observeErrors(_ handler: @escaping @Sendable (DeviceError) -> Void) -> DeviceObservation { observers.observe(handler) }

    public func initCapture(consumer: any VideoFrameConsumer) throws { state.withLock { $0.consumer = consumer } }

    public var isCapturing: Bool { state.withLock { $0.running } }

    public func startCapture() throws {
        guard state.withLock({ $0.consumer != nil }) else { throw OTError(.illegalState, "startCapture before initCapture") }
        guard !state.withLock({ $0.running }) else { return }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw OTError(.internalError, "no pipe for the capture thread: errno \(errno)") }
        _ = otshim_set_nonblocking(fds[0]); _ = otshim_set_nonblocking(fds[1])
        // Open on the caller's thread so a failure is reported before the first frame is due.
        var device: CameraStream?
        do { device = try CameraStream(path: camera.path, mode: mode, fps: captureSettings.fps) } catch {
            report(.deviceUnavailable, "the camera \(camera.path) could not be opened: \((error as? OTError)?.message ?? "\(error)")")
        }
        let exited = DispatchSemaphore(value: 0)
        state.withLock { s in s.running = true; s.wake = fds[1]; s.exited = exited }
        let readEnd = fds[0]
        let box = SendableBox(device)
        let started = OSThread.start(name: "otsession-camera") { [self] in
            state.withLock { $0.thread = pthread_self() }
            run(device: box.value, wake: readEnd)
            close(readEnd)
            exited.signal()
        }
        if !started {
            box.value?.close()
            close(readEnd); close(fds[1])
            state.withLock { s in s.running = false; s.wake = -1; s.exited = nil }
            throw OTError(.internalError, "no capture thread")
        }
    }

    public func stopCapture() {
        let (wake, exited, onThread) = state.withLock { s -> (Int32, DispatchSemaphore?, Bool) in
            guard s.running else { return (-1, nil, false) }
            defer { s.running = false; s.wake = -1; s.exited = nil; s.thread = nil }
            return (s.wake, s.exited, s.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false)
        }
        guard wake >= 0 else { return }
        var one: UInt8 = 1
        _ = write(wake, &one, 1)
        // Called from a frame callback on the capture thread itself: it ends when the callback returns.
        if !onThread { exited?.wait() }
        close(wake)
    }

    public func releaseCapture() {
        stopCapture()
        state.withLock { $0.consumer = nil }
    }

    deinit { stopCapture() }

    private func report(_ code: OTErrorCode, _ message: String) {
        observers.report(DeviceError(kind: .camera, device: camera.path, error: OTError(code, message)))
    }

    private func deliver(_ frame: CapturedFrame) {
        guard let consumer = state.withLock({ $0.running ? $0.consumer : nil }) else { return }
        consumer.consumeFrame(frame)
    }

    /// The capture thread: frames from the camera until stopped; after a failure, black frames at the same rate.
    private func run(device initial: CameraStream?, wake: Int32) {
        var device = initial
        defer { device?.close() }
        let interval = Int32(max(1, 1000 / captureSettings.fps))
        var black: CapturedFrame?
        while true {
            var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            if let device { fds.append(pollfd(fd: device.fd, events: Int16(POLLIN), revents: 0)) }
            let n = poll(&fds, nfds_t(fds.count), device == nil ? interval : 2000)
            if n < 0 && errno != EINTR { break }
            if fds[0].revents != 0 { break }
            guard let open = device else {
                // Stand-in: a black picture at the camera's size and rate.
                if n == 0 {
                    if black == nil { black = CapturedFrame(VideoFrame(width: captureSettings.width, height: captureSettings.height)) }
                    if var frame = black {
                        frame.timestampMicros = MonotonicClock.now().micros
                        deliver(frame)
                    }
                }
                continue
            }
            guard n > 0 else { continue }
            let events = Int32(fds[1].revents)
            do {
                if events & (POLLERR | POLLHUP | POLLNVAL) != 0 { throw OTError(.deviceLost, "the device reported an error (poll events \(events))") }
                if events & POLLIN != 0, let frame = try open.dequeue() { deliver(frame) }
            } catch {
                open.close()
                device = nil
                report(.deviceLost, "the camera \(camera.path) was lost: \((error as? OTError)?.message ?? "\(error)")")
            }
        }
    }
}

/// Carries a value into a `@Sendable` closure that runs once on another thread.
private struct SendableBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// An open V4L2 device streaming into mmap'ed buffers. Used by one thread at a time.
private final class CameraStream: @unchecked Sendable {
    let fd: Int32
    private var buffers: [(start: UnsafeMutableRawPointer, length: Int)] = []
    private let format: PixelFormat
    private let width: Int, height: Int, bytesPerLine: Int
    private var closed = false

    /// Opens `path`, sets `mode` and the rate, maps four buffers and starts streaming. Throws `deviceUnavailable`.
    init(path: String, mode: CameraMode, fps: Int) throws {
        guard let fourcc = V4L2Cameras.fourcc(of: mode.format) else { throw OTError(.deviceUnavailable, "no fourcc for \(mode.format)") }
        fd = otshim_v4l2_open(path)
        guard fd >= 0 else { throw OTError(.deviceUnavailable, "open: \(String(cString: strerror(errno)))") }
        format = mode.format
        var f = v4l2_format()
        f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        f.fmt.pix.width = UInt32(mode.width)
        f.fmt.pix.height = UInt32(mode.height)
        f.fmt.pix.pixelformat = fourcc
        f.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        var rc = otshim_v4l2_s_fmt(fd, &f)
        let pix = f.fmt.pix
        guard rc == 0, V4L2Cameras.formats.first(where: { $0.fourcc == pix.pixelformat })?.format == mode.format,
              (1...8192).contains(Int(pix.width)), (1...8192).contains(Int(pix.height)) else {
            Glibc.close(fd)
            throw OTError(.deviceUnavailable, rc != 0 ? "VIDIOC_S_FMT: \(String(cString: strerror(rc)))" : "the camera did not take \(mode)")
        }
        width = Int(pix.width); height = Int(pix.height)
        let minLine = mode.format.planeGeometry(width: width, height: height)[0].minStride
        bytesPerLine = mode.format == .mjpeg ? 0 : max(Int(pix.bytesperline), minLine)
        var parm = v4l2_streamparm()
        parm.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        parm.parm.capture.timeperframe = v4l2_fract(numerator: 1, denominator: UInt32(fps))
        _ = otshim_v4l2_s_parm(fd, &parm)  // Not every driver sets the rate; it then runs at its own.
        var req = v4l2_requestbuffers()
        req.count = 4
        req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        req.memory = V4L2_MEMORY_MMAP.rawValue
        rc = otshim_v4l2_reqbufs(fd, &req)
        guard rc == 0, req.count >= 2, req.count <= 32 else {
            Glibc.close(fd)
            throw OTError(.deviceUnavailable, rc != 0 ? "VIDIOC_REQBUFS: \(String(cString: strerror(rc)))" : "the camera gave \(req.count) buffers")
        }
        do {
            for i in 0..<req.count {
                var b = v4l2_buffer()
                b.index = i
                b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
                b.memory = V4L2_MEMORY_MMAP.rawValue
                rc = otshim_v4l2_querybuf(fd, &b)
                guard rc == 0, b.length > 0 else { throw OTError(.deviceUnavailable, "VIDIOC_QUERYBUF: \(String(cString: strerror(rc)))") }
                guard let p = mmap(nil, Int(b.length), PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(b.m.offset)),
                      p != UnsafeMutableRawPointer(bitPattern: -1) else {
                    throw OTError(.deviceUnavailable, "mmap: \(String(cString: strerror(errno)))")
                }
                buffers.append((p, Int(b.length)))
                rc = otshim_v4l2_qbuf(fd, &b)
                guard rc == 0 else { throw OTError(.deviceUnavailable, "VIDIOC_QBUF: \(String(cString: strerror(rc)))") }
            }
            rc = otshim_v4l2_stream(fd, 1)
            guard rc == 0 else { throw OTError(.deviceUnavailable, "VIDIOC_STREAMON: \(String(cString: strerror(rc)))") }
        } catch {
            close()
            throw error
        }
        Log.info("camera", "\(path): \(format) \(width)x\(height), \(fps) fps asked")
    }

    /// Stops streaming, unmaps the buffers and closes the device (idempotent).
    func close() {
        guard !closed else { return }
        closed = true
        _ = otshim_v4l2_stream(fd, 0)
        for b in buffers { munmap(b.start, b.length) }
        buffers = []
        Glibc.close(fd)
    }

    deinit { close() }

    /// Takes the next filled buffer (nil when none is ready or it holds no usable picture), copies it into a
    /// `CapturedFrame` and gives the buffer back. Throws `deviceLost` when the device fails.
    func dequeue() throws -> CapturedFrame? {
        var b = v4l2_buffer()
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        b.memory = V4L2_MEMORY_MMAP.rawValue
        let rc = otshim_v4l2_dqbuf(fd, &b)
        if rc == EAGAIN || rc == EINTR { return nil }
        guard rc == 0 else { throw OTError(.deviceLost, "VIDIOC_DQBUF: \(String(cString: strerror(rc)))") }
        defer {
            let q = otshim_v4l2_qbuf(fd, &b)
            if q != 0 { Log.warn("camera", "VIDIOC_QBUF: \(String(cString: strerror(q)))") }
        }
        guard Int(b.index) < buffers.count, b.flags & UInt32(V4L2_BUF_FLAG_ERROR) == 0 else { return nil }
        let buffer = buffers[Int(b.index)]
        let used = b.bytesused > 0 ? min(Int(b.bytesused), buffer.length) : buffer.length
        let bytes = UnsafeRawBufferPointer(start: buffer.start, count: used)
        let micros = b.flags & UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC) != 0
            ? Int64(b.timestamp.tv_sec) * 1_000_000 + Int64(b.timestamp.tv_usec) : MonotonicClock.now().micros
        return frame(bytes, timestampMicros: micros)
    }

    /// The planes of one picture laid out as V4L2 packs them (chroma planes follow the luma plane).
    private func frame(_ bytes: UnsafeRawBufferPointer, timestampMicros: Int64) -> CapturedFrame? {
        let ch = (height + 1) / 2
        let layout: [(offset: Int, stride: Int, rows: Int)]
        switch format {
        case .mjpeg:
            guard bytes.count >= 4 else { return nil }
            return CapturedFrame(format: .mjpeg, width: width, height: height, planes: [Array(bytes)], strides: [bytes.count],
                                 timestampMicros: timestampMicros)
        case .i420:
            let half = (bytesPerLine + 1) / 2
            layout = [(0, bytesPerLine, height), (bytesPerLine * height, half, ch), (bytesPerLine * height + half * ch, half, ch)]
        case .nv12, .nv21:
            layout = [(0, bytesPerLine, height), (bytesPerLine * height, bytesPerLine, ch)]
        default:
            layout = [(0, bytesPerLine, height)]
        }
        guard let last = layout.last, last.offset + last.stride * last.rows <= bytes.count else { return nil }
        let planes = layout.map { Array(bytes[$0.offset..<($0.offset + $0.stride * $0.rows)]) }
        return CapturedFrame(format: format, width: width, height: height, planes: planes, strides: layout.map(\.stride),
                             timestampMicros: timestampMicros)
    }
}
