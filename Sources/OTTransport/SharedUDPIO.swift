import OTBase
import OTWire
import Synchronization

/// The process-wide IO thread of client connections: one `UDPDriver` (thread "otsession-io") on which every
/// `PeerConnectionDriver` made with `init(config:bind:handler:)` binds its sockets. Datagrams and TCP-closed
/// events are routed to the connection owning the local socket; the connections' deadlines are multiplexed.
///
/// Lock order: the IO's lock is never held while calling into a connection (connections call back into the
/// IO to send and to set deadlines while holding their own lock).
final class SharedUDPIO: Sendable {
    /// A socket's owner, and who it was (`driver` is nil from the start of its `deinit` on). A class: `release` runs in
    /// the owner's `deinit`, where a struct copy of the weak reference crashed (SIGSEGV in `free`, destroying the copy).
    private final class Owner: Sendable {
        weak let driver: PeerConnectionDriver?
        let id: ObjectIdentifier
        init(_ d: PeerConnectionDriver) { driver = d; id = ObjectIdentifier(d) }
    }

    private static let instance = Mutex<SharedUDPIO?>(nil)

    /// The shared IO, created (and its thread started) on first use.
    static func shared() throws -> SharedUDPIO {
        try instance.withLock { s in
            if let s { return s }
            let io = try SharedUDPIO()
            s = io
            return io
        }
    }

    /// The name of the shared IO thread (`/proc/self/task/*/comm`).
    static let threadName = "otsession-io"

    private let udp: UDPDriver
    private let deadlines: ConnectionDeadlines
    /// Which connection owns the socket bound at each local address.
    private let owners = Mutex<[TransportAddress: Owner]>([:])

    private init() throws {
        let box = Mutex<SharedUDPIO?>(nil)
        udp = try UDPDriver(threadName: Self.threadName) { event in
            guard let io = box.withLock({ $0 }) else { return }
            switch event {
            case .datagram(let bytes, let from, let local, let now): io.owner(of: local)?.receive(bytes, from: from, local: local, now: now)
            case .timer(let now): io.deadlines.fire(now: now)
            // Only TURN uses TCP: the connection's TURN client fails (its relayed candidate is gone).
            case .closed(let local, let now, let error): io.owner(of: local)?.turnConnectionClosed(local: local, now: now, reason: error)
            case .stopped: break
            }
        }
        deadlines = ConnectionDeadlines(udp: udp)
        box.withLock { $0 = self }  // the shared IO lives as long as the process
        udp.start()
    }

    private func owner(of local: TransportAddress) -> PeerConnectionDriver? { owners.withLock { $0[local]?.driver } }

    /// Binds a UDP socket for `d` (port 0 picks one) and returns its address. UDP sockets and TCP connections
    /// share the local port range, so a socket may get the address of another connection's TCP connection: it
    /// is closed and another one bound.
    func bind(_ address: TransportAddress, for d: PeerConnectionDriver) throws -> TransportAddress {
        var taken: [TransportAddress] = []
        defer { for a in taken { udp.unbind(a, tcp: false) } }
        for _ in 0..<8 {
            let local = try udp.bind(address)
            if claim(local, for: d) { return local }
            taken.append(local)
        }
        throw OTError(.internalError, "no free local address that another connection does not use")
    }

    /// Opens a TCP connection for `d` (to a TURN server, perhaps through a proxy at `via`, through `layers`) and
    /// returns its local address, which names it. `d` owns it before the IO thread watches it, so even an immediate
    /// close reaches `d`.
    func connectTCP(to server: TransportAddress, via: TransportAddress?, layers: [StreamLayer], for d: PeerConnectionDriver) throws -> TransportAddress {
        for _ in 0..<8 {
            if let local = try udp.connectTCP(to: server, via: via, layers: layers, admit: { claim($0, for: d) }) { return local }
        }
        throw OTError(.internalError, "no free local address that another connection does not use")
    }

    /// Records `d` as the owner of `local`, unless another connection's socket has that address.
    private func claim(_ local: TransportAddress, for d: PeerConnectionDriver) -> Bool {
        owners.withLock { o -> Bool in
            guard o[local] == nil else { return false }
            o[local] = Owner(d)
            return true
        }
    }

    /// Closes the sockets bound at `locals` (UDP sockets and TCP connections) that the connection known by `id` still
    /// owns, and forgets its deadline. A connection releases twice (`close()`, then its `deinit`): by the second time
    /// another connection may own a socket at one of those addresses, which stays open.
    func release(_ locals: [TransportAddress], of id: ObjectIdentifier) {
        let owned = owners.withLock { o in
            locals.filter { a in
                guard o[a]?.id == id else { return false }
                o[a] = nil
                return true
            }
        }
        for a in owned { udp.unbind(a) }
        deadlines.remove(id)
    }

    func send(_ bytes: [UInt8], from local: TransportAddress, to destination: TransportAddress) {
        udp.send(bytes, from: local, to: destination)
    }

    func setDeadline(_ at: Instant?, for d: PeerConnectionDriver) { deadlines.set(at, for: d) }
}
