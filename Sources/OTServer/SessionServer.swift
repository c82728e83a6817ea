import FoundationEssentials
import OTBase
import OTTransport
import OTWire

/// The whole session server, composed from one `Configuration`: the HTTP/WebSocket server (`HTTPServer`), the OpenTok
/// REST API (`RESTAPI`), the signaling router (`SignalingRouter`) and, with `Configuration.media`, its own media router
/// (`MediaRouter`) for routed sessions. `ot-server` and the embedded server (`ot_server_new`) both run one.
/// Embeddable: `start()` on port 0 returns the port picked; `stop()` closes everything. This type is the driver: it
/// carries the signaling router's outputs out to sockets and to the media router, on the HTTP server's loop thread.
public final class SessionServer: @unchecked Sendable {
    /// TLS on the server's port.
    public typealias TLSSettings = ServerTLSSettings

    /// Where the server's own media router binds, and how many workers it runs.
    public struct MediaSettings: Sendable, Equatable {
        /// The IP the router binds (nil: the listen host, or 127.0.0.1 when that is every interface or `localhost`).
        public var host: IPAddress?
        /// The UDP port of the first worker (worker i binds port + i); 0: any free ports.
        public var port: UInt16
        /// 1:1 NAT: the IP clients are told (nil: the bound one).
        public var advertise: IPAddress?
        /// Sockets with their own IO thread (one per core); each session's media goes through one. 1…`maxWorkers`.
        public var workers: Int
        /// The keyframe-request aggregation window of one publisher (`MediaRouter.pliInterval`).
        public var pliInterval: Duration
        /// The audio fallback's thresholds and hold times, judged every `qualityInterval`.
        public var quality: QualityFallbackConfig
        public var qualityInterval: Duration
        /// The most workers a server runs.
        public static let maxWorkers = MediaRouter.maxWorkers
        /// Throws `.invalidParameter` for what the media router would refuse (its worker count), naming the setting as
        /// `name` calls it.
        public func validate(naming name: (String) -> String = { $0 }) throws { try MediaRouter.validate(workers: workers, naming: name) }
        public init(host: IPAddress? = nil, port: UInt16 = 0, advertise: IPAddress? = nil, workers: Int = 1,
                    pliInterval: Duration = .milliseconds(300), quality: QualityFallbackConfig = QualityFallbackConfig(),
                    qualityInterval: Duration = .seconds(1)) {
            self.host = host; self.port = port; self.advertise = advertise; self.workers = workers
            self.pliInterval = pliInterval; self.quality = quality; self.qualityInterval = qualityInterval
        }
    }

    /// What the server needs to start.
    public struct Configuration: Sendable {
        /// The address to listen on: IPv4 or IPv6 (`::` for every interface), or `localhost`.
        public var host: String
        /// 0 picks a free port.
        public var port: UInt16
        public var projects: [Project]
        public var limits: ServerLimits
        /// WebSocket ping interval; a client silent for three intervals is dropped.
        public var pingInterval: Duration
        /// Caps on sockets and queued output (the listener's; docs/protocol.md, "Limits").
        public var connectionLimits: TCPServerLimits
        /// Deadlines of HTTP requests, keep-alive and the WebSocket `connect`.
        public var timeouts: SocketTimeouts
        /// Cross-origin WebSocket upgrades must name one of these (`scheme://host[:port]`, compared case-insensitively);
        /// empty: any origin. Same-origin upgrades (a page this server serves) and requests without `Origin`
        /// (non-browser clients) are not affected.
        public var allowedOrigins: [String]
        /// TLS on the port (nil: plain HTTP and WebSocket).
        public var tls: TLSSettings?
        /// The STUN/TURN servers (with per-connection TURN credentials) each client gets in `connected`.
        public var iceServers: ICEServerPolicy
        /// The host name clients use, for `apiURL` and `signalingURL` (nil: `host`); with TLS, the certificate's name.
        public var publicHost: String?
        /// The server's own media router, started and stopped with it (nil: none; set `mediaRouting` instead).
        public var media: MediaSettings?
        public init(host: String = "127.0.0.1", port: UInt16 = 0, projects: [Project], limits: ServerLimits = ServerLimits(),
                    pingInterval: Duration = .seconds(10), connectionLimits: TCPServerLimits = TCPServerLimits(),
                    timeouts: SocketTimeouts = SocketTimeouts(), allowedOrigins: [String] = [], tls: TLSSettings? = nil,
                    iceServers: ICEServerPolicy = ICEServerPolicy(), publicHost: String? = nil, media: MediaSettings? = nil) {
            self.host = host; self.port = port; self.projects = projects; self.limits = limits; self.pingInterval = pingInterval
            self.connectionLimits = connectionLimits; self.timeouts = timeouts; self.allowedOrigins = allowedOrigins
            self.tls = tls; self.iceServers = iceServers; self.publicHost = publicHost; self.media = media
        }

        /// Throws `.invalidParameter` for ICE servers or media settings the server would refuse at `start()`, naming
        /// the setting as `name` calls it (a Swift property; the C ABI's member, `ot-server`'s flag). Files, the
        /// listen address and ports are checked when they are used.
        public func validate(naming name: (String) -> String = { $0 }) throws {
            try iceServers.validate(naming: name)
            try media?.validate(naming: name)
        }
    }

    /// The WebSocket path clients connect to.
    public static let signalingPath = "/v2/signaling"

    public let configuration: Configuration
    private let http: HTTPServer
    private let router: SignalingRouter
    private let stateLock = Lock()
    private var _mediaRouting: (any MediaRouting)?
    private var ownRouter: MediaRouter?
    private var started = false

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        http = HTTPServer(HTTPServer.Configuration(host: configuration.host, port: configuration.port, webSocketPath: Self.signalingPath,
                                                   pingInterval: configuration.pingInterval, connectionLimits: configuration.connectionLimits,
                                                   timeouts: configuration.timeouts, allowedOrigins: configuration.allowedOrigins,
                                                   tls: configuration.tls))
        router = SignalingRouter(projects: configuration.projects, limits: configuration.limits)
        let ice = configuration.iceServers
        if !ice.urls.isEmpty { router.iceServers = { ice.servers(connectionId: $0, nowMillis: $1) } }
        http.delegate = self
    }

    /// A server dropped without `stop()` still ends its media router's threads (the HTTP server ends its own).
    deinit { ownRouter?.stop() }

    /// Starts the media router of `configuration.media` (if any), binds and starts serving; returns the bound port.
    /// Throws `.invalidParameter` for unusable settings (ICE servers, TLS files, media host or worker count).
    @discardableResult
    public func start() throws -> UInt16 {
        try stateLock.withLock {
            guard !started else { throw OTError(.illegalState, "server already started") }
            started = true
        }
        var media: MediaRouter?
        do {
            try configuration.validate()
            media = try configuration.media.map(startMediaRouter)
            return try http.start()
        } catch {
            media?.stop()
            stateLock.withLock { ownRouter = nil; started = false }
            throw error
        }
    }

    private func startMediaRouter(_ m: MediaSettings) throws -> MediaRouter {
        let listen = configuration.host
        let any = listen == "0.0.0.0" || listen == "::" || listen == "localhost"
        guard let ip = m.host ?? (any ? .v4(0x7F00_0001) : IPAddress(listen)) else {
            throw OTError(.invalidParameter, "the media router needs an IP address, not \(listen)")
        }
        let r = try MediaRouter(bind: TransportAddress(ip: ip, port: m.port), advertise: m.advertise, pliInterval: m.pliInterval,
                                quality: m.quality, qualityInterval: m.qualityInterval, workers: m.workers)
        stateLock.withLock { ownRouter = r }
        mediaRouting = r
        return r
    }

    /// Reads the TLS certificate and key files again (after a renewal; `ot-server` does it on SIGHUP): new
    /// connections get the new certificate, open ones and their sessions carry on. Throws `.illegalState` without
    /// TLS or before `start`, `.invalidParameter` (the old certificate stays) when the files are unusable.
    public func reloadTLS() throws { try http.reloadTLS() }

    /// Closes every socket, ends the server's thread and stops its own media router.
    public func stop() {
        http.stop()
        stateLock.withLock { let r = ownRouter; ownRouter = nil; return r }?.stop()
    }

    /// Where a session of this server has (or will have) its media: its router worker and that worker's UDP port.
    /// Throws `.invalidParameter` for an id that is not a session id of one of this server's projects,
    /// `.illegalState` without the server's own media router (not started, stopped, or no `configuration.media`).
    public func mediaPlacement(sessionId: String) throws -> MediaRouter.Placement {
        guard let sid = try? SessionID.parse(sessionId), configuration.projects.contains(where: { $0.apiKey == sid.apiKey }) else {
            throw OTError(.invalidParameter, "not a session id of this server's projects")
        }
        guard let r = mediaRouter else { throw OTError(.illegalState, "the server runs no media router") }
        return r.placement(sessionId: sessionId)
    }

    /// The media router this server started from `configuration.media` (nil without one, or once stopped).
    public var mediaRouter: MediaRouter? { stateLock.withLock { ownRouter } }

    /// The media router of routed sessions. Without one, media offers in routed sessions are refused
    /// (2000); relayed sessions never need it. Set it before clients publish (`configuration.media` sets it at start).
    public var mediaRouting: (any MediaRouting)? {
        get { stateLock.withLock { _mediaRouting } }
        set {
            stateLock.withLock { _mediaRouting = newValue }
            newValue?.setQualityHandler { [weak self] peerId, event in
                self?.http.execute { [weak self] in
                    guard let self else { return }
                    apply(router.mediaQuality(peerId: peerId, event: event))
                }
            }
            newValue?.setPublisherLinkHandler { [weak self] streamId, up in
                self?.http.execute { [weak self] in
                    guard let self else { return }
                    apply(router.publisherMedia(streamId: streamId, up: up))
                }
            }
        }
    }

    /// Peer connections the server currently relays signaling for (relayed and routed).
    public var mediaPeerCount: Int { (try? http.onLoop { [self] in router.mediaPeerCount }) ?? 0 }

    /// The bound port (0 before `start`).
    public var port: UInt16 { http.port }
    /// `http(s)://host:port`: the `api_url` for the server SDKs.
    public var apiURL: String { "\(configuration.tls == nil ? "http" : "https")://\(authority)" }
    /// `ws(s)://host:port/v2/signaling`: the URL clients connect to.
    public var signalingURL: String { "\(configuration.tls == nil ? "ws" : "wss")://\(authority)\(Self.signalingPath)" }
    private var authority: String { HostPort.authority(configuration.publicHost ?? configuration.host, port) }

    /// Creates a session (as the REST call does) and returns its id.
    public func createSession(apiKey: String, relayed: Bool = false, e2ee: Bool = false) throws -> String {
        try http.onLoop { [self] in try router.createSession(apiKey: apiKey, relayed: relayed, e2ee: e2ee, nowMillis: wallClockMillis()) }
    }

    /// Mints a client token for a session of one of this server's projects.
    public func token(sessionId: String, role: SessionRole = .publisher, data: String? = nil, format: TokenFormat = .jwt,
                      lifetimeSeconds: Int64 = ClientToken.defaultLifetime) throws -> String {
        let sid = try SessionID.parse(sessionId)
        guard let p = configuration.projects.first(where: { $0.apiKey == sid.apiKey }) else {
            throw OTError(.invalidParameter, "no project \(sid.apiKey) on this server")
        }
        guard (1...ClientToken.maxLifetime).contains(lifetimeSeconds) else {
            throw OTError(.invalidParameter, "a token lives 1 second to 30 days, not \(lifetimeSeconds) seconds")
        }
        let now = wallClockMillis() / 1000
        return try ClientToken(apiKey: p.apiKey, sessionId: sessionId, role: role, createTime: now, expireTime: now + lifetimeSeconds,
                               connectionData: data, format: format).mint(secret: p.secret)
    }

    /// Issues logged by `reportIssue`, oldest first.
    public var reportedIssues: [IssueReport] { (try? http.onLoop { [self] in router.issues }) ?? [] }
    /// Connections of a session (dropped ones included while resumable).
    public func connections(in sessionId: String) -> [ConnectionInfo] { (try? http.onLoop { [self] in router.connections(in: sessionId) }) ?? [] }
    /// Streams published in a session.
    public func streams(in sessionId: String) -> [StreamInfo] { (try? http.onLoop { [self] in router.streams(in: sessionId) }) ?? [] }
    /// Open sockets (HTTP and WebSocket).
    public var openSockets: Int { http.openSockets }

    /// Carries out the router's outputs. What one call produces for a socket is queued as one write, so the
    /// transport's per-socket cap judges a client by what it left unread before (a joiner's whole roster, or a
    /// resumed connection's backlog, always goes out).
    private func apply(_ outputs: [SignalingRouter.Output]) {
        var batches: [Int: [UInt8]] = [:]
        func flush(_ id: Int) {
            guard let bytes = batches.removeValue(forKey: id) else { return }
            http.send(bytes, to: id)
        }
        defer { for id in Array(batches.keys) { flush(id) } }
        for o in outputs {
            switch o {
            case .send(let ids, let msg):
                var frames: [UInt8] = []
                for text in SignalingCodec.encodeFrames(msg) {
                    frames += WebSocketFrame(opcode: .text, payload: Array(text.utf8)).encoded()
                }
                let joined = if case .connected = msg { true } else { false }
                for id in ids {
                    if joined { http.markJoined(id) }
                    batches[id, default: []] += frames
                }
            case .close(let id):
                flush(id)
                http.closeWebSocket(id, code: 1000)
            case .routeOffer(let offer):
                guard let routing = mediaRouting else {
                    apply(router.mediaAnswered(peerId: offer.peerId, .failure(OTError(.internalError, "this server has no media router"))))
                    continue
                }
                let peerId = offer.peerId
                routing.handleOffer(offer) { [weak self] result in
                    guard let self else { return }
                    http.execute { [weak self] in
                        guard let self else { return }
                        apply(router.mediaAnswered(peerId: peerId, result))
                    }
                }
            case .routeClose(let peerId):
                mediaRouting?.close(peerId: peerId)
            case .routeSubscription(let peerId, let audio, let video):
                mediaRouting?.setSubscription(peerId: peerId, audio: audio, video: video)
            case .routeConnectionGone(let cid):
                mediaRouting?.connectionGone(connectionId: cid)
            }
        }
    }
}

/// The HTTP server's requests and WebSocket messages, on its loop thread: files and REST calls answered, signaling
/// decoded and handed to the signaling router.
extension SessionServer: HTTPServerDelegate {
    func respond(to request: HTTPRequest) -> HTTPResponse {
        if let file = WebAssets.response(to: request) { return file }
        let stats = (mediaRouting as? any MediaRoutingStats).map { s in { (key: String) in s.statsJSON(apiKey: key) } }
        let answer = RESTAPI.answer(request, router: router, stats: stats, nowMillis: wallClockMillis())
        apply(answer.outputs)
        return answer.response
    }

    func webSocket(_ socket: Int, received text: String) {
        let msg: ClientMessage
        do { msg = try SignalingCodec.decodeClient(text) } catch let unknown as UnknownMessageType {
            // A newer client's message: refused, the connection stays (docs/protocol.md).
            if let id = unknown.id {
                http.sendText(SignalingCodec.encode(ServerMessage.reply(id: id, code: OTErrorCode.invalidParameter.rawValue,
                                                                        message: "unknown message type \"\(unknown.type)\"", stream: nil, issueId: nil)),
                              to: socket)
            }
            return
        } catch {
            http.sendText(SignalingCodec.encode(ServerMessage.error(code: OTErrorCode.invalidParameter.rawValue, message: "\(error)")), to: socket)
            http.closeWebSocket(socket, code: 1002)
            return
        }
        apply(router.receive(socket: socket, msg, now: MonotonicClock.now(), nowMillis: wallClockMillis()))
    }

    func webSocketLeft(_ socket: Int) {
        apply(router.receive(socket: socket, .disconnect, now: MonotonicClock.now(), nowMillis: wallClockMillis()).filter {
            if case .send([socket], .error) = $0 { false } else { true }
        })
    }

    func webSocketClosed(_ socket: Int) { apply(router.socketClosed(socket, now: MonotonicClock.now())) }

    func tick(now: Instant) { apply(router.tick(now: now)) }
}
