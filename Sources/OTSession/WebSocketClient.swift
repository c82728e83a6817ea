import OTBase
import OTTransport
import OTWire

/// Where a WebSocket client connects: `ws://host:port/path` or `http://host:port` (path defaults to `/v2/signaling`).
public struct ServerEndpoint: Sendable, Equatable {
    public var host: String
    public var port: UInt16
    public var path: String

    public init(host: String, port: UInt16, path: String = "/v2/signaling") { self.host = host; self.port = port; self.path = path }

    /// Parses a server URL; throws 1011 on anything else than ws/http with an IPv4 host or localhost.
    public static func parse(_ url: String) throws -> ServerEndpoint {
        var rest = Substring(url)
        var defaultPort: UInt16 = 80
        if rest.hasPrefix("ws://") { rest = rest.dropFirst(5) } else if rest.hasPrefix("http://") { rest = rest.dropFirst(7) } else {
            throw OTError(.invalidParameter, "server URL must start with ws:// or http:// (TLS is not supported): \(url)")
        }
        var path = "/v2/signaling"
        if let slash = rest.firstIndex(of: "/") {
            let p = String(rest[slash...])
            if p != "/" { path = p }
            rest = rest[..<slash]
        }
        var host = String(rest)
        if let colon = rest.lastIndex(of: ":") {
            guard let p = UInt16(rest[rest.index(after: colon)...]), p > 0 else { throw OTError(.invalidParameter, "bad port in \(url)") }
            defaultPort = p
            host = String(rest[..<colon])
        }
        guard !host.isEmpty else { throw OTError(.invalidParameter, "no host in \(url)") }
        return ServerEndpoint(host: host, port: defaultPort, path: path)
    }
}

/// A WebSocket client connection on the shared IO loop (no thread of its own).
/// Callbacks run on the loop thread; `send`/`close` may be called from any thread.
public final class WebSocketClient: TCPConnectionDelegate, @unchecked Sendable {
    public typealias Handler = (Event) -> Void
    public enum Event {
        case open
        case text(String)
        /// The connection ended; nil error for an orderly close.
        case closed(OTError?)
    }

    public let endpoint: ServerEndpoint
    private let loop: TCPEventLoop
    private let handler: Handler
    private let pingInterval: Duration
    private var conn: TCPConnection?
    private var http = HTTPParser(kind: .response)
    private var reader = WebSocketReader(requireMasked: false, maxMessageBytes: 1 << 20)
    private var key = ""
    private var open = false
    private var finished = false
    private var lastHeard = Instant.zero
    private var pingTimer: Int?

    public init(endpoint: ServerEndpoint, loop: TCPEventLoop = .shared, pingInterval: Duration = .seconds(10), handler: @escaping Handler) {
        self.endpoint = endpoint; self.loop = loop; self.pingInterval = pingInterval; self.handler = handler
    }

    /// Starts connecting.
    public func start() {
        loop.execute { [self] in
            guard !finished else { return }
            key = WebSocketHandshake.makeKey()
            guard let c = loop.connect(host: endpoint.host, port: endpoint.port, delegate: self) else {
                finish(OTError(.connectionFailed, "cannot connect to \(endpoint.host):\(endpoint.port)"))
                return
            }
            c.context = self
            conn = c
        }
    }

    /// Sends a text message (dropped when not open).
    public func send(_ text: String) {
        let frame = WebSocketFrame(opcode: .text, payload: Array(text.utf8))
        loop.execute { [self] in
            guard open, let c = conn else { return }
            c.send(frame.encoded(maskKey: Self.maskKey()))
        }
    }

    /// Closes: a close frame if open, then the socket. `.closed(nil)` follows.
    public func close() {
        loop.execute { [self] in
            guard let c = conn, !finished else { return }
            if open { c.send(WebSocketFrame.close(code: 1000).encoded(maskKey: Self.maskKey())) }
            c.closeWhenFlushed()
        }
    }

    /// Drops the socket without a close frame (as a network failure would).
    public func abort() {
        loop.execute { [self] in conn?.close(error: OTError(.connectionDropped, "aborted")) }
    }

    private static func maskKey() -> (UInt8, UInt8, UInt8, UInt8) {
        let r = UInt32.random(in: .min ... .max)
        return (UInt8(truncatingIfNeeded: r), UInt8(truncatingIfNeeded: r >> 8), UInt8(truncatingIfNeeded: r >> 16), UInt8(truncatingIfNeeded: r >> 24))
    }

    private func finish(_ error: OTError?) {
        guard !finished else { return }
        finished = true
        open = false
        if let t = pingTimer { loop.cancelTimer(t); pingTimer = nil }
        conn?.context = nil
        conn = nil
        handler(.closed(error))
    }

    private func schedulePing() {
        pingTimer = loop.schedule(after: pingInterval) { [weak self] in
            guard let self, open, let c = conn else { return }
            if MonotonicClock.now() - lastHeard > pingInterval * 3 {
                c.close(error: OTError(.connectionDropped, "server silent"))
                return
            }
            c.send(WebSocketFrame(opcode: .ping, payload: []).encoded(maskKey: Self.maskKey()))
            schedulePing()
        }
    }

    public func tcpConnected(_ conn: TCPConnection) {
        let host = "\(endpoint.host):\(endpoint.port)"
        conn.send(WebSocketHandshake.clientRequest(host: host, path: endpoint.path, key: key).serialized())
    }

    public func tcpReceived(_ conn: TCPConnection, _ bytes: UnsafeRawBufferPointer) {
        lastHeard = MonotonicClock.now()
        if !open {
            http.append(bytes)
            do {
                guard let resp = try http.nextResponse() else { return }
                try WebSocketHandshake.validate(response: resp, key: key)
            } catch {
                conn.close(error: OTError(.connectionFailed, "WebSocket handshake failed: \(error)"))
                return
            }
            open = true
            reader.append(http.takeLeftover())
            schedulePing()
            handler(.open)
        } else {
            reader.append(bytes)
        }
        while open {
            let m: WebSocketMessage?
            do { m = try reader.next() } catch {
                conn.close(error: OTError(.connectionDropped, "WebSocket protocol error: \(error)"))
                return
            }
            guard let m else { return }
            switch m {
            case .text(let t): handler(.text(t))
            case .binary: break
            case .ping(let p): conn.send(WebSocketFrame(opcode: .pong, payload: p).encoded(maskKey: Self.maskKey()))
            case .pong: break
            case .close:
                open = false
                conn.closeWhenFlushed()
            }
        }
    }

    public func tcpClosed(_ conn: TCPConnection, error: OTError?) {
        if !open && error == nil && http.leftover.isEmpty && lastHeard == .zero {
            finish(OTError(.connectionFailed, "the server closed the connection"))
        } else {
            finish(error)
        }
    }
}
