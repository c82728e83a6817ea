// ot-swift-sample URL API_KEY SESSION_ID TOKEN [SECONDS]
// Joins a session, publishes a test pattern with a tone (its own capturer and audio device), subscribes to the first
// stream of another client, and prints what happens; with no arguments it only prints how to use it. Only `import
// OTSession` is needed: frames, audio, devices, capturers, transforms, errors and signaling types come with it.
import Dispatch
import Glibc
import OTSession

/// A frame transform of the app's own (it changes nothing here).
struct CountingTransform: FrameTransform {
    var isIdentity: Bool { false }
    func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        output.append(contentsOf: frame)
    }
    func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        output.append(contentsOf: frame)
    }
}

/// An audio device of the app's own: captures a tone through a `HeadlessAudioDevice` and discards playout.
final class AppAudioDevice: AudioDevice, @unchecked Sendable {
    let inner: HeadlessAudioDevice
    init() throws { inner = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.3)) }
    var captureSettings: AudioDeviceSettings { inner.captureSettings }
    var renderSettings: AudioDeviceSettings { inner.renderSettings }
    func setCaptureSink(_ sink: (any AudioCaptureSink)?) { inner.setCaptureSink(sink) }
    func setRenderSource(_ source: (any AudioRenderSource)?) { inner.setRenderSource(source) }
    func startCapture() throws { try inner.startCapture() }
    func stopCapture() { inner.stopCapture() }
    func startRender() throws { try inner.startRender() }
    func stopRender() { inner.stopRender() }
    var isCapturing: Bool { inner.isCapturing }
    var isRendering: Bool { inner.isRendering }
}

final class App: SessionDelegate, PublisherDelegate, SubscriberDelegate, @unchecked Sendable {
    var session: Session!
    var publisher: Publisher!
    var subscriber: Subscriber?
    var frames = 0

    func sessionDidConnect(_ session: Session) {
        print("connected as \(session.connection?.id ?? "?"); relayed: \(session.isRelayed)")
        do { try session.publish(publisher) } catch let e as OTError { print("publish: \(e.code) \(e)") } catch {}
    }
    func session(_ session: Session, statusChanged status: SessionStatus) { print("status \(status)") }
    func session(_ session: Session, streamCreated stream: StreamInfo) {
        guard subscriber == nil, !session.isOwn(stream) else { return }
        let owner: ConnectionInfo = stream.connection
        print("stream \(stream.id) by \(owner.id) (\(owner.data))")
        let s = Subscriber(stream: stream, delegate: self, settings: SubscriberSettings(playAudio: false, frameTransform: IdentityFrameTransform()))
        subscriber = s
        try? session.subscribe(s)
    }
    func session(_ session: Session, stream: StreamInfo, didChange change: StreamPropertyChange) { print("\(stream.id): \(change)") }
    func session(_ session: Session, muteForced info: MuteForcedInfo) { print("mute forced: \(info.active) \(info.streamId ?? "all")") }
    func session(_ session: Session, didFailWithError error: OTError) { print("session error \(error.code.rawValue): \(error.message)") }
    func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) { print("publishing \(stream.id)") }
    func publisher(_ publisher: Publisher, statsUpdated stats: PublisherStats) {}
    func publisher(_ publisher: Publisher, muteForced active: Bool) { print("muted by a moderator") }
    func subscriberDidConnect(toStream subscriber: Subscriber) { print("receiving \(subscriber.stream.id)") }
    func subscriberDidDisconnect(fromStream subscriber: Subscriber) { print("interrupted") }
    func subscriberDidReconnect(toStream subscriber: Subscriber) { print("back") }
    func subscriber(_ subscriber: Subscriber, videoDisabledWithReason reason: SubscriberVideoEventReason) { print("video off: \(reason)") }
    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {
        frames += 1
        if let stamp: TestPatternStamp = TestPatternReader.read(frame), frames % 30 == 0 { print("frame \(stamp.frameNumber)") }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveEncodedVideoFrame frame: UnsafeRawBufferPointer, info: EncodedFrameInfo) {
        _ = info.kind == MediaKind.video
    }
    func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame) {}
    func subscriber(_ subscriber: Subscriber, statsUpdated stats: SubscriberStats) {}
}

let args = CommandLine.arguments
guard args.count >= 5 else {
    print("usage: ot-swift-sample URL API_KEY SESSION_ID TOKEN [SECONDS]")
    // Values of the API's types, made without a server.
    let settings = SessionSettings(apiQueue: DispatchQueue(label: "app"))
    let session = Session(apiKey: "1", sessionId: "s", delegate: nil)
    let capturer = try CallbackVideoCapturer(settings: VideoCaptureSettings(format: PixelFormat.i420, width: 32, height: 32, fps: 5))
    let publisher = try Publisher(delegate: nil, settings: PublisherSettings(videoSource: .capturer(capturer), audioDevice: try AppAudioDevice(),
                                                                            frameTransform: CountingTransform()))
    var client = SignalingClient(apiKey: "1", sessionId: "s")
    try client.connect(token: "t", now: MonotonicClock.now())
    let hello: [SignalingClient.Output] = client.transportOpened(now: Instant(micros: 0))
    if case .send(let m)? = hello.first, case ClientMessage.connect(let req) = m { _ = req as ConnectRequest }
    let late: ServerMessage = .publisherMedia(peerId: "p", state: PublisherMediaState.resumed)
    _ = (settings.serverURL, session.status, publisher.publishAudio, late.mediaPeerId, OTErrorCode.unableToForceDisconnect, LogLevel.info)
    exit(0)
}
Log.level = .warn
let app = App()
let session = Session(apiKey: args[2], sessionId: args[3], delegate: app, settings: SessionSettings(serverURL: args[1]))
app.session = session
app.publisher = try Publisher(delegate: app, settings: PublisherSettings(name: "swift-sample", audioDevice: try AppAudioDevice(),
                                                                          width: 320, height: 240, fps: 15))
try session.connect(token: args[4])
let seconds = args.count > 5 ? Double(args[5]) ?? 10 : 10
DispatchQueue.main.asyncAfter(deadline: .now() + seconds) {
    print("frames received: \(app.frames)")
    try? session.disconnect()
    exit(0)
}
dispatchMain()
