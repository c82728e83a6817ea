import Dispatch
import FoundationEssentials
import OTBase
import OTTransport
import OTWire

/// The session server: OpenTok REST API and WebSocket signaling on one HTTP/1.1 port (plain, or TLS),
/// driven by one epoll thread (no thread per connection). Embeddable: `start()` on port 0
/// returns the port picked; `stop()` closes everything.
public final class SessionServer: @unchecked Sendable {
    /// TLS on the server's port: a PEM certificate chain (leaf first) and its key; TLS 1.2 and 1.3.
    public struct TLSSettings: Sendable, Equatable {
        public var certificateFile: String
        public var keyFile: String
        /// Also serve plain HTTP on the port (the first byte tells them apart). Off: a plain request gets a 400
        /// that names https, and the socket closes.
        public var allowPlaintext: Bool
        public init(certificateFile: String, keyFile: String, allowPlaintext: Bool = false) {
            self.certificateFile = certificateFile; self.keyFile = keyFile; self.allowPlaintext = allowPlaintext
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
        /// WebSocket upgrades with an `Origin` header must name one of these (`scheme://host[:port]`, compared
        /// case-insensitively); empty: any origin. Requests without `Origin` (non-browser clients) are not affected.
        public var allowedOrigins: [String]
        /// TLS on the port (nil: plain HTTP and WebSocket).
        public var tls: TLSSettings?
        /// The STUN/TURN servers (with per-connection TURN credentials) each client gets in `connected`.
        public var iceServers: ICEServerPolicy
        /// The host name clients use, for `apiURL` and `signalingURL` (nil: `host`); with TLS, the certificate's name.
        public var publicHost: String?
        public init(host: String = "127.0.0.1", port: UInt16 = 0, projects: [Project], limits: ServerLimits = ServerLimits(),
                    pingInterval: Duration = .seconds(10), connectionLimits: TCPServerLimits = TCPServerLimits(),
                    timeouts: SocketTimeouts = SocketTimeouts(), allowedOrigins: [String] = [], tls: TLSSettings? = nil,
                    iceServers: ICEServerPolicy = ICEServerPolicy(), publicHost: String? = nil) {
            self.host = host; self.port = port; self.projects = projects; self.limits = limits; self.pingInterval = pingInterval
            self.connectionLimits = connectionLimits; self.timeouts = timeouts; self.allowedOrigins = allowedOrigins
            self.tls = tls; self.iceServers = iceServers; self.publicHost = publicHost
        }
    }

    /// The WebSocket path clients connect to.
    public static let signalingPath = "/v2/signaling"

    public let configuration: Configuration
    private let loop: TCPEventLoop
    private let router: SignalingRouter
    private var sockets: [Int: ServerSocket] = [:]
    private var nextSocketId = 1
    private let stateLock = Lock()
    private var boundPort: UInt16 = 0
    private var started = false
    private var stopped = false
    private var _mediaRouting: (any MediaRouting)?
    private var tlsCredentials: TLSServerCredentials?

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        loop = TCPEventLoop(name: "ot-server")
        router = SignalingRouter(projects: configuration.projects, limits: configuration.limits)
        let ice = configuration.iceServers
        if !ice.urls.isEmpty { router.iceServers = { ice.servers(connectionId: $0, nowMillis: $1) } }
    }

    deinit { if !stopped { loop.stop() } }

    /// Binds and starts serving; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        try stateLock.withLock {
            guard !started else { throw OTError(.illegalState, "server already started") }
            try configuration.iceServers.validate()
            let tls = try configuration.tls.map { t in
                TCPEventLoop.TLSListening(credentials: try TLSServerCredentials(certificateFile: t.certificateFile, keyFile: t.keyFile),
                                          allowPlaintext: t.allowPlaintext)
            }
            tlsCredentials = tls?.credentials
            let port = try loop.listen(host: configuration.host, port: configuration.port, limits: configuration.connectionLimits,
                                       tls: tls) { [weak self] conn in
                self?.accepted(conn)
            }
            boundPort = port
            started = true
            loop.execute { [weak self] in self?.scheduleTick() }
            Log.info("server", "listening on \(configuration.host):\(port)\(tls == nil ? "" : " (TLS)")")
            return port
        }
    }

    /// Reads the TLS certificate and key files again (after a renewal; `ot-server` does it on SIGHUP): new
    /// connections get the new certificate, open ones and their sessions carry on. Throws `.illegalState` without
    /// TLS or before `start`, `.invalidParameter` (the old certificate stays) when the files are unusable.
    public func reloadTLS() throws {
        guard let c = stateLock.withLock({ tlsCredentials }) else { throw OTError(.illegalState, "the server has no TLS to reload") }
        try c.reload()
        Log.info("server", "TLS certificate reloaded from \(c.context.certificateFile)")
    }

    /// Closes every socket and ends the server's thread.
    public func stop() {
        let doStop = stateLock.withLock { () -> Bool in let s = !stopped; stopped = true; return s }
        if doStop { loop.stop() }
    }

    /// The media router of routed sessions. Without one, media offers in routed sessions are refused
    /// (2000); relayed sessions never need it. Set it before clients publish.
    public var mediaRouting: (any MediaRouting)? {
        get { stateLock.withLock { _mediaRouting } }
        set {
            stateLock.withLock { _mediaRouting = newValue }
            newValue?.setQualityHandler { [weak self] peerId, event in
                self?.loop.execute { [weak self] in
                    guard let self else { return }
                    apply(router.mediaQuality(peerId: peerId, event: event))
                }
            }
            newValue?.setPublisherLinkHandler { [weak self] streamId, up in
                self?.loop.execute { [weak self] in
                    guard let self else { return }
                    apply(router.publisherMedia(streamId: streamId, up: up))
                }
            }
        }
    }

    /// Peer connections the server currently relays signaling for (relayed and routed).
    public var mediaPeerCount: Int { (try? onLoop { [self] in router.mediaPeerCount }) ?? 0 }

    /// The bound port (0 before `start`).
    public var port: UInt16 { stateLock.withLock { boundPort } }
    /// `http(s)://host:port`: the `api_url` for the server SDKs.
    public var apiURL: String { "\(configuration.tls == nil ? "http" : "https")://\(authority)" }
    /// `ws(s)://host:port/v2/signaling`: the URL clients connect to.
    public var signalingURL: String { "\(configuration.tls == nil ? "ws" : "wss")://\(authority)\(Self.signalingPath)" }
    private var authority: String { HostPort.authority(configuration.publicHost ?? configuration.host, port) }

    /// Creates a session (as the REST call does) and returns its id.
    public func createSession(apiKey: String, relayed: Bool = false, e2ee: Bool = false) throws -> String {
        try onLoop { [self] in try router.createSession(apiKey: apiKey, relayed: relayed, e2ee: e2ee, nowMillis: wallClockMillis()) }
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
    public var reportedIssues: [IssueReport] { (try? onLoop { [self] in router.issues }) ?? [] }
    /// Connections of a session (dropped ones included while resumable).
    public func connections(in sessionId: String) -> [ConnectionInfo] { (try? onLoop { [self] in router.connections(in: sessionId) }) ?? [] }
    /// Streams published in a session.
    public func streams(in sessionId: String) -> [StreamInfo] { (try? onLoop { [self] in router.streams(in: sessionId) }) ?? [] }
    /// Open sockets (HTTP and WebSocket).
    public var openSockets: Int { (try? onLoop { [self] in sockets.count }) ?? 0 }

    private func onLoop<T>(_ body: @escaping () throws -> T) throws -> T {
        if loop.inLoop || !stateLock.withLock({ started && !stopped }) { return try body() }
        let slot = ResultSlot<T>()
        let done = DispatchSemaphore(value: 0)
        loop.execute { slot.result = Result { try body() }; done.signal() }
        done.wait()
        switch slot.result {
        case .success(let v): return v
        case .failure(let e): throw e
        case nil: throw OTError(.internalError, "server loop did not answer")
        }
    }

    // MARK: loop-thread internals

    private func accepted(_ conn: TCPConnection) {
        let id = nextSocketId; nextSocketId += 1
        let s = ServerSocket(id: id, conn: conn, server: self, now: MonotonicClock.now())
        conn.delegate = s
        conn.context = s
        sockets[id] = s
    }

    private func scheduleTick() {
        loop.schedule(after: .milliseconds(250)) { [weak self] in
            guard let self else { return }
            let now = MonotonicClock.now()
            apply(router.tick(now: now))
            for s in Array(sockets.values) {
                if s.enforceDeadline(now: now, configuration.timeouts) || s.ws == nil || s.closing { continue }
                if now - s.lastHeard > configuration.pingInterval * 3 {
                    s.conn.close(error: OTError(.connectionTimedOut, "client silent"))
                } else if now - s.lastPing >= configuration.pingInterval {
                    s.lastPing = now
                    s.conn.send(WebSocketFrame(opcode: .ping, payload: []).encoded())
                }
            }
            scheduleTick()
        }
    }

    func socketClosed(_ s: ServerSocket) {
        sockets[s.id] = nil
        if s.ws != nil { apply(router.socketClosed(s.id, now: MonotonicClock.now())) }
    }

    func leave(_ s: ServerSocket) {
        apply(router.receive(socket: s.id, .disconnect, now: MonotonicClock.now(), nowMillis: wallClockMillis()).filter {
            if case .send([s.id], .error) = $0 { false } else { true }
        })
    }

    func received(_ s: ServerSocket, _ text: String) {
        let msg: ClientMessage
        do { msg = try SignalingCodec.decodeClient(text) } catch let unknown as UnknownMessageType {
            // A newer client's message: refused, the connection stays (docs/protocol.md).
            if let id = unknown.id {
                s.sendText(SignalingCodec.encode(ServerMessage.reply(id: id, code: OTErrorCode.invalidParameter.rawValue,
                                                                     message: "unknown message type \"\(unknown.type)\"", stream: nil, issueId: nil)))
            }
            return
        } catch {
            s.sendText(SignalingCodec.encode(ServerMessage.error(code: OTErrorCode.invalidParameter.rawValue, message: "\(error)")))
            s.closeWebSocket(code: 1002)
            return
        }
        apply(router.receive(socket: s.id, msg, now: MonotonicClock.now(), nowMillis: wallClockMillis()))
    }

    /// Carries out the router's outputs. What one call produces for a socket is queued as one write, so the
    /// transport's per-socket cap judges a client by what it left unread before (a joiner's whole roster, or a
    /// resumed connection's backlog, always goes out).
    private func apply(_ outputs: [SignalingRouter.Output]) {
        var batches: [Int: [UInt8]] = [:]
        func flush(_ id: Int) {
            guard let bytes = batches.removeValue(forKey: id), let s = sockets[id] else { return }
            s.conn.send(bytes)
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
                    guard let s = sockets[id] else { continue }
                    if joined { s.joined() }
                    batches[id, default: []] += frames
                }
            case .close(let id):
                flush(id)
                sockets[id]?.closeWebSocket(code: 1000)
            case .routeOffer(let offer):
                guard let routing = mediaRouting else {
                    apply(router.mediaAnswered(peerId: offer.peerId, .failure(OTError(.internalError, "this server has no media router"))))
                    continue
                }
                let peerId = offer.peerId
                routing.handleOffer(offer) { [weak self] result in
                    guard let self else { return }
                    loop.execute { [weak self] in
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

    func handle(_ s: ServerSocket, _ req: HTTPRequest, now: Instant) {
        if req.path == Self.signalingPath {
            if !configuration.allowedOrigins.isEmpty, let origin = req.headers["Origin"],
               !configuration.allowedOrigins.contains(where: { $0.lowercased() == origin.lowercased() }) {
                s.respond(self.error(403, "origin not allowed"), close: true, now: now)
                return
            }
            do {
                let resp = try WebSocketHandshake.serverResponse(to: req)
                s.conn.send(resp.serialized())
                s.upgrade(now: now)
            } catch {
                s.respond(self.error(400, "\(error)"), close: true, now: now)
            }
            return
        }
        if let file = WebAssets.response(to: req) {
            s.respond(file, close: req.headers["Connection"]?.lowercased() == "close", now: now)
            return
        }
        let resp: HTTPResponse
        do { resp = try route(req) } catch let e as RESTError { resp = error(e.status, e.message) } catch { resp = self.error(500, "\(error)") }
        s.respond(resp, close: req.headers["Connection"]?.lowercased() == "close", now: now)
    }

    private func error(_ status: Int, _ message: String) -> HTTPResponse {
        .json(status, JSONValue.object(["code": .int(Int64(status)), "message": .string(message)]).serialized())
    }

    private func authenticate(_ req: HTTPRequest, apiKey: String?) throws -> Project {
        guard let token = req.headers["X-OPENTOK-AUTH"] else { throw RESTError(403, "missing X-OPENTOK-AUTH") }
        let key = apiKey ?? (try? JWT.unverifiedClaims(token)).flatMap { JWT.string($0["iss"]) }
        guard let key, let project = router.projects[key] else { throw RESTError(403, "unknown project") }
        do { try ProjectAuth.verify(token, apiKey: key, secret: project.secret, now: wallClockMillis() / 1000) } catch {
            throw RESTError(403, "authentication failed: \(error)")
        }
        return project
    }

    private func jsonBody(_ req: HTTPRequest) throws -> [String: JSONValue] {
        if req.body.isEmpty { return [:] }
        guard let dict = (try? JSONValue.parse(req.body))?.objectValue else {
            throw RESTError(400, "body is not a JSON object")
        }
        return dict
    }

    private func streamJSON(_ s: StreamInfo) -> JSONValue {
        ["id": .string(s.id), "videoType": s.videoType == "screen" ? "screen" : "camera", "name": .string(s.name),
         "layoutClassList": .array(s.layoutClassList.map { .string($0) })]
    }

    private func route(_ req: HTTPRequest) throws -> HTTPResponse {
        let parts = req.path.split(separator: "/").map(String.init)
        if parts == ["session", "create"] {
            guard req.method == "POST" else { throw RESTError(405, "use POST") }
            let project = try authenticate(req, apiKey: nil)
            let form = FormEncoding.decode(String(decoding: req.body, as: UTF8.self))
            let relayed = form["p2p.preference"] == "enabled"
            let e2ee = form["e2ee"]?.lowercased() == "true"
            if e2ee && relayed { throw RESTError(400, "end-to-end encryption needs a routed session") }
            let sid = try router.createSession(apiKey: project.apiKey, relayed: relayed, e2ee: e2ee, location: form["location"] ?? "",
                                               nowMillis: wallClockMillis())
            let created = Date().formatted(.iso8601)
            let reply: JSONValue = [["session_id": .string(sid), "project_id": .string(project.apiKey),
                                     "partner_id": .string(project.apiKey), "create_dt": .string(created), "media_server_url": ""]]
            return .json(200, reply.serialized())
        }
        if parts == ["v2", "stats"] {
            guard req.method == "GET" else { throw RESTError(405, "use GET") }
            let project = try authenticate(req, apiKey: nil)
            let body = (mediaRouting as? any MediaRoutingStats)?.statsJSON(apiKey: project.apiKey) ?? JSONValue.object(["sessions": [:]]).serialized()
            return .json(200, body)
        }
        guard parts.count >= 5, parts[0] == "v2", parts[1] == "project", parts[3] == "session" else {
            if parts.count >= 3, parts[0] == "v2", parts[1] == "project" {
                _ = try authenticate(req, apiKey: parts[2])
                throw RESTError(404, "not implemented by this server: \(req.path)")
            }
            throw RESTError(404, "no such resource: \(req.path)")
        }
        let key = parts[2], sid = parts[4], rest = Array(parts[5...])
        _ = try authenticate(req, apiKey: key)
        guard router.project(forSession: sid)?.apiKey == key else { throw RESTError(404, "session not found") }
        switch (req.method, rest.count, rest.first) {
        case ("POST", 1, "signal"),
             ("POST", 3, "connection") where rest.last == "signal":
            let body = try jsonBody(req)
            let type = body["type"]?.stringValue ?? "", data = body["data"]?.stringValue ?? ""
            apply(try router.restSignal(sessionId: sid, connectionId: rest.count == 3 ? rest[1] : nil, type: type, data: data))
            return HTTPResponse(status: 204)
        case ("DELETE", 2, "connection"):
            apply(try router.restForceDisconnect(sessionId: sid, connectionId: rest[1]))
            return HTTPResponse(status: 204)
        case ("POST", 3, "stream") where rest[2] == "mute":
            apply(try router.restMuteStream(sessionId: sid, streamId: rest[1]))
            return .json(200, Array("{}".utf8))
        case ("POST", 1, "mute"):
            let body = try jsonBody(req)
            guard let active = body["active"]?.boolValue else { throw RESTError(400, "active must be true or false") }
            let excluded = (body["excludedStreamIds"] ?? body["excludedStreams"] ?? body["excudedStreamIds"])?.arrayValue?
                .compactMap(\.stringValue) ?? []
            apply(try router.restMuteAll(sessionId: sid, active: active, excluded: excluded))
            return .json(200, Array("{}".utf8))
        case ("GET", 1, "stream"):
            let items = try router.restStreams(sessionId: sid).map(streamJSON)
            return .json(200, JSONValue.object(["count": .int(Int64(items.count)), "items": .array(items)]).serialized())
        case ("GET", 2, "stream"):
            return .json(200, streamJSON(try router.restStream(sessionId: sid, streamId: rest[1])).serialized())
        case ("PUT", 1, "stream"):
            let body = try jsonBody(req)
            guard let items = body["items"]?.arrayValue else { throw RESTError(400, "items must be a list") }
            var pairs: [(String, [String])] = []
            for it in items {
                guard let id = it["id"]?.stringValue, let classes = it["layoutClassList"]?.arrayValue?.compactMap(\.stringValue) else {
                    throw RESTError(400, "each item needs id and layoutClassList")
                }
                pairs.append((id, classes))
            }
            try router.restSetClassLists(sessionId: sid, pairs)
            return HTTPResponse(status: 200)
        default:
            throw RESTError(404, "no such resource: \(req.method) \(req.path)")
        }
    }
}

/// Carries a result from the loop thread back to a waiting caller.
private final class ResultSlot<T>: @unchecked Sendable { var result: Result<T, Error>? }
