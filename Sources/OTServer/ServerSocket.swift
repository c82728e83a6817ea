import OTBase
import OTTransport
import OTWire

/// How long a server socket may take at each step of its life (docs/protocol.md, "Limits").
public struct SocketTimeouts: Sendable, Equatable {
    /// A whole HTTP request (head and body), counted from the accept or from the request's first byte.
    public var request: Duration = .seconds(10)
    /// A keep-alive connection with no request under way.
    public var keepAliveIdle: Duration = .seconds(15)
    /// From the WebSocket upgrade to an accepted `connect`.
    public var webSocketConnect: Duration = .seconds(10)
    /// A socket being closed whose peer does not take the last bytes (a close frame, an error response).
    public var closing: Duration = .seconds(5)
    public init() {}
}

/// Where a server socket is, and so which deadline applies. Sans-IO: the server's tick passes `now`.
enum SocketPhase: Equatable {
    /// An HTTP request is due or under way.
    case request(since: Instant)
    /// Keep-alive: the last response is out, nothing is under way.
    case idle(since: Instant)
    /// Upgraded to WebSocket; the client has not connected to a session yet.
    case awaitingConnect(since: Instant)
    /// A session member: the ping and silence rules apply instead.
    case connected
    /// Closing once the last bytes are out.
    case closing(since: Instant)

    /// When the socket is closed if it is still in this phase.
    func deadline(_ t: SocketTimeouts) -> Instant? {
        switch self {
        case .request(let s): s + t.request
        case .idle(let s): s + t.keepAliveIdle
        case .awaitingConnect(let s): s + t.webSocketConnect
        case .connected: nil
        case .closing(let s): s + t.closing
        }
    }
}

/// One accepted socket: HTTP until an upgrade, then WebSocket. Loop thread only.
final class ServerSocket: TCPConnectionDelegate {
    let id: Int
    let conn: TCPConnection
    unowned let server: HTTPServer
    var http = HTTPParser(kind: .request, maxBodyBytes: 256 * 1024)
    var ws: WebSocketReader?
    var phase: SocketPhase
    var lastHeard: Instant
    var lastPing: Instant
    /// The payload of the latest ping not answered yet: one pong answers it once the queue is empty (RFC 6455
    /// §5.5.3 lets a pong answer only the latest ping), so a ping flood queues nothing.
    private var pongDue: [UInt8]?

    var closing: Bool { if case .closing = phase { true } else { false } }

    init(id: Int, conn: TCPConnection, server: HTTPServer, now: Instant) {
        self.id = id; self.conn = conn; self.server = server; lastHeard = now; lastPing = now
        phase = .request(since: now)
    }

    func upgrade(now: Instant) {
        ws = WebSocketReader(requireMasked: true, maxMessageBytes: 64 * 1024)
        phase = .awaitingConnect(since: now)
        let rest = http.takeLeftover()
        if !rest.isEmpty { rest.withUnsafeBytes { feedWebSocket($0) } }
    }

    /// The client joined a session: from now on only the ping and silence rules apply, and the listener never
    /// evicts this socket to make room.
    func joined() {
        guard case .awaitingConnect = phase else { return }
        phase = .connected
        conn.markEstablished()
    }

    func respond(_ r: HTTPResponse, close: Bool, now: Instant) {
        var r = r
        if close { r.headers.set("Connection", "close") }
        conn.send(r.serialized())
        if close {
            phase = .closing(since: now)
            conn.closeWhenFlushed()
        } else if ws == nil {
            phase = http.hasBufferedBytes ? .request(since: now) : .idle(since: now)
        }
    }

    func sendText(_ s: String) { conn.send(WebSocketFrame(opcode: .text, payload: Array(s.utf8)).encoded()) }

    func closeWebSocket(code: UInt16, now: Instant = MonotonicClock.now()) {
        guard !closing else { return }
        phase = .closing(since: now)
        conn.send(WebSocketFrame.close(code: code).encoded())
        conn.closeWhenFlushed()
    }

    /// Closes the socket if its phase's deadline has passed; true when it did.
    func enforceDeadline(now: Instant, _ timeouts: SocketTimeouts) -> Bool {
        guard let d = phase.deadline(timeouts), now >= d else { return false }
        switch phase {
        case .awaitingConnect:
            // Policy violation (1008): no session joined in time. Closed for good if the close frame is not taken.
            closeWebSocket(code: 1008, now: now)
            return false
        default:
            conn.close(error: OTError(.connectionTimedOut, "socket deadline passed"))
            return true
        }
    }

    func tcpConnected(_ conn: TCPConnection) {}

    func tcpReceived(_ conn: TCPConnection, _ bytes: UnsafeRawBufferPointer) {
        guard !closing else { return }
        if ws != nil { feedWebSocket(bytes); return }
        let now = MonotonicClock.now()
        if case .idle = phase { phase = .request(since: now) }
        http.append(bytes)
        while ws == nil && !closing {
            do {
                guard let req = try http.nextRequest() else { return }
                server.handle(self, req, now: now)
            } catch {
                let status = (error as? HTTPParseError)?.status ?? 400
                respond(.jsonError(status, "\(error)"), close: true, now: now)
                return
            }
        }
    }

    private func feedWebSocket(_ bytes: UnsafeRawBufferPointer) {
        guard ws != nil else { return }
        lastHeard = MonotonicClock.now()
        ws?.append(bytes)
        defer { answerPing() }
        while !closing {
            let m: WebSocketMessage?
            do { m = try ws?.next() } catch {
                closeWebSocket(code: (error as? WebSocketError)?.closeCode ?? 1002)
                return
            }
            guard let m else { return }
            switch m {
            case .text(let t): server.received(self, t)
            case .binary: closeWebSocket(code: 1003)
            case .ping(let p): pongDue = p
            case .pong: break
            case .close:
                // A close frame is a deliberate leave, unlike a socket that just drops.
                server.leave(self)
                closeWebSocket(code: 1000)
            }
        }
    }

    /// Sends the pong that is due once nothing else is queued (so pongs never pile up for a client that does not read).
    private func answerPing() {
        guard let p = pongDue, !closing, conn.pendingBytes == 0 else { return }
        pongDue = nil
        conn.send(WebSocketFrame(opcode: .pong, payload: p).encoded())
    }

    func tcpDrained(_ conn: TCPConnection) { answerPing() }

    func tcpClosed(_ conn: TCPConnection, error: OTError?) { server.socketClosed(self) }
}
