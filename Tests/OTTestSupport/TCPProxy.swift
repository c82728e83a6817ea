import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 for tests of dropped connections: every accepted connection is relayed to `target`
/// until `severAll()` cuts both sides of every relayed connection at once (as a network failure would); while
/// `refusing` is set, new connections are accepted and reset at once (the server looks unreachable); while
/// `blackhole` is set, connections stay up but carry nothing.
/// One thread accepts, two threads relay each connection; `stop()` ends them all.
public final class TCPProxy: @unchecked Sendable {
    /// The port the proxy listens on (127.0.0.1).
    public let port: UInt16
    private let targetPort: UInt16
    private let listener: Int32
    private let lock = NSLock()
    private var links: [(client: Int32, server: Int32)] = []
    private var _refusing = false
    private var _blackhole = false
    private var _accepted = 0
    private var stopped = false
    private let done = DispatchGroup()

    /// Listens on a free loopback port and relays to `127.0.0.1:targetPort`.
    public init(targetPort: UInt16) throws {
        self.targetPort = targetPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 64) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        port = UInt16(bigEndian: addr.sin_port)
        listener = fd
        done.enter()
        let t = Thread { [self] in acceptLoop() }
        t.name = "test-tcp-proxy"
        t.start()
    }

    deinit { stop() }

    /// `ws://127.0.0.1:<port>`: a session server URL through the proxy.
    public var url: String { "ws://127.0.0.1:\(port)" }

    /// While true, new connections are reset as soon as they are accepted.
    public var refusing: Bool {
        get { lock.withLock { _refusing } }
        set { lock.withLock { _refusing = newValue } }
    }

    /// While true, relayed connections stay open but carry nothing: bytes are read and dropped (a silent network,
    /// as when a route disappears; only keepalive timeouts notice).
    public var blackhole: Bool {
        get { lock.withLock { _blackhole } }
        set { lock.withLock { _blackhole = newValue } }
    }

    /// Connections accepted so far (refused ones included).
    public var acceptedCount: Int { lock.withLock { _accepted } }

    /// Connections being relayed now.
    public var liveCount: Int { lock.withLock { links.count } }

    /// Cuts every relayed connection at once: both sides see their connection end (nothing more is relayed).
    public func severAll() {
        // Under the lock: the relay threads close descriptors under it too, so none is reused meanwhile.
        lock.withLock {
            for l in links {
                Self.reset(l.client)
                Self.reset(l.server)
            }
        }
    }

    /// Severs everything, stops accepting and waits for the proxy's threads to end.
    public func stop() {
        let first = lock.withLock { () -> Bool in defer { stopped = true }; return !stopped }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        severAll()
        done.wait()
        close(listener)
    }

    private func acceptLoop() {
        defer { done.leave() }
        while true {
            let c = accept(listener, nil, nil)
            if c < 0 {
                if errno == EINTR { continue }
                return
            }
            let (stop, refuse) = lock.withLock { () -> (Bool, Bool) in _accepted += 1; return (stopped, _refusing) }
            if stop || refuse {
                Self.linger0(c)
                close(c)
                if stop { return } else { continue }
            }
            let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.loopback(port: targetPort)
            let ok = s >= 0 && withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            guard ok else {
                if s >= 0 { close(s) }
                Self.linger0(c)
                close(c)
                continue
            }
            lock.withLock { links.append((c, s)) }
            // Both relay threads hold the pair; the last one to finish closes both descriptors.
            let pair = RelayPair()
            for (from, to) in [(c, s), (s, c)] {
                done.enter()
                let t = Thread { [self] in
                    relay(from: from, to: to)
                    // The other direction stops too (an orderly end, unless severAll reset it first).
                    shutdown(to, Int32(SHUT_WR))
                    shutdown(from, Int32(SHUT_RD))
                    if pair.finishOne() {
                        lock.withLock {
                            links.removeAll { $0.client == c && $0.server == s }
                            close(c)
                            close(s)
                        }
                    }
                    done.leave()
                }
                t.name = "test-tcp-proxy-relay"
                t.start()
            }
        }
    }

    private func relay(from: Int32, to: Int32) {
        var buf = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            if blackhole { continue }
            var off = 0
            while off < n {
                let w = buf.withUnsafeBytes { send(to, $0.baseAddress! + off, n - off, Int32(MSG_NOSIGNAL)) }
                if w < 0 && errno == EINTR { continue }
                guard w > 0 else { return }
                off += w
            }
        }
    }

    /// Makes the final close send a reset (RST) and wakes the relay threads blocked on the socket.
    private static func reset(_ fd: Int32) {
        linger0(fd)
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private static func linger0(_ fd: Int32) {
        var l = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return a
    }
}

/// Counts the two relay threads of one connection.
private final class RelayPair: @unchecked Sendable {
    private let lock = NSLock()
    private var finished = 0
    /// True for the second thread to finish.
    func finishOne() -> Bool { lock.withLock { finished += 1; return finished == 2 } }
}
