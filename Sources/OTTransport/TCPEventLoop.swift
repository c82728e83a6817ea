#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import FoundationEssentials
import COTShims
import CEpoll
import OTBase

/// Receives a TCP connection's events, always on its loop's thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// An outgoing connect completed.
    func tcpConnected(_ conn: TCPConnection)
    /// Bytes arrived (valid only during the call).
    func tcpReceived(_ conn: TCPConnection, _ bytes: UnsafeRawBufferPointer)
    /// The connection closed; `error` is nil for an orderly close.
    func tcpClosed(_ conn: TCPConnection, error: OTError?)
}

/// One non-blocking TCP socket owned by a `TCPEventLoop`. Use it only on the loop's thread
/// (from delegate callbacks or blocks given to `loop.execute`).
public final class TCPConnection: @unchecked Sendable {
    public let loop: TCPEventLoop
    public let fd: Int32
    public weak var delegate: TCPConnectionDelegate?
    /// Any object the owner wants to hang on the connection.
    public var context: AnyObject?
    fileprivate var outbox: [UInt8] = []
    fileprivate var outboxOffset = 0
    fileprivate var connecting: Bool
    fileprivate var wantsWrite = false
    fileprivate var dirty = false
    public fileprivate(set) var isClosed = false
    /// Close once the outbox has drained.
    fileprivate var closeAfterFlush = false

    fileprivate init(loop: TCPEventLoop, fd: Int32, connecting: Bool) {
        self.loop = loop; self.fd = fd; self.connecting = connecting
    }

    /// Bytes queued but not yet written to the socket.
    public var pendingBytes: Int { outbox.count - outboxOffset }

    /// Queues bytes; the loop writes every connection's queue once per iteration (so many small
    /// messages to one socket cost one system call).
    public func send(_ bytes: [UInt8]) {
        guard !isClosed, !closeAfterFlush, !bytes.isEmpty else { return }
        outbox.append(contentsOf: bytes)
        if !dirty { dirty = true; loop.markDirty(self) }
    }

    /// Closes after queued bytes are written.
    public func closeWhenFlushed() {
        guard !isClosed else { return }
        if pendingBytes == 0 && !connecting { loop.closeConnection(self, error: nil) } else { closeAfterFlush = true }
    }

    /// Closes now; the delegate gets `tcpClosed` with `error`.
    public func close(error: OTError? = nil) { loop.closeConnection(self, error: error) }

    fileprivate func flush() {
        while outboxOffset < outbox.count {
            let n = outbox.withUnsafeBytes { buf -> Int in
                guard let base = buf.baseAddress else { return 0 }
                return Glibc.send(fd, base + outboxOffset, buf.count - outboxOffset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { outboxOffset += n; continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            loop.closeConnection(self, error: OTError(.connectionDropped, "send failed: errno \(errno)"))
            return
        }
        if outboxOffset == outbox.count { outbox.removeAll(keepingCapacity: outbox.capacity <= 1 << 16); outboxOffset = 0 }
        else if outboxOffset > 1 << 16 { outbox.removeFirst(outboxOffset); outboxOffset = 0 }
        if closeAfterFlush && pendingBytes == 0 { loop.closeConnection(self, error: nil); return }
        loop.updateInterest(self)
    }
}

/// One thread waiting on epoll for many non-blocking TCP sockets, with timers and
/// cross-thread `execute`. No thread per connection.
public final class TCPEventLoop: @unchecked Sendable {
    public typealias AcceptHandler = (TCPConnection) -> Void

    private let epfd: Int32
    private let wakeFd: Int32
    private let lock = Lock()
    private var pending: [() -> Void] = []
    private var running = true
    private var stopRequested = false
    private let finished = DispatchSemaphore(value: 0)
    // Loop-thread state.
    private var connections: [Int32: TCPConnection] = [:]
    private var listeners: [Int32: AcceptHandler] = [:]
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

    /// Listens on `host:port` (port 0 picks one); returns the bound port. Any thread.
    public func listen(host: String, port: UInt16, backlog: Int32 = 1024, onAccept: @escaping AcceptHandler) throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw OTError(.internalError, "socket failed: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = try Self.address(host, port)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0, Glibc.listen(fd, backlog) == 0 else {
            let e = errno; Glibc.close(fd)
            throw OTError(.internalError, "cannot listen on \(host):\(port): errno \(e)")
        }
        var bound = sockaddr_in(); var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        execute { [self] in
            listeners[fd] = onAccept
            var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
        }
        return UInt16(bigEndian: bound.sin_port)
    }

    /// Stops listening on every socket. Any thread.
    public func closeListeners() {
        execute { [self] in
            for fd in listeners.keys { _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil); Glibc.close(fd) }
            listeners = [:]
        }
    }

    /// Starts a non-blocking connect; the delegate gets `tcpConnected` or `tcpClosed(error: 1006)`. Loop thread only.
    public func connect(host: String, port: UInt16, delegate: TCPConnectionDelegate) -> TCPConnection? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, var addr = try? Self.address(host, port) else { if fd >= 0 { Glibc.close(fd) }; return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let conn = TCPConnection(loop: self, fd: fd, connecting: true)
        conn.delegate = delegate
        connections[fd] = conn
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        if rc != 0 && errno != EINPROGRESS {
            let e = errno
            var ev = epoll_event(events: 0, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
            // Report asynchronously so the caller sees one path.
            schedule(after: .zero) { [self] in closeConnection(conn, error: OTError(.connectionFailed, "connect to \(host):\(port) failed: errno \(e)")) }
            return conn
        }
        var ev = epoll_event(events: EPOLLOUT.rawValue | EPOLLIN.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
        conn.wantsWrite = true
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

    /// Writes what every connection queued during this iteration.
    private func flushDirty() {
        while !dirty.isEmpty {
            let batch = dirty
            dirty = []
            for c in batch {
                c.dirty = false
                if !c.isClosed && !c.connecting { c.flush() }
            }
        }
    }

    fileprivate func updateInterest(_ c: TCPConnection) {
        guard !c.isClosed else { return }
        let want = c.connecting || c.pendingBytes > 0
        guard want != c.wantsWrite else { return }
        c.wantsWrite = want
        var ev = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (want ? EPOLLOUT.rawValue : 0), data: epoll_data_t(fd: c.fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &ev)
    }

    fileprivate func closeConnection(_ c: TCPConnection, error: OTError?) {
        guard !c.isClosed else { return }
        c.isClosed = true
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, c.fd, nil)
        Glibc.close(c.fd)
        connections[c.fd] = nil
        let d = c.delegate
        c.outbox = []
        d?.tcpClosed(c, error: error)
        c.context = nil
    }

    private static func address(_ host: String, _ port: UInt16) throws -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        let h = host == "localhost" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, h, &addr.sin_addr) == 1 else { throw OTError(.invalidParameter, "not an IPv4 address: \(host)") }
        return addr
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
                    } else if let accept = listeners[fd] {
                        acceptAll(fd, accept)
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

    private func acceptAll(_ lfd: Int32, _ onAccept: AcceptHandler) {
        while true {
            let fd = accept(lfd, nil, nil)
            if fd < 0 { return }
            guard otshim_set_nonblocking(fd) == 0 else { Glibc.close(fd); continue }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = TCPConnection(loop: self, fd: fd, connecting: false)
            connections[fd] = c
            var ev = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
            onAccept(c)
        }
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
            c.delegate?.tcpConnected(c)
            guard !c.isClosed else { return }
            c.flush()
            guard !c.isClosed else { return }
        }
        if mask & EPOLLOUT.rawValue != 0 && c.pendingBytes > 0 {
            c.flush()
            if c.isClosed { return }
        }
        if mask & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            while !c.isClosed {
                let n = buf.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    buf.withUnsafeBytes { c.delegate?.tcpReceived(c, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
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
