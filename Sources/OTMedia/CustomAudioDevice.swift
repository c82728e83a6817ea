import OTBase
import Synchronization

/// An audio device driven by user code (OpenTok's custom audio device): the library tells it to
/// start and stop through `callbacks`; the user's own thread moves samples with
/// `writeCaptureData` and `readRenderData`, as `otc_audio_device_write_capture_data` /
/// `otc_audio_device_read_render_data` do.
public final class CustomAudioDevice: AudioDevice {
    /// What the library asks of the user's device. Each returns false to refuse.
    public struct Callbacks: Sendable {
        public var startCapture: @Sendable () -> Bool
        public var stopCapture: @Sendable () -> Bool
        public var startRender: @Sendable () -> Bool
        public var stopRender: @Sendable () -> Bool
        public init(startCapture: @escaping @Sendable () -> Bool = { true },
                    stopCapture: @escaping @Sendable () -> Bool = { true },
                    startRender: @escaping @Sendable () -> Bool = { true },
                    stopRender: @escaping @Sendable () -> Bool = { true }) {
            self.startCapture = startCapture; self.stopCapture = stopCapture
            self.startRender = startRender; self.stopRender = stopRender
        }
    }

    public let captureSettings: AudioDeviceSettings
    public let renderSettings: AudioDeviceSettings
    private let callbacks: Callbacks
    private struct State {
        var sink: (any AudioCaptureSink)?
        var source: (any AudioRenderSource)?
        var capturing = false
        var rendering = false
    }
    private let state = Mutex(State())

    /// Throws `invalidParameter` for unsupported settings.
    public init(captureSettings: AudioDeviceSettings, renderSettings: AudioDeviceSettings,
                callbacks: Callbacks = Callbacks()) throws {
        try captureSettings.validate()
        try renderSettings.validate()
        self.captureSettings = captureSettings; self.renderSettings = renderSettings; self.callbacks = callbacks
    }

    public func setCaptureSink(_ sink: (any AudioCaptureSink)?) { state.withLock { $0.sink = sink } }
    public func setRenderSource(_ source: (any AudioRenderSource)?) { state.withLock { $0.source = source } }
    public var isCapturing: Bool { state.withLock { $0.capturing } }
    public var isRendering: Bool { state.withLock { $0.rendering } }

    public func startCapture() throws {
        guard !isCapturing else { return }
        guard callbacks.startCapture() else { throw OTError(.internalError, "the audio device refused to start capturing") }
        state.withLock { $0.capturing = true }
    }
    public func stopCapture() {
        guard state.withLock({ s in defer { s.capturing = false }; return s.capturing }) else { return }
        _ = callbacks.stopCapture()
    }
    public func startRender() throws {
        guard !isRendering else { return }
        guard callbacks.startRender() else { throw OTError(.internalError, "the audio device refused to start rendering") }
        state.withLock { $0.rendering = true }
    }
    public func stopRender() {
        guard state.withLock({ s in defer { s.rendering = false }; return s.rendering }) else { return }
        _ = callbacks.stopRender()
    }

    /// Hands captured interleaved samples to the library. Returns how many were taken:
    /// all of them while capturing with a sink attached, otherwise 0. The sink runs under the
    /// device's lock (so nothing is delivered after `stopCapture` returns) and must not call back
    /// into the device.
    @discardableResult
    public func writeCaptureData(_ samples: UnsafeBufferPointer<Int16>) -> Int {
        state.withLock { s in
            guard s.capturing, let sink = s.sink else { return 0 }
            sink.audioCaptured(samples, settings: captureSettings)
            return samples.count
        }
    }

    /// Fills `buffer` with interleaved samples to play. Returns how many are real audio; the rest of
    /// the buffer is silence (all of it when not rendering or with no source attached).
    public func readRenderData(into buffer: UnsafeMutableBufferPointer<Int16>) -> Int {
        buffer.update(repeating: 0)
        return state.withLock { s in
            guard s.rendering, let source = s.source else { return 0 }
            return min(source.renderAudio(into: buffer, settings: renderSettings), buffer.count)
        }
    }
}
