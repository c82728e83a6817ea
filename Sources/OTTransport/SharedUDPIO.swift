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
    private struct WeakDriver { weak var driver: PeerConnectionDriver? }

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
    private let owners = Mutex<[TransportAddress: WeakDriver]>([:])

    private init() throws {
        let box = Mutex<SharedUDPIO?>(nil)
        udp = try UDPDriver(threadName: Self.threadName) { event in
            guard let io = box.withLock({ $0 }) else { return }
            switch event {
            case .datagram(let bytes, let from, let local, let now): io.owner(of: local)?.receive(bytes, from: from, local: local, now: now)
            case .timer(let now): io.deadlines.fire(now: now)
            // Only TURN uses TCP; a TURN connection that closes shows up as lost consent on its pairs.
            case .closed(let local, let now): io.owner(of: local)?.timeout(now: now)
            }
        }
        deadlines = ConnectionDeadlines(udp: udp)
        box.withLock { $0 = self }  // the shared IO lives as long as the process
        udp.start()
    }

    private func owner(of local: TransportAddress) -> PeerConnectionDriver? { owners.withLock { $0[local]?.driver } }

    /// Binds a UDP socket for `d` (port 0 picks one) and returns its address.
    func bind(_ address: TransportAddress, for d: PeerConnectionDriver) throws -> TransportAddress {
        let bound = try udp.bind(address)
        owners.withLock { $0[bound] = WeakDriver(driver: d) }
        return bound
    }

    /// Closes the sockets bound at `locals` and forgets the deadline of the connection known by `id`.
    func release(_ locals: [TransportAddress], of id: ObjectIdentifier) {
        owners.withLock { o in for a in locals { o[a] = nil } }
        for a in locals { udp.unbind(a) }
        deadlines.remove(id)
    }

    func send(_ bytes: [UInt8], from local: TransportAddress, to destination: TransportAddress) {
        udp.send(bytes, from: local, to: destination)
    }

    func setDeadline(_ at: Instant?, for d: PeerConnectionDriver) { deadlines.set(at, for: d) }
}
