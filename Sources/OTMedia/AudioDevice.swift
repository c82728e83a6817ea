import OTBase

/// An audio device (OpenTok's audio device): captures int16 PCM into a sink, plays int16 PCM it
/// reads from a source. The library attaches the sink and source, then starts and stops each
/// direction as publishers and subscribers come and go.
public protocol AudioDevice: AnyObject, Sendable {
    var captureSettings: AudioDeviceSettings { get }
    var renderSettings: AudioDeviceSettings { get }
    /// Sets (or clears) where captured audio goes.
    func setCaptureSink(_ sink: (any AudioCaptureSink)?)
    /// Sets (or clears) where played audio comes from.
    func setRenderSource(_ source: (any AudioRenderSource)?)
    func startCapture() throws
    func stopCapture()
    func startRender() throws
    func stopRender()
    var isCapturing: Bool { get }
    var isRendering: Bool { get }
}
