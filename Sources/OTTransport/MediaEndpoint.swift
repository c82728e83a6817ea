import OTBase
import OTWire
import Synchronization

/// One UDP socket serving many ICE-lite peer connections (the media router's port). Incoming STUN is routed by
/// its USERNAME (our ufrag before the colon); other datagrams by the remote address of the pair the connection's
/// ICE agent selected (an authenticated check). One IO thread for all connections.
public final class MediaEndpoint: @unchecked Sendable {
    private struct State {
        var byUfrag: [String: PeerConnectionDriver] = [:]
        var byAddress: [TransportAddress: PeerConnectionDriver] = [:]
    }

    private let udp: UDPDriver
    private let deadlines: ConnectionDeadlines
    private let state = Mutex(State())
    /// Work queued for the IO thread (`async`), and the owner that gets its timer events (`setOwner`).
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    private let owner = WeakOwner()
    /// The shared socket's address: every connection's single host candidate.
    public let address: TransportAddress
    /// The address clients are told (1:1 NAT: the public address mapped to `address`, same port), or `address`.
    public let advertisedAddress: TransportAddress

    /// Binds the shared socket (port 0 picks one) and starts its IO thread. With `advertise`, connections describe
    /// their candidate with that IP (a 1:1 NAT's public address) and the bound port.
    public init(bind: TransportAddress = TransportAddress(ip: .v4(0x7F00_0001), port: 0), advertise: IPAddress? = nil) throws {
        let box = WeakBox<MediaEndpoint>()
        udp = try UDPDriver(threadName: "otsession-media") { event in
            guard let e = box.value else { return }
            switch event {
            case .datagram(let bytes, let from, _, let now): e.route(bytes, from: from, now: now)
            case .timer(let now): e.timer(now: now)
            case .closed: break  // the shared endpoint is UDP only
            case .stopped: e.owner.value?.endpointStopped()
            }
        }
        deadlines = ConnectionDeadlines(udp: udp)
        address = try udp.bind(bind)
        advertisedAddress = TransportAddress(ip: advertise ?? address.ip, port: address.port)
        box.value = self
        udp.start()
    }

    /// Whether the caller runs on the endpoint's IO thread.
    public var isIOThread: Bool { udp.isIOThread }

    /// The IO thread's wake-ups, polls and datagrams so far.
    public var ioCounters: UDPDriver.Counters { udp.counters }

    /// Runs `work` on the IO thread soon (in order with other such work; before the connections' timers).
    public func async(_ work: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(work) }
        udp.wake()
    }

    /// The endpoint's owner (the router driver, held weakly) gets every IO-thread timer event, after the queued work and
    /// the connections' timers; `setTimerDeadline` sets when the next one comes at the latest.
    public func setOwner(_ o: any MediaEndpointOwner) { owner.value = o }

    /// When the owner's timer handler must next run (nil: no deadline of its own).
    public func setTimerDeadline(_ at: Instant?) { deadlines.setOwner(at) }

    private func timer(now: Instant) {
        let work = inbox.withLock { w in defer { w = [] }; return w }
        for w in work { w() }
        deadlines.fire(now: now)
        owner.value?.endpointTimer(now: now)
    }

    deinit { udp.stop() }

    /// Stops the IO thread; connections stay registered but receive nothing more.
    public func stop() { udp.stop() }

    /// Number of connections on the socket.
    public var connectionCount: Int { state.withLock { $0.byUfrag.count } }

    /// A new ICE-lite connection on the shared socket (`config.iceLite` is forced on).
    public func makePeerConnection(config: PeerConnectionConfig, handler: @escaping PeerConnectionDriver.Handler) throws -> PeerConnectionDriver {
        var c = config
        c.iceLite = true
        if advertisedAddress != address { c.advertisedHostIP = advertisedAddress.ip }
        let d = try PeerConnectionDriver(config: c, endpoint: self, handler: handler)
        state.withLock { $0.byUfrag[d.localUfrag] = d }
        return d
    }

    /// A connection restarted ICE: its STUN now comes with its new ufrag.
    func rename(from old: String, to new: String, _ d: PeerConnectionDriver) {
        state.withLock { s in
            if s.byUfrag[old] === d { s.byUfrag[old] = nil }
            s.byUfrag[new] = d
        }
    }

    func remove(_ d: PeerConnectionDriver) {
        state.withLock { s in
            s.byUfrag[d.localUfrag] = nil
            s.byAddress = s.byAddress.filter { $0.value !== d }
        }
        deadlines.remove(d)
    }

    /// Sends a datagram from the shared socket: batched with the IO thread's others when called there.
    func send(_ bytes: [UInt8], to destination: TransportAddress) { udp.sendBatched(bytes, from: address, to: destination) }

    /// Routes non-STUN datagrams from `remote` to `d` (its ICE agent selected that address).
    func route(_ remote: TransportAddress, to d: PeerConnectionDriver) {
        state.withLock { s in
            s.byAddress = s.byAddress.filter { $0.value !== d }
            s.byAddress[remote] = d
        }
    }

    func setDeadline(_ at: Instant?, for d: PeerConnectionDriver) { deadlines.set(at, for: d) }

    private func route(_ bytes: [UInt8], from: TransportAddress, now: Instant) {
        let target: PeerConnectionDriver? = state.withLock { s in
            if DemuxKind.classify(bytes) == .stun {
                guard let m = try? STUNMessage.parse(bytes), let user = m.username,
                      let ufrag = user.split(separator: ":", maxSplits: 1).first,
                      let d = s.byUfrag[String(ufrag)] else { return nil }
                return d
            }
            return s.byAddress[from]
        }
        target?.receive(bytes, from: from, local: address, now: now)
    }
}

/// What owns a `MediaEndpoint` and runs on its IO thread (the router's worker).
public protocol MediaEndpointOwner: AnyObject, Sendable {
    /// Called on the IO thread at every timer event (the deadline set with `setTimerDeadline`, or queued work).
    func endpointTimer(now: Instant)
    /// Called on the IO thread as its last act, however it was stopped: queued work that has not run will not run there.
    func endpointStopped()
}

/// The endpoint's weak reference to its owner. (Not a closure in a `Mutex`: taking a closure out of `Mutex.withLock`
/// leaked two blocks per call.)
private final class WeakOwner: @unchecked Sendable {
    private let lock = Lock()
    private weak var object: (any MediaEndpointOwner)?
    var value: (any MediaEndpointOwner)? {
        get { lock.lock(); defer { lock.unlock() }; return object }
        set { lock.lock(); object = newValue; lock.unlock() }
    }
}

/// A weak reference the IO thread's handler holds, so a driver and its socket thread do not keep each other alive.
final class WeakBox<T: AnyObject>: @unchecked Sendable {
    private let lock = Lock()
    private weak var object: T?
    var value: T? {
        get { lock.lock(); defer { lock.unlock() }; return object }
        set { lock.lock(); object = newValue; lock.unlock() }
    }
}
