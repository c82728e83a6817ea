import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTWire

/// One end of a peer connection that takes media signaling from the server (a subscriber's connection,
/// or one of the publisher's). Called on the session's executor.
protocol MediaSignalingPeer: AnyObject, Sendable {
    func mediaSignal(_ message: ServerMessage)
}

/// The session's publisher or a subscriber, as the session's executor sees it: session events (streams gone or
/// changed, mute, disconnect) and its control machine's deadline and tick. Every call is on the executor.
protocol SessionMediaClient: AnyObject, Sendable {
    func sessionEvent(_ event: SessionEvent, session: Session)
    /// The control machine's next deadline, if any.
    var controlDeadline: Instant? { get }
    /// The executor's timer fired: act on deadlines that passed.
    func controlTick(now: Instant, session: Session)
}

/// A session's media signaling switchboard: routes `mediaOffer`/`mediaAnswer`/… by peer id, and session
/// events to the publisher and subscribers. Messages are handled in order on the session's executor, never
/// under the session's lock.
final class SessionMedia: @unchecked Sendable {
    let queue: DispatchQueue
    /// `queue`: the session's executor (a queue of its own in tests).
    init(queue: DispatchQueue = DispatchQueue(label: "otsession.media-signaling")) { self.queue = queue }
    private let lock = Lock()
    /// Peer connections we offered (subscribers, the publisher's link to the router) and those we answered
    /// (a relayed publisher's links to subscribers). One client subscribing to its own relayed stream holds
    /// both ends of one peer id.
    private var offerers: [String: any MediaSignalingPeer] = [:]
    private var answerers: [String: any MediaSignalingPeer] = [:]
    private var offerHandler: (@Sendable (ServerMessage) -> Void)?
    private var clients: [ObjectIdentifier: any SessionMediaClient] = [:]
    private var clientOrder: [ObjectIdentifier] = []
    /// This client's published streams, by id.
    private var own: [String: StreamInfo] = [:]
    /// Candidates for offers handed to the publisher that it has not answered yet (it answers on its own queue):
    /// delivered when it registers the answering end, so trickled candidates are not lost.
    private var awaitingAnswerer: [String: [ServerMessage]] = [:]

    /// Registers one end of a peer connection: `answering` for the side that answered a forwarded offer.
    func register(peerId: String, _ peer: any MediaSignalingPeer, answering: Bool = false) {
        let early = lock.withLock { () -> [ServerMessage] in
            if answering { answerers[peerId] = peer } else { offerers[peerId] = peer }
            return answering ? awaitingAnswerer.removeValue(forKey: peerId) ?? [] : []
        }
        for m in early { peer.mediaSignal(m) }
    }
    func unregister(peerId: String, answering: Bool = false) {
        lock.withLock { _ = answering ? answerers.removeValue(forKey: peerId) : offerers.removeValue(forKey: peerId) }
    }
    func setOfferHandler(_ h: (@Sendable (ServerMessage) -> Void)?) { lock.withLock { offerHandler = h } }
    func attach(_ c: any SessionMediaClient) {
        lock.withLock {
            let key = ObjectIdentifier(c)
            if clients.updateValue(c, forKey: key) == nil { clientOrder.append(key) }
        }
    }
    func detach(_ c: any SessionMediaClient) {
        lock.withLock {
            let key = ObjectIdentifier(c)
            if clients.removeValue(forKey: key) != nil { clientOrder.removeAll { $0 == key } }
        }
    }
    /// Records this client's published stream as it now is (nil `stream`: unpublished).
    func setOwnStream(_ id: String, _ stream: StreamInfo?) { lock.withLock { own[id] = stream } }
    func isOwnStream(_ id: String) -> Bool { lock.withLock { own[id] != nil } }
    var ownStreams: [String: StreamInfo] { lock.withLock { own } }
    func isAttached(_ c: any SessionMediaClient) -> Bool { lock.withLock { clients[ObjectIdentifier(c)] != nil } }

    private var publisher: Publisher?

    /// Claims the session's one publisher slot (1500 when taken).
    func setPublisher(_ p: Publisher) throws {
        try lock.withLock {
            guard publisher == nil else {
                throw OTError(.unableToPublish, publisher === p ? "this publisher is already published" : "a session has one publisher: unpublish it first")
            }
            publisher = p
        }
        attach(p)
    }
    func clearPublisher(_ p: Publisher) {
        lock.withLock { if publisher === p { publisher = nil } }
        detach(p)
    }
    func isPublisher(_ p: Publisher) -> Bool { lock.withLock { publisher === p } }

    // MARK: playout

    private var _audioDevice: (any AudioDevice)?
    /// The playout device's failure reports, when it makes them.
    private var audioDeviceObservation: DeviceObservation?
    private var renderUsers = 0
    /// Mixes every subscriber's audio for the audio device's render side.
    let mixer = AudioMixer()

    /// The device subscribers' audio plays on (a `HeadlessAudioDevice` that discards, unless set).
    var audioDevice: any AudioDevice {
        get {
            lock.withLock {
                if let d = _audioDevice { return d }
                // The default settings are valid, so this cannot fail; a device that plays nothing stands in if it ever did.
                let d: any AudioDevice = (try? HeadlessAudioDevice()) ?? NullAudioDevice()
                _audioDevice = d
                return d
            }
        }
    }

    /// Sets the playout device, whose failures go to `onError`; refused (1015) while subscribers play on the current one.
    func setAudioDevice(_ d: any AudioDevice, onError: @escaping @Sendable (DeviceError) -> Void) throws {
        try lock.withLock {
            guard renderUsers == 0 else { throw OTError(.illegalState, "the audio device cannot change while subscribers play audio") }
            _audioDevice = d
            audioDeviceObservation = (d as? any DeviceErrorReporting)?.observeErrors(onError)
        }
    }

    /// A subscriber starts playing: its PCM goes into the mixer; the device renders while anyone plays.
    func addPlayout(_ input: any AudioMixerInput, id: Int) {
        let d = audioDevice
        mixer.setInput(input, id: id)
        let first = lock.withLock { renderUsers += 1; return renderUsers == 1 }
        if first {
            d.setRenderSource(mixer)
            do { try d.startRender() } catch { Log.warn("media", "audio device render did not start: \(error)") }
        }
    }

    func removePlayout(id: Int) {
        let d = audioDevice
        mixer.removeInput(id: id)
        let last = lock.withLock { renderUsers -= 1; return renderUsers == 0 }
        if last {
            d.stopRender()
            d.setRenderSource(nil)
        }
    }

    /// A media message from the server (called under the session's lock: only queues work).
    func received(_ m: ServerMessage) {
        queue.async { [self] in
            switch m {
            case .mediaOffer(let peerId, _, _, _, _):
                let h = lock.withLock { () -> (@Sendable (ServerMessage) -> Void)? in
                    if offerHandler != nil, answerers[peerId] == nil, awaitingAnswerer.count < 256 { awaitingAnswerer[peerId] = [] }
                    return offerHandler
                }
                h?(m)
            case .mediaAnswer(let peerId, _), .mediaQuality(let peerId, _), .publisherMedia(let peerId, _):
                lock.withLock { offerers[peerId] }?.mediaSignal(m)
            case .subscriberSettings(let peerId, _, _):
                lock.withLock { answerers[peerId] }?.mediaSignal(m)
            case .mediaCandidate(let peerId, _, _, _), .mediaClose(let peerId, _, _):
                // Either end; both when this client holds both (its own relayed stream).
                let (o, a) = lock.withLock { () -> ((any MediaSignalingPeer)?, (any MediaSignalingPeer)?) in
                    if case .mediaClose = m { awaitingAnswerer[peerId] = nil }
                    if answerers[peerId] == nil, case .mediaCandidate = m, let q = awaitingAnswerer[peerId], q.count < 64 {
                        awaitingAnswerer[peerId] = q + [m]
                    }
                    return (offerers[peerId], answerers[peerId])
                }
                o?.mediaSignal(m)
                a?.mediaSignal(m)
            default:
                break
            }
        }
    }

    /// A session event, on the executor.
    func sessionEvent(_ e: SessionEvent, session: Session, to included: (any SessionMediaClient) -> Bool = { _ in true }) {
        for c in attachedClients() where included(c) { c.sessionEvent(e, session: session) }
    }

    /// The earliest control deadline of the publisher and subscribers (executor).
    func controlDeadline() -> Instant? { attachedClients().compactMap(\.controlDeadline).min() }

    /// The executor's timer fired (executor).
    func controlTick(now: Instant, session: Session) {
        for c in attachedClients() { c.controlTick(now: now, session: session) }
    }

    /// The publisher and subscribers, in a stable order (by when they were attached).
    private func attachedClients() -> [any SessionMediaClient] {
        lock.withLock { clientOrder.compactMap { clients[$0] } }
    }
}

/// Stands in when no device can be made: renders and captures nothing.
private final class NullAudioDevice: AudioDevice, @unchecked Sendable {
    let captureSettings = AudioDeviceSettings()
    let renderSettings = AudioDeviceSettings()
    func setCaptureSink(_ sink: (any AudioCaptureSink)?) {}
    func setRenderSource(_ source: (any AudioRenderSource)?) {}
    func startCapture() throws {}
    func stopCapture() {}
    func startRender() throws {}
    func stopRender() {}
    var isCapturing: Bool { false }
    var isRendering: Bool { false }
}
