#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import FoundationEssentials
import COTShims
import CEpoll
import OTBase
import OTWire

/// Receives a TCP connection's events, always on its loop's thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// An outgoing connect completed.
    func tcpConnected(_ conn: TCPConnection)
    /// Bytes arrived (valid only during the call).
    func tcpReceived(_ conn: TCPConnection, _ bytes: UnsafeRawBufferPointer)
    /// The connection closed; `error` is nil for an orderly close.
    func tcpClosed(_ conn: TCPConnection, error: OTError?)
    /// Everything queued has been written (called after a write empties a non-empty queue).
    func tcpDrained(_ conn: TCPConnection)
}

extension TCPConnectionDelegate {
    public func tcpDrained(_ conn: TCPConnection) {}
}

/// One non-blocking TCP socket owned by a `TCPEventLoop`. Use it only on the loop's thread
/// (from delegate callbacks or blocks given to `loop.execute`). With stream layers (TLS, a CONNECT tunnel) the
/// delegate sees only application bytes: `send` takes them and `tcpReceived` gives them, and an outgoing
/// connection is `tcpConnected` once every layer is open.
public final class TCPConnection: @unchecked Sendable {
    public let loop: TCPEventLoop
    public let fd: Int32
    /// The loop's number for this connection (never reused, unlike `fd`).
    public let serial: Int
    /// The peer's address (IPv4 or IPv6, without port), for accepted connections.
    public let peerAddress: String?
    public weak var delegate: TCPConnectionDelegate?
    /// Any object the owner wants to hang on the connection.
    public var context: AnyObject?
    fileprivate var outbox: [UInt8] = []
    fileprivate var outboxOffset = 0
    fileprivate var connecting: Bool
    /// The epoll events currently asked for.
    fileprivate var interest: UInt32 = 0
    fileprivate var dirty = false
    public fileprivate(set) var isClosed = false
    /// Close once the outbox has drained.
    fileprivate var closeAfterFlush = false
    /// The listener that accepted it (nil for outgoing connections): its limits apply.
    fileprivate let listener: Listener?
    /// Not read from until its queue drains (backpressure).
    public fileprivate(set) var readPaused = false
    /// Output came while over `maxPendingBytesPerConnection`: closed at the end of the iteration.
    fileprivate var overflowed = false
    /// TLS and tunnels between the socket and the delegate (nil: plain bytes).
    fileprivate var stack: StreamStack?
    /// Accepted on a TLS listener, nothing read yet: the first byte says whether the peer speaks TLS.
    fileprivate var sniffing = false
    /// The stack's layers have all opened (reported to the delegate of an outgoing connection).
    fileprivate var layersOpen = false
    /// Refused by the loop itself (plain bytes on a TLS port): nothing more reaches the delegate.
    fileprivate var refused = false
    /// The TLS layer of the connection, if any (for its negotiated version and cipher).
    public fileprivate(set) var tls: TLSStream?

    fileprivate init(loop: TCPEventLoop, fd: Int32, serial: Int, connecting: Bool, listener: Listener? = nil, peerAddress: String? = nil) {
        self.loop = loop; self.fd = fd; self.serial = serial; self.connecting = connecting; self.listener = listener
        self.peerAddress = peerAddress
    }

    /// Bytes queued but not yet written to the socket.
    public var pendingBytes: Int { outbox.count - outboxOffset }

    /// Queues bytes; the loop writes every connection's queue once per iteration (so many small
    /// messages to one socket cost one system call). On an accepted connection whose queue is already over
    /// its listener's `maxPendingBytesPerConnection`, the bytes are dropped and the connection is closed at the
    /// end of the iteration (`tcpClosed` with `connectionDropped`).
    public func send(_ bytes: [UInt8]) {
        guard !isClosed, !closeAfterFlush, !overflowed, !bytes.isEmpty else { return }
        if let stack {
            do { try stack.write(bytes) } catch {
                loop.closeConnection(self, error: error as? OTError ?? OTError(.connectionDropped, "\(error)"))
                return
            }
            queue(stack.takeOutgoing())
            return
        }
        queue(bytes)
    }

    /// Queues bytes for the socket as they are (already through the stack).
    fileprivate func queue(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, !isClosed, !overflowed else { return }
        if let l = listener {
            if pendingBytes > l.limits.maxPendingBytesPerConnection {
                overflowed = true
                if !dirty { dirty = true; loop.markDirty(self) }
                return
            }
            l.queuedBytes += bytes.count
        }
        outbox.append(contentsOf: bytes)
        if !dirty { dirty = true; loop.markDirty(self) }
    }

    /// Marks an accepted connection as proven (e.g. an authenticated client): the listener never evicts it to make
    /// room for newcomers. Loop thread only.
    public func markEstablished() { listener?.admission.establish(serial) }

    /// Closes after queued bytes are written (after a TLS close_notify on a TLS connection).
    public func closeWhenFlushed() {
        guard !isClosed, !closeAfterFlush else { return }
        if let stack, !connecting {
            stack.shutdown()
            queue(stack.takeOutgoing())
        }
        if pendingBytes == 0 && !connecting { loop.closeConnection(self, error: nil) } else { closeAfterFlush = true }
    }

    /// Closes now; the delegate gets `tcpClosed` with `error`.
    public func close(error: OTError? = nil) { loop.closeConnection(self, error: error) }

    fileprivate func flush() {
        let hadPending = pendingBytes > 0
        while outboxOffset < outbox.count {
            let n = outbox.withUnsafeBytes { buf -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return Glibc.send(fd, base + outboxOffset, buf.count - outboxOffset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { outboxOffset += n; listener?.queuedBytes -= n; continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            loop.closeConnection(self, error: OTError(.connectionDropped, "send failed: errno \(errno)"))
            return
        }
        if outboxOffset == outbox.count { outbox.removeAll(keepingCapacity: outbox.capacity <= 1 << 16); outboxOffset = 0 }
        else if outboxOffset > 1 << 16 { outbox.removeFirst(outboxOffset); outboxOffset = 0 }
        if closeAfterFlush && pendingBytes == 0 { loop.closeConnection(self, error: nil); return }
        if readPaused, let l = listener, pendingBytes <= l.limits.readPauseBytes / 2 { readPaused = false }
        loop.updateInterest(self)
        if hadPending && pendingBytes == 0 && !closeAfterFlush { delegate?.tcpDrained(self) }
    }
}

/// A listening socket and the state of its limits. Loop thread only.
fileprivate final class Listener {
    let fd: Int32
    let onAccept: TCPEventLoop.AcceptHandler
    let limits: TCPServerLimits
    var admission: ConnectionAdmission
    /// Its open connections by serial.
    var conns: [Int: TCPConnection] = [:]
    /// Bytes queued on all of its connections.
    var queuedBytes = 0
    /// Accepting is paused after running out of descriptors with nothing to evict.
    var paused = false
    /// When running out of descriptors was last logged (at most once a minute).
    var exhaustionLogged: Instant?
    /// TLS on this port (the first byte of each connection tells TLS from plain).
    let tls: TCPEventLoop.TLSListening?
    init(fd: Int32, limits: TCPServerLimits, tls: TCPEventLoop.TLSListening?, onAccept: @escaping TCPEventLoop.AcceptHandler) {
        self.fd = fd; self.limits = limits; self.tls = tls; self.onAccept = onAccept
        admission = ConnectionAdmission(maxConnections: limits.effectiveMaxConnections, maxPerAddress: limits.maxConnectionsPerAddress)
    }
}

/// One thread waiting on epoll for many non-blocking TCP sockets, with timers and
/// cross-thread `execute`. No thread per connection.
public final class TCPEventLoop: @unchecked Sendable {
    public typealias AcceptHandler = (TCPConnection) -> Void

    /// TLS on a listening port: every connection whose first byte starts a TLS handshake record (0x16) gets a TLS
    /// server layer with the credentials' current context; others are plain, which the port refuses unless
    /// `allowPlaintext` (they get an HTTP 400 naming https and are closed).
    public struct TLSListening: Sendable {
        public var credentials: TLSServerCredentials
        public var allowPlaintext: Bool
        public init(credentials: TLSServerCredentials, allowPlaintext: Bool = false) {
            self.credentials = credentials; self.allowPlaintext = allowPlaintext
        }
    }

    private let epfd: Int32
    private let wakeFd: Int32
    private let lock = Lock()
    private var pending: [() -> Void] = []
    private var running = true
    private var stopRequested = false
    private let finished = DispatchSemaphore(value: 0)
    // Loop-thread state.
    private var connections: [Int32: TCPConnection] = [:]
    private var listeners: [Int32: Listener] = [:]
    private var nextSerial = 1
    private var timers: [(deadline: Instant, id: Int, block: () -> Void)] = []
    private var nextTimerId = 1
    private var threadId: pthread_t?
    private var dirty: [TCPConnection] = []

    /// A loop shared by all clients of the process.
    public static let shared = TCPEventLoop(name: "otsession.io")

    public init(name: String) {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeFd))
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFd, &ev)
        if !OSThread.start(name: name, { [unowned self] in self.run() }) {
            Log.error("tcp", "could not start the IO thread \(name)")
        }
    }

    /// Whether the caller is on this loop's thread.
    public var inLoop: Bool { lock.withLock { threadId }.map { pthread_equal($0, pthread_self()) != 0 } ?? false }

    /// Runs `block` on the loop thread (soon, in submission order).
    public func execute(_ block: @escaping () -> Void) {
        lock.withLock { pending.append(block) }
        var one: UInt64 = 1
        _ = write(wakeFd, &one, 8)
    }

    /// Runs `block` on the loop thread after `delay`; returns an id for `cancelTimer`. Loop thread only.
    @discardableResult
    public func schedule(after delay: Duration, _ block: @escaping () -> Void) -> Int {
        let id = nextTimerId; nextTimerId += 1
        timers.append((MonotonicClock.now() + delay, id, block))
        return id
    }

    /// Cancels a timer. Loop thread only.
    public func cancelTimer(_ id: Int) { timers.removeAll { $0.id == id } }

    /// Listens on `host:port` (an IPv4 or IPv6 address, or `localhost`; port 0 picks one); returns the bound port.
    /// Any thread. Accepted connections are subject to `limits` (caps, eviction of pending sockets, output caps,
    /// backpressure); with `tls`, the port speaks TLS.
    public func listen(host: String, port: UInt16, backlog: Int32 = 1024, limits: TCPServerLimits = TCPServerLimits(),
                       tls: TLSListening? = nil, onAccept: @escaping AcceptHandler) throws -> UInt16 {
        guard let ip = host == "localhost" ? .v4(0x7F00_0001) : IPAddress(host) else {
            throw OTError(.invalidParameter, "cannot listen on \(host): not an IP address")
        }
        let fd = socket(ip.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw OTError(.internalError, "socket failed: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if ip.isIPv6 {
            // `::` takes IPv4 too (its peers show as ::ffff:a.b.c.d); another IPv6 address only itself.
            var v6only: Int32 = ip == .v6(0, 0) ? 0 : 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &v6only, socklen_t(MemoryLayout<Int32>.size))
        }
        let rc = UDPDriver.withSockaddr(TransportAddress(ip: ip, port: port)) { bind(fd, $0, $1) }
        guard rc == 0, Glibc.listen(fd, backlog) == 0 else {
            let e = errno; Glibc.close(fd)
            throw OTError(.internalError, "cannot listen on \(host):\(port): errno \(e)")
        }
        var storage = sockaddr_storage(); var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) == 0 ? UDPDriver.address(from: $0) : nil }
        }
        execute { [self] in
            listeners[fd] = Listener(fd: fd, limits: limits, tls: tls, onAccept: onAccept)
            var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
        }
        return bound?.port ?? 0
    }

    /// Stops listening on every socket. Any thread.
    public func closeListeners() {
        execute { [self] in
            for fd in listeners.keys { _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil); Glibc.close(fd) }
            listeners = [:]
        }
    }

    /// Starts a non-blocking connect to `address` (IPv4 or IPv6) through `layers` (e.g. a CONNECT tunnel then TLS,
    /// started in order once the socket is up); the delegate gets `tcpConnected` once every layer is open, or
    /// `tcpClosed` with the error (1006 when the socket cannot connect). Loop thread only.
    public func connect(to address: TransportAddress, layers: [StreamLayer] = [], delegate: TCPConnectionDelegate) -> TCPConnection? {
        let fd = socket(address.ip.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let conn = TCPConnection(loop: self, fd: fd, serial: takeSerial(), connecting: true)
        conn.delegate = delegate
        if !layers.isEmpty {
            conn.stack = StreamStack(layers)
            conn.tls = layers.lazy.compactMap { $0 as? TLSStream }.first
        }
        connections[fd] = conn
        let rc = UDPDriver.withSockaddr(address) { Glibc.connect(fd, $0, $1) }
        if rc != 0 && errno != EINPROGRESS {
            let e = errno
            var ev = epoll_event(events: 0, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
            // Report asynchronously so the caller sees one path.
            schedule(after: .zero) { [self] in closeConnection(conn, error: OTError(.connectionFailed, "connect to \(address) failed: errno \(e)")) }
            return conn
        }
        conn.interest = EPOLLOUT.rawValue | EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        var ev = epoll_event(events: conn.interest, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
        return conn
    }

    /// Stops the loop: closes every socket and ends the thread. Blocks until done unless called on the loop.
    public func stop() {
        let first = lock.withLock { () -> Bool in defer { stopRequested = true }; return !stopRequested }
        guard first else { return }
        let onLoop = inLoop
        execute { [self] in
            for c in Array(connections.values) { closeConnection(c, error: OTError(.connectionDropped, "event loop stopped")) }
            for fd in listeners.keys { Glibc.close(fd) }
            listeners = [:]
            timers = []
            lock.withLock { running = false }
        }
        if !onLoop { finished.wait() }
    }

    fileprivate func markDirty(_ c: TCPConnection) { dirty.append(c) }

    private func takeSerial() -> Int { defer { nextSerial += 1 }; return nextSerial }

    /// Writes what every connection queued during this iteration, closes those that overflowed their cap, then
    /// holds each listener to its output budget.
    private func flushDirty() {
        while !dirty.isEmpty {
            let batch = dirty
            dirty = []
            for c in batch {
                c.dirty = false
                if c.overflowed && !c.isClosed {
                    closeConnection(c, error: OTError(.connectionDropped, "the peer does not read: over \(c.listener?.limits.maxPendingBytesPerConnection ?? 0) bytes queued"))
                    continue
                }
                if !c.isClosed && !c.connecting { c.flush() }
            }
        }
        for l in listeners.values where l.queuedBytes > l.limits.outputBudget { enforceBudget(l) }
    }

    /// Closes the listener's connections with the most queued output until the total is within its budget.
    private func enforceBudget(_ l: Listener) {
        while l.queuedBytes > l.limits.outputBudget {
            guard let worst = l.conns.values.max(by: { $0.pendingBytes < $1.pendingBytes }),
                  worst.pendingBytes > 0 else { return }
            Log.warn("tcp", "output budget of \(l.limits.outputBudget) bytes exceeded: closing \(worst.peerAddress ?? "?") with \(worst.pendingBytes) bytes queued")
            closeConnection(worst, error: OTError(.connectionDropped, "server output budget exceeded"))
        }
    }

    fileprivate func updateInterest(_ c: TCPConnection) {
        guard !c.isClosed else { return }
        let write = c.connecting || c.pendingBytes > 0
        let events = (c.readPaused ? 0 : EPOLLIN.rawValue | EPOLLRDHUP.rawValue) | (write ? EPOLLOUT.rawValue : 0)
        guard events != c.interest else { return }
        c.interest = events
        var ev = epoll_event(events: events, data: epoll_data_t(fd: c.fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &ev)
    }

    fileprivate func closeConnection(_ c: TCPConnection, error: OTError?) {
        guard !c.isClosed else { return }
        c.isClosed = true
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, c.fd, nil)
        Glibc.close(c.fd)
        connections[c.fd] = nil
        if let l = c.listener {
            l.queuedBytes -= c.pendingBytes
            l.admission.remove(c.serial)
            l.conns[c.serial] = nil
        }
        let d = c.delegate
        c.outbox = []
        c.outboxOffset = 0
        d?.tcpClosed(c, error: error)
        c.context = nil
    }

    private func run() {
        lock.withLock { threadId = pthread_self() }
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var readBuf = [UInt8](repeating: 0, count: 64 * 1024)
        while lock.withLock({ running }) {
            var timeout: Int32 = 1000
            if let next = timers.min(by: { $0.deadline < $1.deadline })?.deadline {
                let ms = (next - MonotonicClock.now()).microseconds / 1000
                timeout = Int32(max(0, min(1000, ms + (ms >= 0 ? 1 : 0))))
            }
            let n = epoll_wait(epfd, &events, Int32(events.count), timeout)
            if n > 0 {
                for i in 0..<Int(n) {
                    let fd = events[i].data.fd
                    let mask = events[i].events
                    if fd == wakeFd {
                        var v: UInt64 = 0
                        _ = read(wakeFd, &v, 8)
                    } else if let l = listeners[fd] {
                        acceptAll(l)
                    } else if let c = connections[fd] {
                        handle(c, mask, &readBuf)
                    }
                }
            }
            let blocks = lock.withLock { () -> [() -> Void] in let b = pending; pending = []; return b }
            for b in blocks { b() }
            if !timers.isEmpty {
                let now = MonotonicClock.now()
                let due = timers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
                if !due.isEmpty {
                    let ids = Set(due.map(\.id))
                    timers.removeAll { ids.contains($0.id) }
                    for t in due { t.block() }
                }
            }
            flushDirty()
        }
        Glibc.close(epfd); Glibc.close(wakeFd)
        finished.signal()
    }

    /// Accepts until the backlog is empty, admitting each socket by the listener's limits. Out of descriptors, it
    /// closes a pending socket (as at the cap) and retries; with none to close it stops accepting for 100 ms
    /// instead of spinning, and says so (at most once a minute).
    private func acceptAll(_ l: Listener) {
        while !l.paused {
            var addr = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    otshim_accept_nonblocking(l.fd, $0, &len)
                }
            }
            if fd < 0 {
                let e = errno
                if e == EINTR || e == ECONNABORTED { continue }
                if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM {
                    let now = MonotonicClock.now()
                    if l.exhaustionLogged.map({ now - $0 >= .seconds(60) }) ?? true {
                        l.exhaustionLogged = now
                        Log.warn("tcp", "accept: out of descriptors (errno \(e)) with \(l.admission.count) sockets open; closing pending sockets to make room")
                    }
                    if let victim = l.admission.victim(), let c = l.conns[victim] {
                        closeConnection(c, error: OTError(.connectionDropped, "evicted: out of descriptors"))
                        continue
                    }
                    pauseAccepting(l)
                }
                return
            }
            let peer = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { UDPDriver.address(from: $0)?.ip.description ?? "?" }
            }
            let serial = takeSerial()
            switch l.admission.decide(address: peer) {
            case .refuse(let why):
                Glibc.close(fd)
                Log.debug("tcp", "refused a connection from \(peer): \(why == .addressFull ? "address" : "server") full")
                continue
            case .admitEvicting(let victim):
                if let c = l.conns[victim] { closeConnection(c, error: OTError(.connectionDropped, "evicted to make room")) }
                else { l.admission.remove(victim) }
            case .admit: break
            }
            l.admission.insert(serial, address: peer)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = TCPConnection(loop: self, fd: fd, serial: serial, connecting: false, listener: l, peerAddress: peer)
            c.sniffing = l.tls != nil
            connections[fd] = c
            l.conns[serial] = c
            c.interest = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
            var ev = epoll_event(events: c.interest, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
            l.onAccept(c)
        }
    }

    private func pauseAccepting(_ l: Listener) {
        l.paused = true
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, l.fd, nil)
        schedule(after: .milliseconds(100)) { [self] in
            guard listeners[l.fd] === l else { return }
            l.paused = false
            var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: l.fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, l.fd, &ev)
        }
    }

    /// What the socket read, through the connection's layers (a TLS listener's first read picks them).
    private func received(_ c: TCPConnection, _ bytes: UnsafeRawBufferPointer) {
        guard !c.refused else { return }
        if c.sniffing {
            c.sniffing = false
            guard let tls = c.listener?.tls else { return }
            if bytes.first == 0x16 {
                do {
                    let layer = try TLSStream(server: tls.credentials.context)
                    c.stack = StreamStack([layer])
                    c.tls = layer
                    try c.stack?.start()
                } catch {
                    closeConnection(c, error: error as? OTError ?? OTError(.internalError, "\(error)"))
                    return
                }
            } else if !tls.allowPlaintext {
                // Plain HTTP on a TLS port: say so (a client with the wrong URL scheme sees why) and close.
                let body = "{\"code\":400,\"message\":\"this port speaks TLS: use https:// or wss://\"}"
                c.queue(Array("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8))
                c.closeAfterFlush = true
                c.refused = true
                return
            }
        }
        guard let stack = c.stack else { c.delegate?.tcpReceived(c, bytes); return }
        do { try stack.receive(bytes) } catch {
            let e = error as? OTError ?? OTError(.connectionDropped, "\(error)")
            if c.listener != nil { Log.debug("tcp", "\(c.peerAddress ?? "?"): \(e.message)") }
            closeConnection(c, error: e)
            return
        }
        c.queue(stack.takeOutgoing())
        layersOpened(c)
        let plain = stack.takeIncoming()
        if !plain.isEmpty, !c.isClosed, !c.closeAfterFlush { plain.withUnsafeBytes { c.delegate?.tcpReceived(c, $0) } }
        if stack.peerClosed && !c.isClosed { closeConnection(c, error: nil) }
    }

    /// An outgoing connection's layers all opened: its delegate hears `tcpConnected` (once).
    private func layersOpened(_ c: TCPConnection) {
        guard c.listener == nil, !c.layersOpen, let stack = c.stack, stack.isOpen, !c.isClosed else { return }
        c.layersOpen = true
        c.delegate?.tcpConnected(c)
    }

    private func handle(_ c: TCPConnection, _ mask: UInt32, _ buf: inout [UInt8]) {
        if c.connecting {
            guard mask & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            var err: Int32 = 0; var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err != 0 || mask & EPOLLERR.rawValue != 0 {
                closeConnection(c, error: OTError(.connectionFailed, "connect failed: errno \(err)"))
                return
            }
            c.connecting = false
            if let stack = c.stack {
                do { try stack.start() } catch { closeConnection(c, error: error as? OTError ?? OTError(.connectionFailed, "\(error)")); return }
                c.queue(stack.takeOutgoing())
                layersOpened(c)
            } else {
                c.delegate?.tcpConnected(c)
            }
            guard !c.isClosed else { return }
            c.flush()
            guard !c.isClosed else { return }
        }
        if mask & EPOLLOUT.rawValue != 0 && c.pendingBytes > 0 {
            c.flush()
            if c.isClosed { return }
        }
        if c.readPaused {
            // Not reading: a hang-up or error ends it (nothing more can be written either).
            if mask & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { closeConnection(c, error: OTError(.connectionDropped, "peer hung up")) }
            return
        }
        if mask & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            // At most four buffers per wake-up: a peer that sends without pause must not starve the others
            // (epoll is level-triggered, so the rest is read on the next round).
            var reads = 0
            while !c.isClosed && !c.readPaused && reads < 4 {
                let n = buf.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    reads += 1
                    buf.withUnsafeBytes { received(c, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                    if let l = c.listener, !c.isClosed, c.pendingBytes > l.limits.readPauseBytes {
                        // Backpressure: it does not read what it asked for; stop reading until half has drained.
                        c.readPaused = true
                        updateInterest(c)
                        break
                    }
                    if n < buf.count { continue }
                } else if n == 0 {
                    closeConnection(c, error: nil)
                } else if errno == EAGAIN || errno == EWOULDBLOCK {
                    break
                } else if errno != EINTR {
                    closeConnection(c, error: OTError(.connectionDropped, "recv failed: errno \(errno)"))
                }
            }
        }
    }
}
