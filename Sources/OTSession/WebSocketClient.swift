import OTBase
import OTTransport
import OTWire

/// Where a WebSocket client connects: `ws://` / `wss://` `host[:port][/path]`, or `http://` / `https://` `host[:port]`
/// (path `/v2/signaling`). The host is a DNS name, an IPv4 address or a bracketed IPv6 address; the port defaults to
/// 80, or 443 with TLS.
public struct ServerEndpoint: Sendable, Equatable {
    public var host: String
    public var port: UInt16
    public var path: String
    /// TLS (`wss://`, `https://`): the server's certificate is verified and never skipped.
    public var secure: Bool

    public init(host: String, port: UInt16, path: String = "/v2/signaling", secure: Bool = false) {
        self.host = host; self.port = port; self.path = path; self.secure = secure
    }

    /// `host:port` as a Host header writes it (IPv6 in brackets).
    public var authority: String { HostPort.authority(host, port) }

    /// Parses a server URL; throws 1011 for another scheme, a bad host or port.
    public static func parse(_ url: String) throws -> ServerEndpoint {
        func bad(_ why: String) -> OTError { OTError(.invalidParameter, "server URL \"\(url.prefix(200))\": \(why)") }
        let schemes: [(String, Bool)] = [("ws://", false), ("http://", false), ("wss://", true), ("https://", true)]
        guard let (scheme, secure) = schemes.first(where: { url.lowercased().hasPrefix($0.0) }) else {
            throw bad("it must start with ws://, wss://, http:// or https://")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        var path = "/v2/signaling"
        if let slash = rest.firstIndex(of: "/") {
            let p = String(rest[slash...])
            if p != "/" { path = p }
            rest = rest[..<slash]
        }
        guard !rest.contains("@") else { throw bad("credentials in a server URL are not supported") }
        let (host, port) = try HostPort.parse(rest, defaultPort: secure ? 443 : 80, context: bad)
        return ServerEndpoint(host: host, port: port, path: path, secure: secure)
    }
}

/// How a WebSocket client reaches its server: TLS trust (for `wss://`) and an HTTP CONNECT proxy.
public struct WebSocketTransport: Sendable {
    /// The trust for `wss://` servers (nil: the system store).
    public var tls: TLSClientContext?
    /// Signaling goes through this proxy's CONNECT tunnel.
    public var proxy: ProxyEndpoint?
    public init(tls: TLSClientContext? = nil, proxy: ProxyEndpoint? = nil) { self.tls = tls; self.proxy = proxy }
}

/// A WebSocket client connection on the shared IO loop (no thread of its own).
/// Callbacks run on the loop thread; `send`/`close` may be called from any thread.
public final class WebSocketClient: TCPConnectionDelegate, @unchecked Sendable {
    public typealias Handler = (Event) -> Void
    public enum Event: Sendable {
        case open
        case text(String)
        /// The connection ended; nil error for an orderly close.
        case closed(OTError?)
    }

    public let endpoint: ServerEndpoint
    private let transport: WebSocketTransport
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
    /// Addresses of the server (or proxy) not tried yet, and the last connect failure.
    private var untried: [TransportAddress] = []
    private var lastFailure: OTError?

    public init(endpoint: ServerEndpoint, transport: WebSocketTransport = WebSocketTransport(), loop: TCPEventLoop = .shared,
                pingInterval: Duration = .seconds(10), handler: @escaping Handler) {
        self.endpoint = endpoint; self.transport = transport; self.loop = loop; self.pingInterval = pingInterval; self.handler = handler
    }

    /// Starts connecting: resolves the server's (or the proxy's) name on a worker thread, then tries its addresses in
    /// the resolver's order until one connects.
    public func start() {
        let (host, port) = transport.proxy.map { ($0.host, $0.port) } ?? (endpoint.host, endpoint.port)
        HostResolver.resolve(host, port: port) { [self] result in
            loop.execute { [self] in
                guard !finished else { return }
                switch result {
                case .success(let addresses):
                    untried = addresses
                    key = WebSocketHandshake.makeKey()
                    connectNext()
                case .failure(let e):
                    finish(e)
                }
            }
        }
    }

    /// Loop thread: connects to the next address, through the proxy's tunnel and TLS as configured.
    private func connectNext() {
        guard !finished else { return }
        guard !untried.isEmpty else {
            finish(lastFailure ?? OTError(.connectionFailed, "cannot connect to \(endpoint.authority)"))
            return
        }
        let address = untried.removeFirst()
        var layers: [StreamLayer] = []
        if let p = transport.proxy { layers.append(HTTPConnectTunnel(host: endpoint.host, port: endpoint.port, credentials: p.credentials)) }
        if endpoint.secure {
            do { layers.append(try TLSStream(client: try transport.tls ?? TLSClientContext.systemStore(), host: endpoint.host)) } catch {
                finish(error as? OTError ?? OTError(.connectionFailed, "\(error)"))
                return
            }
        }
        http = HTTPParser(kind: .response)
        lastHeard = .zero
        guard let c = loop.connect(to: address, layers: layers, delegate: self) else {
            lastFailure = OTError(.connectionFailed, "cannot connect to \(address)")
            connectNext()
            return
        }
        c.context = self
        conn = c
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
            guard !finished else { return }
            // Still resolving the name: nothing to close.
            guard let c = conn else { finish(nil); return }
            if open { c.send(WebSocketFrame.close(code: 1000).encoded(maskKey: Self.maskKey())) }
            c.closeWhenFlushed()
        }
    }

    /// Drops the socket without a close frame (as a network failure would).
    public func abort() {
        loop.execute { [self] in
            if let c = conn { c.close(error: OTError(.connectionDropped, "aborted")) } else { finish(OTError(.connectionDropped, "aborted")) }
        }
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
        untried = []
        conn.send(WebSocketHandshake.clientRequest(host: endpoint.authority, path: endpoint.path, key: key).serialized())
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
        guard conn === self.conn else { return }
        // The socket did not connect: the next address, if any (another family, another server of the name).
        if let error, error.code == .connectionFailed, !untried.isEmpty, lastHeard == .zero, !open {
            lastFailure = error
            self.conn = nil
            connectNext()
            return
        }
        if !open && error == nil && http.leftover.isEmpty && lastHeard == .zero {
            finish(OTError(.connectionFailed, "the server closed the connection"))
        } else {
            finish(error)
        }
    }
}
