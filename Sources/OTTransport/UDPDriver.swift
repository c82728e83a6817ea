#if canImport(Glibc)
import Glibc
#endif
import COTShims
import Dispatch
import FoundationEssentials
import OTBase
import OTWire
import Synchronization

/// The thin IO layer under the sans-IO engines: non-blocking UDP sockets (and outgoing TCP connections,
/// for TURN over TCP) served by one thread that polls them and sleeps until the engines' next deadline.
/// The handler runs on that thread, so engines it owns need no locks; `send`, `setDeadline` and `wake`
/// may be called from any thread (called on the IO thread they write nothing to the wake pipe: the thread reads
/// the state again before it next sleeps).
public final class UDPDriver: Sendable {
    /// What the IO thread did (totals since it started): how its wake-ups went.
    public struct Counters: Sendable, Equatable {
        /// `poll` calls: the thread's wake-ups (each sleeps unless something is already waiting).
        public var polls = 0
        /// Datagrams received.
        public var datagrams = 0
        /// Wake-ups through the wake pipe (`wake`, `setDeadline` and socket changes from other threads).
        public var pipeWakeups = 0
        /// Timer events handed to the handler.
        public var timers = 0
        public init() {}
    }
    /// What the IO thread hands to the handler.
    public enum Event: Sendable {
        /// A datagram that arrived on the socket bound at `local`.
        case datagram(bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant)
        /// The deadline set with `setDeadline` passed, or `wake()` was called.
        case timer(now: Instant)
        /// A TCP connection (from `connectTCP`, known by its local address) closed or failed; `error` says why
        /// when a layer failed (a TLS certificate refused, a proxy's refusal).
        case closed(local: TransportAddress, now: Instant, error: OTError?)
        /// The IO thread ends (`stop()`, or its poll failed): the handler's last call.
        case stopped
    }

    struct Socket: Sendable { let fd: Int32; let address: TransportAddress }
    /// Its stack is only touched under the state lock.
    struct TCPConnection: @unchecked Sendable {
        let fd: Int32
        let local: TransportAddress
        /// The server it names (what `send` and `.datagram` use), even when the socket goes to a proxy.
        let remote: TransportAddress
        var connected = false
        /// Bytes for the socket (through the stack).
        var pending: [UInt8] = []
        /// TLS, a CONNECT tunnel (nil: plain).
        var stack: StreamStack?
        var failure: OTError?
    }
    struct State: Sendable {
        var sockets: [Socket] = []
        var tcp: [TCPConnection] = []
        var deadline: Instant?
        var running = false
        /// `wake()` was called: the handler gets `.timer` after the next poll (which does not sleep).
        var wakePending = false
        /// Descriptors `unbind` removed; the IO thread closes them before its next poll, so no descriptor it
        /// still holds from the last poll can be reused by another socket meanwhile.
        var retired: [Int32] = []
    }

    private let state = Mutex(State())
    /// A pipe: the IO thread polls the read end; other threads write a byte to wake it.
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private let handler: @Sendable (Event) -> Void
    private let clock: any TimeSource
    private let threadName: String
    /// The IO thread's `pthread_self()` while it runs (0 before).
    private let ioThread = Atomic<UInt>(0)
    /// What only the IO thread touches: its batches and its view of the sockets.
    private final class IOThreadState: @unchecked Sendable {
        let received = DatagramBatch()
        let outgoing = DatagramBatch()
        /// The datagram being handed to the handler: its storage is reused from one to the next (a handler that keeps
        /// the bytes keeps them: the next datagram then gets storage of its own).
        var datagram: [UInt8] = []
        var sockets: [Socket] = []
        /// What `poll` watches: the wake pipe, the UDP sockets, the TCP connections. Rebuilt only when the sockets
        /// changed or TCP connections are open (their interest changes with what they have pending).
        var pollList: [pollfd] = []
        /// The counters, written by the IO thread only (`counters` reads them from any thread).
        let polls = Atomic<Int>(0), datagrams = Atomic<Int>(0), pipeWakeups = Atomic<Int>(0), timers = Atomic<Int>(0)

        /// Makes `pollList` watch `wake`, `sockets` and `tcp`. (Indexed loops here and in the IO loop: an iterator
        /// allocates in unoptimized builds, where the receive loop's allocation test runs.)
        func preparePollList(wake: Int32, tcp: [TCPConnection]) {
            if tcp.isEmpty, pollList.count == sockets.count + 1 {
                var i = 0
                while i < sockets.count && sockets[i].fd == pollList[i + 1].fd { i += 1 }
                if i == sockets.count { return }
            }
            pollList.removeAll(keepingCapacity: true)
            pollList.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
            for s in sockets { pollList.append(pollfd(fd: s.fd, events: Int16(POLLIN), revents: 0)) }
            for c in tcp {
                pollList.append(pollfd(fd: c.fd, events: Int16(POLLIN) | (!c.connected || !c.pending.isEmpty ? Int16(POLLOUT) : 0), revents: 0))
            }
        }
    }
    private let io = IOThreadState()

    /// - Parameters:
    ///   - threadName: the IO thread's name (shown by `top -H`, `/proc/self/task/*/comm`; 15 characters used).
    ///   - handler: called on the IO thread for every datagram and timer.
    public init(clock: any TimeSource = MonotonicClock(), threadName: String = "otsession-udp", handler: @escaping @Sendable (Event) -> Void) throws {
        self.clock = clock
        self.threadName = threadName
        self.handler = handler
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw OTError(.internalError, "UDP driver: pipe failed (errno \(errno))") }
        _ = otshim_set_nonblocking(fds[0])
        _ = otshim_set_nonblocking(fds[1])
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
    }

    deinit {
        stop()
        for s in state.withLock({ $0.sockets }) { close(s.fd) }
        for c in state.withLock({ $0.tcp }) { close(c.fd) }
        for fd in state.withLock({ $0.retired }) { close(fd) }
        close(wakeFD)
        close(wakeWriteFD)
    }

    /// Binds a UDP socket (port 0 picks a free port) and returns the address it is bound to.
    @discardableResult
    public func bind(_ address: TransportAddress) throws -> TransportAddress {
        let family = address.ip.isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw OTError(.internalError, "UDP driver: socket() failed (errno \(errno))") }
        if address.ip.isIPv6 {
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        var size: Int32 = 1 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let bound = Self.withSockaddr(address) { sa, len in Glibc.bind(fd, sa, len) }
        guard bound == 0, otshim_set_nonblocking(fd) == 0 else {
            let e = errno
            close(fd)
            throw OTError(.connectionFailed, "UDP driver: bind \(address) failed (errno \(e))")
        }
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let actual = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) == 0 ? Self.address(from: $0) : nil }
        }
        guard let actual else { close(fd); throw OTError(.internalError, "UDP driver: getsockname failed") }
        state.withLock { $0.sockets.append(Socket(fd: fd, address: actual)) }
        wake()
        return actual
    }

    /// Opens a TCP connection to `remote` (non-blocking; data sent before it is up waits). Returns its local
    /// address, which names it in `send(_:from:to:)` and in the `.datagram` events carrying its stream bytes.
    public func connectTCP(to remote: TransportAddress) throws -> TransportAddress {
        guard let local = try connectTCP(to: remote, admit: { _ in true }) else { throw OTError(.internalError, "driver: connect not admitted") }
        return local
    }

    /// Like `connectTCP(to:)`, but `admit` sees the local address before the IO thread watches the connection, so
    /// whatever it records is in place before the connection's first event. When it returns false the connection
    /// is closed and nil returned. The socket goes to `via` when given (a proxy) and carries the stream through
    /// `layers` (a CONNECT tunnel, TLS), started once it is up; `send` and the events still name `remote`.
    public func connectTCP(to remote: TransportAddress, via: TransportAddress? = nil, layers: [StreamLayer] = [],
                           admit: (TransportAddress) -> Bool) throws -> TransportAddress? {
        let target = via ?? remote
        let fd = socket(target.ip.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw OTError(.internalError, "driver: socket() failed (errno \(errno))") }
        guard otshim_set_nonblocking(fd) == 0 else { close(fd); throw OTError(.internalError, "driver: non-blocking failed") }
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        let r = Self.withSockaddr(target) { sa, len in Glibc.connect(fd, sa, len) }
        guard r == 0 || errno == EINPROGRESS else {
            let e = errno
            close(fd)
            throw OTError(.connectionFailed, "driver: connect \(target) failed (errno \(e))")
        }
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let local = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) == 0 ? Self.address(from: $0) : nil }
        }
        guard let local else { close(fd); throw OTError(.internalError, "driver: getsockname failed") }
        guard admit(local) else { close(fd); return nil }
        var c = TCPConnection(fd: fd, local: local, remote: remote, connected: false, stack: layers.isEmpty ? nil : StreamStack(layers))
        // Connected at once (loopback): start the layers now, as the IO thread does for a later connect.
        if r == 0 { _ = Self.connected(&c) }
        state.withLock { $0.tcp.append(c) }
        wake()
        return local
    }

    /// Closes the UDP socket bound at `local` and the TCP connection named by `local` (from `connectTCP`), if
    /// any, without stopping the IO thread; nothing more is delivered from them. Returns whether one was found.
    /// The descriptors are closed by the IO thread before its next poll (or when the driver is released).
    /// With `tcp` set, only the TCP connection (true) or only the UDP socket (false) is closed.
    @discardableResult
    public func unbind(_ local: TransportAddress, tcp: Bool? = nil) -> Bool {
        let found = state.withLock { s -> Bool in
            let udp = tcp != true, stream = tcp != false
            let fds = (udp ? s.sockets.filter { $0.address == local }.map(\.fd) : [])
                + (stream ? s.tcp.filter { $0.local == local }.map(\.fd) : [])
            if udp { s.sockets.removeAll { $0.address == local } }
            if stream { s.tcp.removeAll { $0.local == local } }
            s.retired += fds
            return !fds.isEmpty
        }
        if found { signalWake() }
        return found
    }

    /// The socket connected: its layers start (their first flight is queued). Returns false when one failed.
    private static func connected(_ c: inout TCPConnection) -> Bool {
        c.connected = true
        guard let stack = c.stack else { return true }
        do { try stack.start() } catch { c.failure = error as? OTError ?? OTError(.connectionFailed, "\(error)"); return false }
        c.pending += stack.takeOutgoing()
        return true
    }

    /// Writes what a connection has pending; call with the state locked. Returns false when the connection broke.
    private static func flush(_ c: inout TCPConnection) -> Bool {
        while c.connected && !c.pending.isEmpty {
            let n = c.pending.withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { c.pending.removeFirst(n); continue }
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        }
        return true
    }

    /// Sends a datagram from the socket bound at `local` (or stream bytes on the TCP connection named by `local`). Returns false when it could not be sent now
    /// (no such socket, or the kernel buffer is full — UDP may drop).
    @discardableResult
    public func send(_ bytes: [UInt8], from local: TransportAddress, to destination: TransportAddress) -> Bool {
        let tcpResult = state.withLock { st -> Bool? in
            guard let i = st.tcp.firstIndex(where: { $0.local == local && $0.remote == destination }) else { return nil }
            if let stack = st.tcp[i].stack {
                do { try stack.write(bytes) } catch { st.tcp[i].failure = error as? OTError; return false }
                st.tcp[i].pending += stack.takeOutgoing()
            } else {
                st.tcp[i].pending += bytes
            }
            return Self.flush(&st.tcp[i])
        }
        if let tcpResult {
            if tcpResult { signalWake() }
            return tcpResult
        }
        guard let fd = state.withLock({ $0.sockets.first { $0.address == local }?.fd }) else { return false }
        let n = bytes.withUnsafeBytes { buf in
            Self.withSockaddr(destination) { sa, len in sendto(fd, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL), sa, len) }
        }
        return n == bytes.count
    }

    /// On the IO thread (in the handler): queues a datagram from the UDP socket bound at `local`; queued datagrams go
    /// out together (`sendmmsg`, UDP GSO where the kernel has it) after the handler returns from the current batch of
    /// received datagrams or timer. Elsewhere, or for a socket the IO thread does not know yet, it is `send`.
    @discardableResult
    public func sendBatched(_ bytes: [UInt8], from local: TransportAddress, to destination: TransportAddress) -> Bool {
        if isIOThread, let fd = io.sockets.first(where: { $0.address == local })?.fd, io.outgoing.queue(bytes, fd: fd, to: destination) {
            return true
        }
        return send(bytes, from: local, to: destination)
    }

    /// Sets when the handler next gets `.timer` (the minimum of the engines' `pollTimeout`s).
    public func setDeadline(_ deadline: Instant?) {
        let changed = state.withLock { s -> Bool in
            let c = s.deadline != deadline
            s.deadline = deadline
            return c
        }
        if changed { signalWake() }
    }

    /// Makes the IO thread call the handler with `.timer` soon (e.g. after work was queued from another thread).
    public func wake() {
        state.withLock { $0.wakePending = true }
        signalWake()
    }

    /// Wakes the IO thread from another thread. On the IO thread nothing is written: the thread reads the state (sockets,
    /// deadline, `wakePending`, `running`) again before its next poll.
    private func signalWake() {
        guard !isIOThread else { return }
        var one: UInt8 = 1
        _ = Glibc.write(wakeWriteFD, &one, 1)
    }

    /// What the IO thread has done so far.
    public var counters: Counters {
        var c = Counters()
        c.polls = io.polls.load(ordering: .relaxed)
        c.datagrams = io.datagrams.load(ordering: .relaxed)
        c.pipeWakeups = io.pipeWakeups.load(ordering: .relaxed)
        c.timers = io.timers.load(ordering: .relaxed)
        return c
    }

    /// Starts the IO thread.
    public func start() {
        let already = state.withLock { s -> Bool in defer { s.running = true }; return s.running }
        guard !already else { return }
        if !OSThread.start(name: threadName, { [self] in self.run() }) {
            Log.error("udp", "could not start the IO thread \(threadName)")
            state.withLock { $0.running = false }
        }
    }

    /// Stops the IO thread (it finishes its current handler call).
    public func stop() {
        state.withLock { $0.running = false }
        signalWake()
    }

    /// Whether the caller runs on the IO thread (in the handler).
    public var isIOThread: Bool { ioThread.load(ordering: .acquiring) == UInt(pthread_self()) }

    private func run() {
        _ = otshim_block_async_signals()
        ioThread.store(UInt(pthread_self()), ordering: .releasing)
        defer { ioThread.store(0, ordering: .releasing) }
        defer { handler(.stopped) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let (running, sockets, deadline, tcp, retired, wakePending) = state.withLock { s in
                defer { s.retired = [] }
                return (s.running, s.sockets, s.deadline, s.tcp, s.retired, s.wakePending)
            }
            io.sockets = sockets
            for fd in retired { close(fd) }
            guard running else { return }
            io.preparePollList(wake: wakeFD, tcp: tcp)
            var timeoutMS: Int32 = 1000
            if let d = deadline {
                let remaining = (d - clock.now()).microseconds
                timeoutMS = remaining <= 0 ? 0 : Int32(clamping: (remaining + 999) / 1000)
            }
            // Woken from the IO thread itself (no pipe write): the handler's timer event comes after a poll that does not wait.
            if wakePending { timeoutMS = 0 }
            Self.bump(io.polls)
            let r = poll(&io.pollList, nfds_t(io.pollList.count), timeoutMS)
            if r < 0 && errno != EINTR { return }
            if io.pollList[0].revents != 0 {
                Self.bump(io.pipeWakeups)
                while buffer.withUnsafeMutableBytes({ read(wakeFD, $0.baseAddress, $0.count) }) > 0 {}
            }
            var i = 0
            while i < sockets.count {
                if io.pollList[i + 1].revents & Int16(POLLIN) != 0 { receiveAll(sockets[i], &buffer) }
                i += 1
            }
            i = 0
            while i < tcp.count {
                let revents = io.pollList[1 + sockets.count + i].revents
                if revents != 0 { serviceTCP(tcp[i], revents: revents, &buffer) }
                i += 1
            }
            let now = clock.now()
            let fire = state.withLock { st -> Bool in
                var f = st.wakePending
                if let d = st.deadline, d <= now { st.deadline = nil; f = true }
                st.wakePending = false
                return f
            }
            if fire {
                Self.bump(io.timers)
                handler(.timer(now: now))
                io.outgoing.flush()
            }
        }
    }

    /// Adds to a counter only the IO thread writes (a plain load and store: no read-modify-write needed).
    private static func bump(_ counter: borrowing Atomic<Int>, by n: Int = 1) {
        counter.store(counter.load(ordering: .relaxed) &+ n, ordering: .relaxed)
    }

    private func serviceTCP(_ c: TCPConnection, revents: Int16, _ buffer: inout [UInt8]) {
        var broken = revents & Int16(POLLERR | POLLNVAL) != 0
        if !broken && revents & Int16(POLLOUT) != 0 {
            broken = !state.withLock { st -> Bool in
                guard let i = st.tcp.firstIndex(where: { $0.fd == c.fd }) else { return false }
                if !st.tcp[i].connected {
                    var err: Int32 = 0
                    var len = socklen_t(MemoryLayout<Int32>.size)
                    guard getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0, err == 0 else { return false }
                    guard Self.connected(&st.tcp[i]) else { return false }
                }
                return Self.flush(&st.tcp[i])
            }
        }
        if !broken && revents & Int16(POLLIN | POLLHUP) != 0 {
            for _ in 0..<64 {
                let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    // Through the layers (TLS records, the proxy's answer) under the lock; application bytes out of it.
                    let (ok, plain) = buffer.withUnsafeBytes { raw in
                        state.withLock { st -> (Bool, [UInt8]) in
                            guard let i = st.tcp.firstIndex(where: { $0.fd == c.fd }) else { return (false, []) }
                            guard let stack = st.tcp[i].stack else { return (true, Array(raw[0..<n])) }
                            do { try stack.receive(UnsafeRawBufferPointer(rebasing: raw[0..<n])) } catch {
                                st.tcp[i].failure = error as? OTError ?? OTError(.connectionFailed, "\(error)")
                                return (false, [])
                            }
                            st.tcp[i].pending += stack.takeOutgoing()
                            return (Self.flush(&st.tcp[i]) && !stack.peerClosed, stack.takeIncoming())
                        }
                    }
                    if !plain.isEmpty { handler(.datagram(bytes: plain, from: c.remote, local: c.local, now: clock.now())) }
                    if !ok { broken = true; break }
                    continue
                }
                if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { broken = true }
                break
            }
        }
        guard broken else { return }
        // Unless `unbind` took it meanwhile (then it is retired and closed by the loop, without an event).
        let removed = state.withLock { st -> (Bool, OTError?) in
            guard let i = st.tcp.firstIndex(where: { $0.fd == c.fd }) else { return (false, nil) }
            let failure = st.tcp[i].failure
            st.tcp.remove(at: i)
            return (true, failure)
        }
        guard removed.0 else { return }
        close(c.fd)
        handler(.closed(local: c.local, now: clock.now(), error: removed.1))
    }

    /// Receives what the socket has, in batches (`recvmmsg`); what the handler queued meanwhile goes out after each.
    private func receiveAll(_ s: Socket, _ buffer: inout [UInt8]) {
        let batch = io.received
        var total = 0
        for _ in 0..<8 {
            let n = batch.receive(from: s.fd)
            total += n
            for i in 0..<n {
                guard let from = batch.datagram(i, into: &io.datagram) else { continue }
                handler(.datagram(bytes: io.datagram, from: from, local: s.address, now: clock.now()))
            }
            io.outgoing.flush()
            guard n == DatagramBatch.capacity else { break }  // drained
        }
        Self.bump(io.datagrams, by: total)
    }

    // MARK: sockaddr conversion

    static func withSockaddr<R>(_ a: TransportAddress, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch a.ip {
        case .v4(let ip):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = a.port.bigEndian
            sin.sin_addr = in_addr(s_addr: ip.bigEndian)
            return withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        case .v6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = a.port.bigEndian
            let b = a.ip.bytes
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { for i in 0..<16 { $0[i] = b[i] } }
            return withUnsafePointer(to: &sin6) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        }
    }

    static func address(from sa: UnsafePointer<sockaddr>) -> TransportAddress? {
        switch Int32(sa.pointee.sa_family) {
        case AF_INET:
            return sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                TransportAddress(ip: .v4(UInt32(bigEndian: $0.pointee.sin_addr.s_addr)), port: UInt16(bigEndian: $0.pointee.sin_port))
            }
        case AF_INET6:
            return sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p in
                // The address's two big-endian halves, read without an array (this runs for every datagram received).
                let (hi, lo) = withUnsafeBytes(of: p.pointee.sin6_addr) { b in
                    (b.loadUnaligned(fromByteOffset: 0, as: UInt64.self), b.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                }
                return TransportAddress(ip: .v6(UInt64(bigEndian: hi), UInt64(bigEndian: lo)), port: UInt16(bigEndian: p.pointee.sin6_port))
            }
        default: return nil
        }
    }

    /// The machine's interface addresses for host candidates.
    /// - Parameters:
    ///   - filterLAN: leave out private and link-local addresses (the "filter out LAN candidates" setting).
    ///   - includeLoopback: keep 127.0.0.1/::1 (tests on loopback).
    public static func hostAddresses(includeIPv6: Bool = true, filterLAN: Bool = false, includeLoopback: Bool = false) -> [IPAddress] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var out: [IPAddress] = []
        var p: UnsafeMutablePointer<ifaddrs>? = first
        while let ifa = p {
            defer { p = ifa.pointee.ifa_next }
            guard let sa = ifa.pointee.ifa_addr, ifa.pointee.ifa_flags & UInt32(IFF_UP) != 0,
                  let addr = address(from: sa)?.ip else { continue }
            if addr.isIPv6 && !includeIPv6 { continue }
            if addr.isLoopback && !includeLoopback { continue }
            if filterLAN && addr.isLAN { continue }
            if case .v6(let hi, _) = addr, hi >> 54 == 0x3FA, !filterLAN { continue }  // link-local needs a scope id
            if !out.contains(addr) { out.append(addr) }
        }
        return out
    }

    /// Filters candidate addresses by the LAN setting (pure, for engines that got addresses elsewhere).
    public static func filter(_ addresses: [IPAddress], filterLAN: Bool) -> [IPAddress] {
        filterLAN ? addresses.filter { !$0.isLAN } : addresses
    }
}
