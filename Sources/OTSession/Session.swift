import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTTransport
import OTWire

/// Settings of a `Session` (as OTSessionSettings).
public struct SessionSettings: Sendable {
    /// The session server: `ws://` or `wss://` `host:port[/path]`, or `http://` / `https://` `host:port` (path
    /// `/v2/signaling`). The host may be a name (resolved off the IO thread, again on every reconnection). With TLS
    /// the server's certificate is verified against the system store or `tlsCAFile`, and its host name checked.
    public var serverURL: String
    /// No connection created/destroyed events for other clients.
    public var connectionEventsSuppressed: Bool
    /// ICE for media: custom STUN/TURN servers, relay-only policy, LAN candidate filter (OTSessionSettings.iceConfig).
    public var iceConfig: SessionICEConfig
    /// How long connecting may take before failing with 1021.
    public var connectTimeout: Duration
    /// WebSocket keepalive interval.
    public var pingInterval: Duration
    /// The queue the delegate messages of the session, its publisher and its subscribers run on, in one order (as
    /// OTSession's `apiQueue`), e.g. `.main`; a concurrent queue is used serially. Nil: a serial queue of the session's
    /// own. Frames and audio still come on each subscriber's media thread.
    public var apiQueue: DispatchQueue?
    /// A PEM file of the CA certificates to trust for `wss://`/`https://` servers and `turns:` TURN servers, instead
    /// of the system store (nil). A certificate they do not vouch for fails connecting with 9200.
    public var tlsCAFile: String?
    /// An HTTP proxy (`http://[user:password@]host:port`, as OTSessionSettings' proxyURL): signaling and TURN over
    /// TCP or TLS go through its CONNECT tunnels. Nil: direct.
    public var proxyURL: String?

    /// The server URL's default is the embedded server's (`ws://127.0.0.1:8080`), as the C ABI's.
    public init(serverURL: String = SessionSettings.defaultServerURL, connectionEventsSuppressed: Bool = false,
                iceConfig: SessionICEConfig = SessionICEConfig(), connectTimeout: Duration = .seconds(15),
                pingInterval: Duration = .seconds(10), apiQueue: DispatchQueue? = nil, tlsCAFile: String? = nil, proxyURL: String? = nil) {
        self.serverURL = serverURL; self.connectionEventsSuppressed = connectionEventsSuppressed; self.iceConfig = iceConfig
        self.connectTimeout = connectTimeout; self.pingInterval = pingInterval; self.apiQueue = apiQueue
        self.tlsCAFile = tlsCAFile; self.proxyURL = proxyURL
    }

    /// Checks the URLs (server, proxy) and the times (`connectTimeout` 1 to 86400000 ms, `pingInterval` 100 to
    /// 3600000 ms); throws `.invalidParameter` naming what is wrong. `Session.connect` calls it, and so does the C ABI,
    /// which passes `name` to give its own member names in the message.
    public func validate(naming name: (String) -> String = { $0 }) throws {
        _ = try ServerEndpoint.parse(serverURL)
        if let p = proxyURL { _ = try ProxyEndpoint.parse(p) }
        try SettingsRange.milliseconds(connectTimeout, 1...86_400_000, name("connectTimeout"))
        try SettingsRange.milliseconds(pingInterval, 100...3_600_000, name("pingInterval"))
    }

    /// How signaling and TURN over TCP/TLS reach their servers: the TLS trust (nil: the system store) and the
    /// proxy. Reads the CA file (throws `.invalidParameter` when it cannot).
    func makeTransport() throws -> WebSocketTransport {
        WebSocketTransport(tls: try tlsCAFile.map { try TLSClientContext(caFile: $0) }, proxy: try proxyURL.map { try ProxyEndpoint.parse($0) })
    }

    public static let defaultServerURL = "ws://127.0.0.1:8080"
}

/// Messages a `Session` sends to its delegate, on the session's `apiQueue`, in order with its publisher's and
/// subscribers' messages. Every method has an empty default.
public protocol SessionDelegate: AnyObject {
    func sessionDidConnect(_ session: Session)
    func sessionDidDisconnect(_ session: Session)
    /// Connecting failed (status `.failed`), or a connected session dropped (then `sessionDidDisconnect` follows).
    func session(_ session: Session, didFailWithError error: OTError)
    func session(_ session: Session, connectionCreated connection: ConnectionInfo)
    func session(_ session: Session, connectionDestroyed connection: ConnectionInfo)
    func session(_ session: Session, streamCreated stream: StreamInfo)
    func session(_ session: Session, streamDestroyed stream: StreamInfo)
    func session(_ session: Session, stream: StreamInfo, didChange change: StreamPropertyChange)
    /// A signal; `connection` is nil when the server (REST API) sent it.
    func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String)
    /// A moderator muted one stream (`info.streamId`), all streams but `info.excludedStreamIds` (no stream id), or
    /// ended a mute all (`active` false). The publishers concerned stop sending audio and get `publisher(_:muteForced:)`.
    func session(_ session: Session, muteForced info: MuteForcedInfo)
    /// `status` changed (as a key-value observer of `sessionConnectionStatus`); comes before the messages of the change.
    func session(_ session: Session, statusChanged status: SessionStatus)
    /// The signaling connection dropped and the session is resuming it (as `sessionDidBeginReconnecting:`). The status
    /// stays `.connected` and `isReconnecting` is true; `sessionDidReconnect` or (1022 then) `sessionDidDisconnect` follows.
    func sessionDidBeginReconnecting(_ session: Session)
    /// The connection was resumed with the same connection id (as `sessionDidReconnect:`). Streams and connections
    /// that came or went meanwhile are reported next as created/destroyed messages; queued signals are sent.
    func sessionDidReconnect(_ session: Session)
    /// The playout device (`setAudioDevice`, a speaker) failed: it could not be opened or was lost. Playout goes on,
    /// discarded, on the headless device.
    func session(_ session: Session, deviceFailed error: DeviceError)
}

extension SessionDelegate {
    public func sessionDidConnect(_ session: Session) {}
    public func sessionDidDisconnect(_ session: Session) {}
    public func session(_ session: Session, didFailWithError error: OTError) {}
    public func session(_ session: Session, connectionCreated connection: ConnectionInfo) {}
    public func session(_ session: Session, connectionDestroyed connection: ConnectionInfo) {}
    public func session(_ session: Session, streamCreated stream: StreamInfo) {}
    public func session(_ session: Session, streamDestroyed stream: StreamInfo) {}
    public func session(_ session: Session, stream: StreamInfo, didChange change: StreamPropertyChange) {}
    public func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {}
    public func session(_ session: Session, muteForced info: MuteForcedInfo) {}
    public func session(_ session: Session, statusChanged status: SessionStatus) {}
    public func sessionDidBeginReconnecting(_ session: Session) {}
    public func sessionDidReconnect(_ session: Session) {}
    public func session(_ session: Session, deviceFailed error: DeviceError) {}
}

/// A client's connection to a session (modelled on OTSession). Thread-safe: call from any thread.
///
/// One executor per session (a serial queue) runs its control plane: the signaling machine's socket events and
/// deadlines, session events reaching the publisher and subscribers, and their control machines (`SubscriberControl`,
/// `PublisherLinkControl`), all under one timer armed at the earliest deadline. Delegate messages and completions of
/// the session, its publisher and subscribers go, in the order the executor produced them, to `apiQueue`.
public final class Session: @unchecked Sendable {
    public typealias Completion = @Sendable (OTError?) -> Void

    public let apiKey: String
    public let sessionId: String
    public let settings: SessionSettings
    /// The queue delegate messages and completions run on: `settings.apiQueue`, or the session's own serial queue.
    public let apiQueue: DispatchQueue
    /// Serial, on `apiQueue`: keeps the messages in order even on a concurrent `apiQueue`.
    private let delivery: DispatchQueue
    /// The control plane's serial queue (see the type's comment).
    let executor: DispatchQueue
    private let onExecutor = DispatchSpecificKey<Bool>()

    private let lock = Lock()
    private weak var _delegate: SessionDelegate?
    private var machine: SignalingClient
    private var socket: WebSocketClient?
    private var endpoint: ServerEndpoint?
    /// TLS trust and proxy, set up at `connect`.
    private var transport = WebSocketTransport()
    /// The session server's ICE servers (from the latest `connected`), and the addresses of the ICE servers' host
    /// names and of the proxy, resolved anew for each socket (at connect and on every reconnection).
    private var providedICE: [IceServer] = []
    private var iceAddresses: [String: [IPAddress]] = [:]
    private var iceFailures: [String] = []
    private var mediaProxy: StreamRoute.Proxy?
    /// Executor only: socket events held while those names are resolved, and the socket they were resolved for.
    private var held: [(WebSocketClient.Event, Int)]?
    private var resolvedGeneration = -1
    private var generation = 0
    private var completions: [Int: @Sendable (Result<RequestReply, OTError>) -> Void] = [:]
    /// The status last reported with `statusChanged` (lock held).
    private var reportedStatus = SessionStatus.notConnected
    /// The signaling machine's next deadline as last seen under the lock (the executor's timer reads it).
    private var signalingDeadline: Instant?
    /// Executor only: the one timer, armed at the earliest deadline of the signaling machine and the control
    /// machines, and the deadline it is armed for; cancelled when none is left, so a closed session leaves nothing
    /// pending on a queue.
    private var tickTimer: (any DispatchSourceTimer)?
    private var tickArmedFor: Instant?
    /// The media key derived from the encryption secret (`setEncryptionSecret`).
    private var encryptionKey: E2EEKey?
    /// The publisher, subscribers and their media signaling (SessionMedia.swift).
    let media: SessionMedia

    public init(apiKey: String, sessionId: String, delegate: SessionDelegate?, settings: SessionSettings = SessionSettings()) {
        self.apiKey = apiKey; self.sessionId = sessionId; self.settings = settings
        _delegate = delegate
        if let q = settings.apiQueue {
            apiQueue = q
            delivery = DispatchQueue(label: "otsession.session.delegate", target: q)
        } else {
            delivery = DispatchQueue(label: "otsession.session.delegate")
            apiQueue = delivery
        }
        executor = DispatchQueue(label: "otsession.session")
        media = SessionMedia(queue: executor)
        machine = SignalingClient(apiKey: apiKey, sessionId: sessionId, eventsSuppressed: settings.connectionEventsSuppressed,
                                  connectTimeout: settings.connectTimeout)
        executor.setSpecific(key: onExecutor, value: true)
    }

    /// A session released while connected leaves the session properly.
    deinit {
        if machine.status == .connected { socket?.send(SignalingCodec.encode(ClientMessage.disconnect)) }
        socket?.close()
        tickTimer?.cancel()
    }

    public var delegate: SessionDelegate? {
        get { lock.withLock { _delegate } }
        set { lock.withLock { _delegate = newValue } }
    }

    /// The connection status, readable at any time; `session(_:statusChanged:)` reports its changes.
    public var status: SessionStatus { lock.withLock { machine.status } }
    /// This client's connection, after `sessionDidConnect`.
    public var connection: ConnectionInfo? { lock.withLock { machine.status == .connected || machine.status == .disconnecting ? machine.connection : nil } }
    /// What the token's role allows, after `sessionDidConnect`.
    public var capabilities: SessionCapabilities? { lock.withLock { machine.status == .connected ? machine.capabilities : nil } }
    /// The session's streams by stream id (as OTSession's `streams`): other clients' and this client's own published
    /// stream (`isOwn` tells them apart).
    public var streams: [String: StreamInfo] {
        let others = lock.withLock { machine.streams }
        return others.merging(media.ownStreams) { a, _ in a }
    }
    /// Whether this client published `stream` (its connection is this session's).
    public func isOwn(_ stream: StreamInfo) -> Bool { connection.map { $0.id == stream.connectionId } ?? false }
    /// Other clients' connections, by connection id (empty when connection events are suppressed: a stream's
    /// `connection` still names its owner).
    public var connections: [String: ConnectionInfo] { lock.withLock { machine.connections } }
    /// Whether a force mute of the whole session is active.
    public var isMuteForced: Bool { lock.withLock { machine.muteAllActive } }
    /// Whether the session is relayed (media peer to peer) rather than routed, after `sessionDidConnect`.
    public var isRelayed: Bool { lock.withLock { machine.relayed } }
    /// Whether the session is end-to-end encrypted (created with `e2ee`), after `sessionDidConnect`.
    public var isEndToEndEncrypted: Bool { lock.withLock { machine.e2ee } }
    /// True between `sessionDidBeginReconnecting` and `sessionDidReconnect` (or the disconnect that ends a failed
    /// reconnection); the status stays `.connected` meanwhile, as in OpenTok.
    public var isReconnecting: Bool { lock.withLock { machine.isReconnecting } }

    /// Connects with a token. Throws 1015 when not disconnected, 1011 for an empty token, a bad server or proxy URL,
    /// times out of range (`SessionSettings.validate`) or an unreadable CA file; later failures come as `session(_:didFailWithError:)` (1004 bad token, 1005 unknown
    /// session, 1006 server unreachable or its name unknown, 1021 timeout, 1027 session full, 9200 the server's TLS
    /// certificate not accepted).
    public func connect(token: String) throws {
        try settings.validate()
        let endpoint = try ServerEndpoint.parse(settings.serverURL)
        let transport = try settings.makeTransport()
        try lock.withLock {
            try machine.connect(token: token, now: MonotonicClock.now())
            self.endpoint = endpoint
            self.transport = transport
            openSocket()
            apply([])
        }
    }

    /// Disconnects; `sessionDidDisconnect` follows. Throws 1010 when not connected or connecting. While
    /// reconnecting, the session disconnects at once.
    public func disconnect() throws {
        try lock.withLock { apply(try machine.disconnect(now: MonotonicClock.now())) }
    }

    /// Sends a signal to every connection (the sender included) or to one. The type (at most 128 of
    /// `[A-Za-z0-9_~-]`) and data (at most 8192 bytes) are checked first: throws 1414, 1461, 1413,
    /// 1010 when not connected, 1535 when the role cannot signal. Server refusals come to `completion`
    /// (1015 rate limit, 1011 unknown connection).
    /// While the session is reconnecting the signal is queued and sent once reconnected (as
    /// `signalWithType:string:connection:retryAfterReconnect:error:`); with `retryAfterReconnect` false it is
    /// refused instead (throws 1010). A signal in flight when the connection dropped completes with 1022.
    public func signal(type: String, data: String, to connectionId: String? = nil, retryAfterReconnect: Bool = true,
                       completion: Completion? = nil) throws {
        try lock.withLock {
            let (id, out) = try machine.signal(type: type, data: data, to: connectionId, retryAfterReconnect: retryAfterReconnect)
            register(id, completion)
            apply(out)
        }
    }

    /// Mutes every stream's audio but the excluded ones, this client's own included (as `forceMuteAll:`): their
    /// publishers stop sending audio and get `publisher(_:muteForced:)`; streams published while the mute is active
    /// start muted, until `disableForceMute`. Moderators only (1535).
    public func forceMuteAll(excluding streamIds: [String] = [], completion: Completion? = nil) throws {
        try moderated(\.canForceMute, .forceUnpublishOrInvalidStream) { .forceMuteAll(id: $0, active: true, excludedStreams: streamIds) }(completion)
    }

    /// `forceMuteAll` with the excluded streams given as streams.
    public func forceMuteAll(excludingStreams streams: [StreamInfo], completion: Completion? = nil) throws {
        try forceMuteAll(excluding: streams.map(\.id), completion: completion)
    }

    /// Mutes one stream's audio: its publisher stops sending audio and gets `publisher(_:muteForced:)`.
    public func forceMuteStream(_ streamId: String, completion: Completion? = nil) throws {
        try moderated(\.canForceMute, .forceUnpublishOrInvalidStream) { .forceMuteStream(id: $0, streamId: streamId) }(completion)
    }

    /// Ends a force mute of the whole session: streams published afterwards keep their audio (muted ones stay muted
    /// until their publishers unmute).
    public func disableForceMute(completion: Completion? = nil) throws {
        try moderated(\.canForceMute, .forceUnpublishOrInvalidStream) { .forceMuteAll(id: $0, active: false, excludedStreams: []) }(completion)
    }

    /// Disconnects another client (moderators only: else 1520, OTSessionUnableToForceDisconnect, as is the server's
    /// refusal of an unknown connection).
    public func forceDisconnect(_ connectionId: String, completion: Completion? = nil) throws {
        try moderated(\.canForceDisconnect, .unableToForceDisconnect) { .forceDisconnect(id: $0, connectionId: connectionId) }(completion)
    }

    /// Reports an issue; returns the issue id the server logs with the report.
    @discardableResult
    public func reportIssue(_ description: String, completion: (@Sendable (Result<String, OTError>) -> Void)? = nil) throws -> String {
        let issueId = UUID().uuidString.lowercased()
        try lock.withLock {
            let (id, out) = try machine.request { .reportIssue(id: $0, issueId: issueId, description: description) }
            if let completion { completions[id] = { [self] r in deliver { completion(r.map { $0.issueId ?? issueId }) } } }
            apply(out)
        }
        return issueId
    }

    // MARK: publisher-side signaling (used by the media layer's Publisher)

    /// Announces a published stream; the completion gets the stream the server created (1500 when the role cannot
    /// publish). The completion runs on the session's executor: return quickly.
    public func publishStream(_ request: PublishRequest, completion: @escaping @Sendable (Result<StreamInfo, OTError>) -> Void) throws {
        try lock.withLock {
            guard machine.status == .connected else { throw OTError(.notConnected) }
            let (id, out) = try machine.request { .publish(id: $0, request) }
            completions[id] = { r in completion(r.flatMap { $0.stream.map { .success($0) } ?? .failure(OTError(.internalError, "no stream in reply")) }) }
            apply(out)
        }
    }

    /// Withdraws a stream published by this client.
    public func unpublishStream(_ streamId: String, completion: Completion? = nil) throws {
        try lock.withLock {
            let (id, out) = try machine.request { .unpublish(id: $0, streamId: streamId) }
            register(id, completion)
            apply(out)
        }
    }

    /// Changes a published stream's properties; others get a stream property change.
    public func updateStream(_ streamId: String, hasAudio: Bool? = nil, hasVideo: Bool? = nil, width: Int? = nil, height: Int? = nil,
                             completion: Completion? = nil) throws {
        try lock.withLock {
            let (id, out) = try machine.request { .updateStream(id: $0, streamId: streamId, hasAudio: hasAudio, hasVideo: hasVideo, width: width, height: height) }
            register(id, completion)
            apply(out)
        }
    }

    /// Asks the server whether this client may subscribe to a stream (1535 by role, 1604 unknown stream). The completion
    /// runs on the session's executor: return quickly.
    public func requestSubscribe(_ streamId: String, completion: @escaping @Sendable (Result<StreamInfo, OTError>) -> Void) throws {
        try lock.withLock {
            let (id, out) = try machine.request { .subscribe(id: $0, streamId: streamId) }
            completions[id] = { r in completion(r.flatMap { $0.stream.map { .success($0) } ?? .failure(OTError(.serverCannotFindStream)) }) }
            apply(out)
        }
    }

    /// Sends a media offer; the completion gets the server's verdict on the executor (the answer comes as `mediaAnswer`).
    func sendMediaOffer(peerId: String, streamId: String, direction: MediaDirection, sdp: String, completion: @escaping Completion) throws {
        try lock.withLock {
            let (id, out) = try machine.request { .mediaOffer(id: $0, peerId: peerId, streamId: streamId, direction: direction, sdp: sdp) }
            completions[id] = { r in
                switch r {
                case .success: completion(nil)
                case .failure(let e): completion(e)
                }
            }
            apply(out)
        }
    }

    /// Sends a media message that needs no reply (answer, candidate, close, subscriber settings); queued while
    /// reconnecting, dropped when not connected.
    func sendMedia(_ message: ClientMessage) {
        lock.withLock { apply(machine.send(message)) }
    }

    // MARK: the executor

    /// Runs `body` on the executor and then re-arms the timer: inline when already there (a session event's
    /// consequences), else waiting for it (an API call that must throw synchronously).
    func onControl<T>(_ body: () throws -> T) rethrows -> T {
        if isOnExecutor {
            defer { rearm() }
            return try body()
        }
        return try executor.sync { defer { rearm() }; return try body() }
    }

    /// True on the executor (where a stop must not wait for a start in progress: the start may be waiting for it).
    var isOnExecutor: Bool { DispatchQueue.getSpecific(key: onExecutor) == true }

    /// Queues `body` for the executor (a control input from a media queue or the network), then re-arms the timer.
    func control(_ body: @escaping @Sendable () -> Void) {
        executor.async { [self] in
            body()
            rearm()
        }
    }

    /// Queues a delegate message or completion for `apiQueue`, after every one queued before.
    func deliver(_ body: @escaping @Sendable () -> Void) {
        delivery.async(execute: body)
    }

    /// Executor only: arms the one timer for the earliest deadline of the signaling machine and the control machines,
    /// or cancels it when none is left.
    private func rearm() {
        let deadline = [lock.withLock { signalingDeadline }, media.controlDeadline()].compactMap { $0 }.min()
        guard let deadline else {
            tickTimer?.cancel()
            tickTimer = nil
            tickArmedFor = nil
            return
        }
        if tickTimer != nil && tickArmedFor == deadline { return }
        tickArmedFor = deadline
        let wait = DispatchTime.now() + .microseconds(Int(max(0, (deadline - MonotonicClock.now()).microseconds)) + 1000)
        if let t = tickTimer {
            t.schedule(deadline: wait, leeway: .milliseconds(1))
            return
        }
        let timer = DispatchSource.makeTimerSource(queue: executor)
        timer.schedule(deadline: wait, leeway: .milliseconds(1))
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
        tickTimer = timer
    }

    /// Executor: the timer fired; every machine whose deadline passed acts.
    private func tick() {
        // Fired: nothing is armed until `rearm` arms for the next deadline (or cancels when none is left).
        tickArmedFor = nil
        let now = MonotonicClock.now()
        lock.withLock { apply(machine.tick(now: now)) }
        media.controlTick(now: now, session: self)
        rearm()
    }

    // MARK: internals

    private func moderated(_ cap: KeyPath<SessionCapabilities, Bool>, _ refusal: OTErrorCode,
                           _ make: @escaping (Int) -> ClientMessage) -> (Completion?) throws -> Void {
        { [self] completion in
            try lock.withLock {
                guard machine.status == .connected else { throw OTError(.notConnected) }
                guard machine.capabilities?[keyPath: cap] == true else { throw OTError(refusal, "this role is not a moderator") }
                let (id, out) = try machine.request(make)
                register(id, completion)
                apply(out)
            }
        }
    }

    /// Lock held: a request's completion for the app, delivered on `apiQueue` in order with the delegate messages.
    private func register(_ id: Int, _ completion: Completion?) {
        completions[id] = { [self] r in
            guard let completion else { return }
            let e: OTError? = if case .failure(let err) = r { err } else { nil }
            deliver { completion(e) }
        }
    }

    /// Called with the lock held: a new WebSocket for the current endpoint; events of earlier ones are ignored.
    private func openSocket() {
        guard let endpoint else { return }
        generation += 1
        let gen = generation
        let ws = WebSocketClient(endpoint: endpoint, transport: transport, pingInterval: settings.pingInterval) { [weak self] ev in self?.socketEvent(ev, gen) }
        socket = ws
        ws.start()
    }

    /// Called with the lock held: forgets the current WebSocket (its events are ignored) and drops it.
    private func dropSocket() {
        generation += 1
        socket?.abort()
        socket = nil
    }

    /// Socket events are decoded and applied on the executor, keeping the shared IO thread free of JSON work
    /// (sessions decode in parallel, each in order).
    private func socketEvent(_ ev: WebSocketClient.Event, _ gen: Int) {
        executor.async { [self] in handleSocketEvent(ev, gen) }
    }

    /// Executor: a socket event. The first `connected` of each socket waits until the ICE servers' names (the
    /// session server's and the custom ones) and the proxy's are resolved, so that media connections made from
    /// `sessionDidConnect` on have their servers; events behind it wait too, in order.
    private func handleSocketEvent(_ ev: WebSocketClient.Event, _ gen: Int) {
        if held != nil { held?.append((ev, gen)); return }
        var message: ServerMessage?
        if case .text(let t) = ev {
            do { message = try SignalingCodec.decodeServer(t) } catch {
                Log.warn("session", "bad message from server: \(error)")
                return
            }
        }
        if case .connected(let info)? = message, resolvedGeneration != gen, lock.withLock({ gen == generation }) {
            resolvedGeneration = gen
            let connected = message
            if resolveNames(for: info, then: { [self] in
                receive(ev, connected, gen)
                let queued = held ?? []
                held = nil
                for (e, g) in queued { handleSocketEvent(e, g) }
            }) {
                held = []
                return
            }
        }
        receive(ev, message, gen)
    }

    /// Executor: records the ICE servers of `info`; when names need resolving starts that and returns true (`then`
    /// runs on the executor once they are), else returns false.
    private func resolveNames(for info: ConnectedInfo, then: @escaping @Sendable () -> Void) -> Bool {
        let provided = (info.iceServers ?? []).map { IceServer(urls: $0.urls, username: $0.username, credential: $0.credential) }
        let ice = settings.iceConfig
        var names = ice.hostNames
        if ice.includeServers == .all { names.formUnion(SessionICEConfig.hostNames(provided)) }
        let proxy = lock.withLock { () -> ProxyEndpoint? in
            providedICE = provided
            return transport.proxy
        }
        @Sendable func proxyRoute(_ addresses: [String: [IPAddress]]) -> StreamRoute.Proxy? {
            guard let p = proxy, let ip = IPAddress(p.host) ?? addresses[p.host.lowercased()]?.first else { return nil }
            return StreamRoute.Proxy(address: TransportAddress(ip: ip, port: p.port), credentials: p.credentials)
        }
        if let p = proxy, IPAddress(p.host) == nil { names.insert(p.host.lowercased()) }
        guard !names.isEmpty else {
            lock.withLock { iceAddresses = [:]; iceFailures = []; mediaProxy = proxyRoute([:]) }
            return false
        }
        HostResolver.resolveAll(names) { [weak self] addresses, failures in
            guard let self else { return }
            for f in failures { Log.warn("session", "ICE/proxy server: \(f)") }
            lock.withLock { iceAddresses = addresses; iceFailures = failures; mediaProxy = proxyRoute(addresses) }
            executor.async { then(); self.rearm() }
        }
        return true
    }

    private func receive(_ ev: WebSocketClient.Event, _ message: ServerMessage?, _ gen: Int) {
        lock.withLock {
            guard gen == generation else { return }
            let now = MonotonicClock.now()
            switch ev {
            case .open:
                apply(machine.transportOpened(now: now))
            case .text:
                if let message { apply(machine.receive(message, now: now)) }
            case .closed(let err):
                socket = nil
                apply(machine.transportClosed(error: err, now: now))
            }
        }
    }

    /// What a publisher's or subscriber's media connection uses: the ICE servers (the session server's unless
    /// `includeServers` is `.custom`, then the custom ones; names resolved) and the route of TURN over TCP/TLS.
    func mediaServers() -> (servers: ResolvedICEServers, route: StreamRoute) {
        lock.withLock {
            var r = settings.iceConfig.servers(adding: providedICE, addresses: iceAddresses)
            r.failures = iceFailures
            return (r, StreamRoute(tls: transport.tls, proxy: mediaProxy))
        }
    }

    /// Called with the lock held: sends in order, and queues status changes, events, completions and media messages
    /// for the executor in order.
    private func apply(_ outputs: [SignalingClient.Output]) {
        if machine.status != reportedStatus {
            reportedStatus = machine.status
            let st = reportedStatus
            executor.async { [self] in dispatch(.statusChanged(st)) }
        }
        for o in outputs {
            switch o {
            case .send(let m):
                socket?.send(SignalingCodec.encode(m))
            case .closeTransport:
                socket?.close()
            case .openTransport:
                dropSocket()
                openSocket()
            case .dropTransport:
                dropSocket()
            case .completed(let id, let result):
                if let c = completions.removeValue(forKey: id) { executor.async { c(result) } }
            case .event(let e):
                executor.async { [self] in dispatch(e) }
            case .media(let m):
                media.received(m)
            }
        }
        if machine.nextDeadline != signalingDeadline {
            signalingDeadline = machine.nextDeadline
            executor.async { [self] in rearm() }
        }
    }

    /// Executor: a session event reaches the publisher and subscribers and the delegate. The delegate hears of it
    /// first and then of its consequences (a publisher's `muteForced`), except for the session's end, which is its
    /// last message (after its publisher's `streamDestroyed`).
    private func dispatch(_ e: SessionEvent) {
        switch e {
        case .disconnected:
            media.sessionEvent(e, session: self)
            deliverToDelegate(e)
        case .streamDestroyed:
            // Its subscriptions end (silently) before the delegate hears of it, so an `unsubscribe` from there
            // finds none (1112); the publisher's own `streamDestroyed` still follows the session's.
            media.sessionEvent(e, session: self) { $0 is Subscriber }
            deliverToDelegate(e)
            media.sessionEvent(e, session: self) { !($0 is Subscriber) }
        default:
            deliverToDelegate(e)
            media.sessionEvent(e, session: self)
        }
        rearm()
    }

    /// Executor: a subscription could not be re-established: the stream is reported destroyed (as the seeds say),
    /// unless the session already reported it.
    func streamLost(_ streamId: String) {
        lock.withLock { apply(machine.forgetStream(streamId)) }
    }

    private func deliverToDelegate(_ e: SessionEvent) {
        deliver { [self] in
            guard let d = delegate else { return }
            switch e {
            case .connected: d.sessionDidConnect(self)
            case .disconnected: d.sessionDidDisconnect(self)
            case .failed(let err): d.session(self, didFailWithError: err)
            case .connectionCreated(let c): d.session(self, connectionCreated: c)
            case .connectionDestroyed(let c): d.session(self, connectionDestroyed: c)
            case .streamCreated(let s): d.session(self, streamCreated: s)
            case .streamDestroyed(let s): d.session(self, streamDestroyed: s)
            case .streamChanged(let s, let change): d.session(self, stream: s, didChange: change)
            case .signal(let type, let data, let from): d.session(self, receivedSignalType: type, from: from, data: data)
            case .muteForced(let info): d.session(self, muteForced: info)
            case .reconnecting: d.sessionDidBeginReconnecting(self)
            case .reconnected: d.sessionDidReconnect(self)
            case .statusChanged(let st): d.session(self, statusChanged: st)
            }
        }
    }
}

// MARK: end-to-end encryption

extension Session {
    /// Valid encryption secret lengths, in characters (as OpenTok).
    public static let encryptionSecretLengths = 8...256

    /// Sets the end-to-end encryption secret used by the publishers and subscribers created afterwards in this session
    /// (as `[OTSession setEncryptionSecret:error:]`); call it before publishing or subscribing, before or after
    /// connecting. Every client of the session must use the same secret. Throws 1030 (`invalidEncryptionSecret`) when
    /// the secret is not 8–256 characters (the previous secret stays). The secret only applies in end-to-end encrypted
    /// sessions; in others media is not encrypted end to end. See docs/e2ee.md.
    public func setEncryptionSecret(_ secret: String) throws {
        guard Session.encryptionSecretLengths.contains(secret.count) else {
            throw OTError(.invalidEncryptionSecret, "the encryption secret has \(secret.count) characters; it must have 8 to 256")
        }
        let key = try E2EEKey(secret: secret)
        lock.withLock { encryptionKey = key }
    }

    /// The frame transform a new publisher or subscriber uses: the configured one in sessions without end-to-end
    /// encryption; in end-to-end encrypted sessions a new `E2EEFrameTransform` with the session's key.
    /// Throws 1031 when the session is end-to-end encrypted and no secret is set, 1011 when a custom transform is
    /// configured too (the two would not compose with other clients).
    func mediaTransform(configured: any FrameTransform) throws -> any FrameTransform {
        let (e2ee, key) = lock.withLock { (machine.e2ee, encryptionKey) }
        guard e2ee else { return configured }
        guard let key else {
            throw OTError(.encryptionSecretMissing, "the session is end-to-end encrypted: call setEncryptionSecret before publishing or subscribing")
        }
        guard configured.isIdentity else {
            throw OTError(.invalidParameter, "a custom frame transform cannot be used in an end-to-end encrypted session")
        }
        return try E2EEFrameTransform(key: key)
    }
}
