import Dispatch
import OTBase
import Synchronization

/// Pixel layouts a capturer may deliver. Raw values equal the C ABI's frame format numbers
/// (OpenTok's `otc_video_frame_format`: YUV420P 1 … MJPEG 10, RGBA32 11).
///
/// Packed RGB names follow libyuv and WebRTC, which OpenTok's native SDKs feed these formats to:
/// a name spells a little-endian 32-bit word from its high byte down, so `.argb` is B, G, R, A
/// at increasing addresses. `packedRGBLayout` gives the byte offsets.
public enum PixelFormat: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// Planar Y, U, V (4:2:0): the library's internal format.
    case i420 = 1
    /// Y plane, then interleaved U/V (4:2:0).
    case nv12 = 2
    /// Y plane, then interleaved V/U (4:2:0).
    case nv21 = 3
    /// Packed Y0 U Y1 V (4:2:2).
    case yuy2 = 4
    /// Packed U Y0 V Y1 (4:2:2).
    case uyvy = 5
    /// 32-bit pixels; bytes in memory B G R A.
    case argb = 6
    /// 32-bit pixels; bytes in memory A R G B.
    case bgra = 7
    /// 24-bit pixels; bytes in memory B G R.
    case rgb24 = 8
    /// 32-bit pixels; bytes in memory R G B A.
    case abgr = 9
    /// One JPEG picture per frame (an MJPEG camera's): one plane holding the compressed bytes, whose stride is
    /// the JPEG's length in bytes.
    case mjpeg = 10
    /// 32-bit pixels; bytes in memory A B G R.
    case rgba = 11

    /// For packed RGB formats: bytes per pixel and the byte offsets of red, green and blue within
    /// a pixel; nil for YUV formats.
    public var packedRGBLayout: (bytesPerPixel: Int, r: Int, g: Int, b: Int)? {
        switch self {
        case .argb: (4, 2, 1, 0)
        case .bgra: (4, 1, 2, 3)
        case .rgb24: (3, 2, 1, 0)
        case .abgr: (4, 0, 1, 2)
        case .rgba: (4, 3, 2, 1)
        case .i420, .nv12, .nv21, .yuy2, .uyvy, .mjpeg: nil
        }
    }

    /// How many planes a frame of this format carries.
    public var planeCount: Int {
        switch self {
        case .i420: 3
        case .nv12, .nv21: 2
        case .yuy2, .uyvy, .argb, .bgra, .rgb24, .abgr, .rgba, .mjpeg: 1
        }
    }

    /// The minimum stride (bytes per row) and row count of each plane for a picture size. MJPEG has one row whose
    /// "stride" is the JPEG's length (at least the 4 bytes of its start and end markers).
    public func planeGeometry(width: Int, height: Int) -> [(minStride: Int, rows: Int)] {
        let c = VideoFrame.chromaSize(width: width, height: height)
        switch self {
        case .i420: return [(width, height), (c.width, c.height), (c.width, c.height)]
        case .nv12, .nv21: return [(width, height), (c.width * 2, c.height)]
        case .yuy2, .uyvy: return [(c.width * 4, height)]
        case .rgb24: return [(width * 3, height)]
        case .argb, .bgra, .abgr, .rgba: return [(width * 4, height)]
        case .mjpeg: return [(4, 1)]
        }
    }

    public var description: String {
        switch self {
        case .i420: "I420"
        case .nv12: "NV12"
        case .nv21: "NV21"
        case .yuy2: "YUY2"
        case .uyvy: "UYVY"
        case .argb: "ARGB"
        case .bgra: "BGRA"
        case .rgb24: "RGB24"
        case .abgr: "ABGR"
        case .rgba: "RGBA"
        case .mjpeg: "MJPEG"
        }
    }
}

/// What a capturer produces: size, format and frame rate (OpenTok's capture settings).
public struct VideoCaptureSettings: Sendable, Equatable {
    public var format: PixelFormat
    public var width: Int
    public var height: Int
    public var fps: Int
    /// The capturer's own delay from exposure to delivery, in milliseconds (informational).
    public var expectedDelayMillis: Int

    public init(format: PixelFormat = .i420, width: Int = 640, height: Int = 480, fps: Int = 30,
                expectedDelayMillis: Int = 0) {
        self.format = format; self.width = width; self.height = height; self.fps = fps
        self.expectedDelayMillis = expectedDelayMillis
    }

    /// Throws `invalidParameter` unless the size and rate are positive and plausible.
    public func validate() throws {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw OTError(.invalidParameter, "capture size \(width)x\(height) is out of range 1...8192")
        }
        guard fps > 0, fps <= 240 else {
            throw OTError(.invalidParameter, "capture rate \(fps) fps is out of range 1...240")
        }
    }
}

/// One picture as a capturer hands it over, in any `PixelFormat`, before conversion to I420.
public struct CapturedFrame: Sendable {
    public var format: PixelFormat
    public var width: Int
    public var height: Int
    /// The planes in format order (I420: Y, U, V; NV12/NV21: Y, UV; packed formats: one plane).
    public var planes: [[UInt8]]
    /// Bytes per row of each plane.
    public var strides: [Int]
    /// Capture time in microseconds (the capturer's clock).
    public var timestampMicros: Int64
    public var rotation: VideoRotation

    public init(format: PixelFormat, width: Int, height: Int, planes: [[UInt8]], strides: [Int],
                timestampMicros: Int64, rotation: VideoRotation = .r0) {
        self.format = format; self.width = width; self.height = height
        self.planes = planes; self.strides = strides
        self.timestampMicros = timestampMicros; self.rotation = rotation
    }

    /// A carrier for an I420 frame (no copy of the planes: arrays are copy-on-write).
    public init(_ frame: VideoFrame) {
        self.init(format: .i420, width: frame.width, height: frame.height,
                  planes: [frame.y, frame.u, frame.v], strides: [frame.strideY, frame.strideU, frame.strideV],
                  timestampMicros: frame.timestampMicros, rotation: frame.rotation)
    }

    /// Throws `invalidParameter` when the size is not positive or a plane is missing or too small
    /// for its stride and row count. Frames from user code must pass this before they are read.
    public func validate() throws {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw OTError(.invalidParameter, "frame size \(width)x\(height) is out of range 1...8192")
        }
        let geometry = format.planeGeometry(width: width, height: height)
        guard planes.count == geometry.count, strides.count == geometry.count else {
            throw OTError(.invalidParameter, "\(format) needs \(geometry.count) planes and strides, got \(planes.count) and \(strides.count)")
        }
        for (i, g) in geometry.enumerated() {
            guard strides[i] >= g.minStride else {
                throw OTError(.invalidParameter, "\(format) plane \(i) stride \(strides[i]) is below \(g.minStride)")
            }
            let needed = format == .mjpeg ? strides[i]
                : VideoFrame.planeSpan(stride: strides[i], rowBytes: g.minStride, rows: g.rows) ?? Int.max
            guard planes[i].count >= needed else {
                throw OTError(.invalidParameter, "\(format) plane \(i) holds \(planes[i].count) bytes, needs \(needed)")
            }
        }
    }
}

/// Turns a captured frame of any supported format into I420. The format converters satisfy this;
/// `I420Passthrough` accepts I420 only.
public protocol FrameConverter: Sendable {
    /// The I420 picture for `frame`, which has passed `CapturedFrame.validate()`.
    /// Throws `invalidParameter` for a format the converter does not handle.
    func convertToI420(_ frame: CapturedFrame) throws -> VideoFrame
}

/// A converter that accepts frames already in I420 and refuses every other format.
public struct I420Passthrough: FrameConverter {
    public init() {}
    public func convertToI420(_ frame: CapturedFrame) throws -> VideoFrame {
        guard frame.format == .i420 else {
            throw OTError(.invalidParameter, "no converter for \(frame.format) frames")
        }
        return VideoFrame(width: frame.width, height: frame.height, y: frame.planes[0], u: frame.planes[1],
                          v: frame.planes[2], strideY: frame.strides[0], strideU: frame.strides[1],
                          strideV: frame.strides[2], timestampMicros: frame.timestampMicros,
                          rotation: frame.rotation)
    }
}

/// Where a capturer pushes its frames. Safe to call from any thread.
public protocol VideoFrameConsumer: AnyObject, Sendable {
    /// Takes one captured frame. Returns false when the frame was refused (invalid or unconvertible).
    @discardableResult
    func consumeFrame(_ frame: CapturedFrame) -> Bool
}

/// A source of video (OpenTok's custom video capturer): the library calls `initCapture` once
/// with the consumer, then `startCapture`/`stopCapture` as publishing starts and stops,
/// and `releaseCapture` when the publisher goes away. While started, the capturer pushes
/// frames into the consumer from any thread.
public protocol VideoCapturer: AnyObject, Sendable {
    /// What the capturer will deliver; read before `startCapture`.
    var captureSettings: VideoCaptureSettings { get }
    /// Remembers the consumer frames go to.
    func initCapture(consumer: any VideoFrameConsumer) throws
    /// Begins delivering frames.
    func startCapture() throws
    /// Stops delivering frames; after it returns no new frame is pushed.
    func stopCapture()
    /// Forgets the consumer and frees resources.
    func releaseCapture()
    /// True between `startCapture` and `stopCapture`.
    var isCapturing: Bool { get }
}

/// The consumer end a publisher gives its capturer: validates frames from user code, converts
/// them to I420 and hands them to `handler`, counting what it refused.
public final class CaptureSink: VideoFrameConsumer {
    private struct State {
        var handler: (@Sendable (VideoFrame) -> Void)?
        var accepted: Int = 0
        var refused: Int = 0
        var lastError: OTError?
    }
    private let converter: any FrameConverter
    private let state: Mutex<State>

    /// `handler` receives every accepted frame, on the thread that pushed it.
    public init(converter: any FrameConverter = I420Passthrough(), handler: @escaping @Sendable (VideoFrame) -> Void) {
        self.converter = converter
        self.state = Mutex(State(handler: handler))
    }

    /// Drops the handler: later frames are refused. Used when the publisher is torn down.
    public func detach() { state.withLock { $0.handler = nil } }

    /// Frames accepted and refused so far, and why the last refusal happened.
    public var counts: (accepted: Int, refused: Int, lastError: OTError?) {
        state.withLock { ($0.accepted, $0.refused, $0.lastError) }
    }

    @discardableResult
    public func consumeFrame(_ frame: CapturedFrame) -> Bool {
        guard let handler = state.withLock({ $0.handler }) else { return false }
        do {
            try frame.validate()
            let i420 = try converter.convertToI420(frame)
            state.withLock { $0.accepted += 1 }
            handler(i420)
            return true
        } catch {
            let e = error as? OTError ?? OTError(.invalidParameter, "\(error)")
            let first = state.withLock { s -> Bool in
                s.refused += 1; defer { s.lastError = e }; return s.lastError != e
            }
            if first { Log.warn("capture", "refused a frame: \(e)") }
            return false
        }
    }
}

/// A capturer that renders frames on a timer thread at the settings' frame rate, calling
/// `render(frameIndex, timestampMicros)` for each; the built-in synthetic sources use it.
/// Timestamps come from `clock` (the monotonic clock by default).
public final class TimedVideoCapturer: VideoCapturer {
    public typealias Render = @Sendable (_ frameIndex: Int64, _ timestampMicros: Int64) -> CapturedFrame?

    private struct State {
        var consumer: (any VideoFrameConsumer)?
        var timer: (any DispatchSourceTimer)?
        var frameIndex: Int64 = 0
        var generation: UInt64 = 0
    }
    public let captureSettings: VideoCaptureSettings
    private let render: Render
    private let clock: any TimeSource
    private let queue = DispatchQueue(label: "ot.capture.timer")
    private let onQueue = DispatchSpecificKey<Bool>()
    private let state = Mutex(State())

    public init(settings: VideoCaptureSettings, clock: any TimeSource = MonotonicClock(), render: @escaping Render) {
        self.captureSettings = settings
        self.clock = clock
        self.render = render
        queue.setSpecific(key: onQueue, value: true)
    }

    public func initCapture(consumer: any VideoFrameConsumer) throws {
        try captureSettings.validate()
        state.withLock { $0.consumer = consumer }
    }

    public var isCapturing: Bool { state.withLock { $0.timer != nil } }

    public func startCapture() throws {
        let interval = DispatchTimeInterval.microseconds(1_000_000 / captureSettings.fps)
        let outcome = state.withLock { s -> Bool? in
            guard s.consumer != nil else { return nil }
            guard s.timer == nil else { return false }
            s.generation += 1
            let generation = s.generation
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: interval, leeway: .milliseconds(1))
            timer.setEventHandler { [weak self] in self?.tick(generation) }
            timer.resume()
            s.timer = timer
            return true
        }
        guard outcome != nil else { throw OTError(.illegalState, "startCapture before initCapture") }
    }

    private func tick(_ generation: UInt64) {
        // A tick that raced with stopCapture (its timer no longer current) delivers nothing.
        let next = state.withLock { s -> (any VideoFrameConsumer, Int64)? in
            guard let c = s.consumer, s.timer != nil, s.generation == generation else { return nil }
            defer { s.frameIndex += 1 }
            return (c, s.frameIndex)
        }
        guard let (consumer, index) = next else { return }
        if let frame = render(index, clock.now().micros) { consumer.consumeFrame(frame) }
    }

    public func stopCapture() {
        guard let timer = state.withLock({ s -> (any DispatchSourceTimer)? in
            defer { s.timer = nil }; return s.timer
        }) else { return }
        timer.cancel()
        // Ticks run on `queue`: once this returns, a tick in flight has finished
        // (unless stop is called from a tick itself, which then is the last one).
        if DispatchQueue.getSpecific(key: onQueue) == nil { queue.sync {} }
    }

    public func releaseCapture() {
        stopCapture()
        state.withLock { $0.consumer = nil }
    }

    deinit { state.withLock { $0.timer }?.cancel() }
}

/// A capturer whose life cycle is driven by callbacks and whose frames are pushed with
/// `provideFrame` from any thread: the shape of the C API's custom capturer
/// (`otc_video_capturer_callbacks` + `otc_video_capturer_provide_frame`).
public final class CallbackVideoCapturer: VideoCapturer {
    /// The user's callbacks; each returns false to refuse (start refusals throw).
    public struct Callbacks: Sendable {
        public var initCapture: @Sendable () -> Bool
        public var releaseCapture: @Sendable () -> Bool
        public var startCapture: @Sendable () -> Bool
        public var stopCapture: @Sendable () -> Bool
        public init(initCapture: @escaping @Sendable () -> Bool = { true },
                    releaseCapture: @escaping @Sendable () -> Bool = { true },
                    startCapture: @escaping @Sendable () -> Bool = { true },
                    stopCapture: @escaping @Sendable () -> Bool = { true }) {
            self.initCapture = initCapture; self.releaseCapture = releaseCapture
            self.startCapture = startCapture; self.stopCapture = stopCapture
        }
    }

    private struct State {
        var consumer: (any VideoFrameConsumer)?
        var capturing = false
    }
    public let captureSettings: VideoCaptureSettings
    private let callbacks: Callbacks
    private let state = Mutex(State())

    /// Throws `invalidParameter` for implausible settings.
    public init(settings: VideoCaptureSettings, callbacks: Callbacks = Callbacks()) throws {
        try settings.validate()
        self.captureSettings = settings
        self.callbacks = callbacks
    }

    public func initCapture(consumer: any VideoFrameConsumer) throws {
        guard callbacks.initCapture() else { throw OTError(.internalError, "the capturer refused to initialize") }
        state.withLock { $0.consumer = consumer }
    }

    public var isCapturing: Bool { state.withLock { $0.capturing } }

    public func startCapture() throws {
        guard state.withLock({ $0.consumer != nil }) else { throw OTError(.illegalState, "startCapture before initCapture") }
        guard !isCapturing else { return }
        guard callbacks.startCapture() else { throw OTError(.internalError, "the capturer refused to start") }
        state.withLock { $0.capturing = true }
    }

    public func stopCapture() {
        guard state.withLock({ s in defer { s.capturing = false }; return s.capturing }) else { return }
        _ = callbacks.stopCapture()
    }

    public func releaseCapture() {
        stopCapture()
        guard state.withLock({ s in defer { s.consumer = nil }; return s.consumer != nil }) else { return }
        _ = callbacks.releaseCapture()
    }

    /// Pushes a frame (any thread). Returns false when not capturing or the consumer refused it.
    @discardableResult
    public func provideFrame(_ frame: CapturedFrame) -> Bool {
        guard let consumer = state.withLock({ $0.capturing ? $0.consumer : nil }) else { return false }
        return consumer.consumeFrame(frame)
    }
}
