import Dispatch
import OTBase
import OTTransport
import OTWire

/// TLS on a server's port: a PEM certificate chain (leaf first) and its key; TLS 1.2 and 1.3.
public struct ServerTLSSettings: Sendable, Equatable {
    public var certificateFile: String
    public var keyFile: String
    /// Also serve plain HTTP on the port (the first byte tells them apart). Off: a plain request gets a 400
    /// that names https, and the socket closes.
    public var allowPlaintext: Bool
    public init(certificateFile: String, keyFile: String, allowPlaintext: Bool = false) {
        self.certificateFile = certificateFile; self.keyFile = keyFile; self.allowPlaintext = allowPlaintext
    }
}

/// What an `HTTPServer` hands to the layer above it, on the server's loop thread.
protocol HTTPServerDelegate: AnyObject {
    /// The response to an HTTP request that is not a WebSocket upgrade.
    func respond(to request: HTTPRequest) -> HTTPResponse
    /// A text message on WebSocket `socket`.
    func webSocket(_ socket: Int, received text: String)
    /// The client of WebSocket `socket` sent a close frame (a deliberate leave, unlike a drop).
    func webSocketLeft(_ socket: Int)
    /// WebSocket `socket` is gone (closed by either side, or dropped).
    func webSocketClosed(_ socket: Int)
    /// The server's periodic tick (every 250 ms), before socket deadlines are enforced.
    func tick(now: Instant)
}

/// HTTP/1.1 and WebSocket on one port (plain, or TLS), driven by one epoll thread (no thread per connection): accepts,
/// request framing, upgrades on one path, origin checks, pings, socket deadlines and output caps. Knows nothing of
/// the routes or messages it carries: requests and WebSocket text go to its delegate. Sockets are integer ids.
final class HTTPServer: @unchecked Sendable {
    /// What the server needs to listen.
    struct Configuration {
        var host: String
        var port: UInt16
        /// The path WebSocket upgrades go to (other paths are plain HTTP requests).
        var webSocketPath: String
        var pingInterval: Duration
        var connectionLimits: TCPServerLimits
        var timeouts: SocketTimeouts
        /// Cross-origin WebSocket upgrades must name one of these (`scheme://host[:port]`, case-insensitive); a
        /// same-origin upgrade (the Origin's host and port are the request's Host) always passes. Empty: any origin.
        var allowedOrigins: [String]
        var tls: ServerTLSSettings?
    }

    let configuration: Configuration
    weak var delegate: (any HTTPServerDelegate)?
    private let loop: TCPEventLoop
    private var sockets: [Int: ServerSocket] = [:]
    private var nextSocketId = 1
    private let stateLock = Lock()
    private var boundPort: UInt16 = 0
    private var started = false
    private var stopped = false
    private var tlsCredentials: TLSServerCredentials?

    init(_ configuration: Configuration) {
        self.configuration = configuration
        loop = TCPEventLoop(name: "ot-server")
    }

    deinit { if !stopped { loop.stop() } }

    /// Binds and starts serving; returns the bound port.
    func start() throws -> UInt16 {
        try stateLock.withLock {
            guard !started else { throw OTError(.illegalState, "server already started") }
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

    /// Reads the TLS certificate and key files again: new connections get the new certificate, open ones carry on.
    func reloadTLS() throws {
        guard let c = stateLock.withLock({ tlsCredentials }) else { throw OTError(.illegalState, "the server has no TLS to reload") }
        try c.reload()
        Log.info("server", "TLS certificate reloaded from \(c.context.certificateFile)")
    }

    /// Closes every socket and ends the server's thread.
    func stop() {
        let doStop = stateLock.withLock { () -> Bool in let s = !stopped; stopped = true; return s }
        if doStop { loop.stop() }
    }

    /// The bound port (0 before `start`).
    var port: UInt16 { stateLock.withLock { boundPort } }

    /// Open sockets (HTTP and WebSocket).
    var openSockets: Int { (try? onLoop { [self] in sockets.count }) ?? 0 }

    /// Runs `body` on the loop thread later.
    func execute(_ body: @escaping () -> Void) { loop.execute(body) }

    /// Runs `body` on the loop thread and waits for its result (directly when already there, or before start / after stop).
    func onLoop<T>(_ body: @escaping () throws -> T) throws -> T {
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

    // MARK: loop thread: what the layer above asks

    /// Queues bytes (already framed) on a socket, if it is still open.
    func send(_ bytes: [UInt8], to socket: Int) { sockets[socket]?.conn.send(bytes) }

    /// Sends one WebSocket text message.
    func sendText(_ text: String, to socket: Int) { sockets[socket]?.sendText(text) }

    /// Closes a WebSocket with a close frame once what is queued is written.
    func closeWebSocket(_ socket: Int, code: UInt16) { sockets[socket]?.closeWebSocket(code: code) }

    /// The WebSocket's client joined: only the ping and silence rules apply from now on, and the listener never evicts
    /// the socket to make room.
    func markJoined(_ socket: Int) { sockets[socket]?.joined() }

    // MARK: loop thread: sockets

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
            delegate?.tick(now: now)
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
        if s.ws != nil { delegate?.webSocketClosed(s.id) }
    }

    func leave(_ s: ServerSocket) { delegate?.webSocketLeft(s.id) }

    func received(_ s: ServerSocket, _ text: String) { delegate?.webSocket(s.id, received: text) }

    func handle(_ s: ServerSocket, _ req: HTTPRequest, now: Instant) {
        let close = req.headers["Connection"]?.lowercased() == "close"
        guard req.path == configuration.webSocketPath else {
            if let delegate { s.respond(delegate.respond(to: req), close: close, now: now) }
            return
        }
        if !configuration.allowedOrigins.isEmpty, let origin = req.headers["Origin"],
           !Self.isSameOrigin(origin, host: req.headers["Host"]),
           !configuration.allowedOrigins.contains(where: { $0.lowercased() == origin.lowercased() }) {
            s.respond(.jsonError(403, "origin not allowed"), close: true, now: now)
            return
        }
        do {
            let resp = try WebSocketHandshake.serverResponse(to: req)
            s.conn.send(resp.serialized())
            s.upgrade(now: now)
        } catch {
            s.respond(.jsonError(400, "\(error)"), close: true, now: now)
        }
    }

    /// Whether `origin` (`scheme://host[:port]`) names the server the request was sent to (`host`, the Host header:
    /// `host[:port]`): same host and port, compared case-insensitively, a missing port being the scheme's default
    /// (80 for http, 443 for https). A browser page served by this server sends such an Origin.
    static func isSameOrigin(_ origin: String, host: String?) -> Bool {
        guard let host, let colon = origin.firstIndex(of: ":"), origin[colon...].hasPrefix("://") else { return false }
        let scheme = origin[..<colon].lowercased()
        let defaultPort: String
        switch scheme {
        case "http": defaultPort = "80"
        case "https": defaultPort = "443"
        default: return false
        }
        func normalized(_ authority: Substring) -> String? {
            let a = authority.lowercased()
            guard !a.isEmpty, !a.contains("/"), !a.contains("@") else { return nil }
            // An IPv6 literal is bracketed; its port follows the bracket.
            let hostEnd = a.hasPrefix("[") ? a.firstIndex(of: "]").map { a.index(after: $0) } : a.lastIndex(of: ":")
            guard let hostEnd else { return a.hasPrefix("[") ? nil : a + ":" + defaultPort }
            let portPart = a[hostEnd...]
            if portPart.isEmpty { return a + ":" + defaultPort }
            guard portPart.first == ":", portPart.count > 1, portPart.dropFirst().allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return nil }
            return a
        }
        guard let o = normalized(origin[origin.index(colon, offsetBy: 3)...]), let h = normalized(Substring(host)) else { return false }
        return o == h
    }
}

extension HTTPResponse {
    /// An error answer: `{"code": status, "message": ...}` (the REST API's error body, also for transport errors).
    static func jsonError(_ status: Int, _ message: String) -> HTTPResponse {
        .json(status, JSONValue.object(["code": .int(Int64(status)), "message": .string(message)]).serialized())
    }
}

/// Carries a result from the loop thread back to a waiting caller.
private final class ResultSlot<T>: @unchecked Sendable { var result: Result<T, Error>? }
