import Dispatch
import FoundationEssentials
import OTBase
import OTWire

/// Runs one `PeerConnection` on real UDP sockets: either sockets of its own on the process-wide IO thread
/// (`SharedUDPIO`; host candidates on the addresses it binds) or a socket shared through a `MediaEndpoint`
/// (the server's ICE-lite connections).
///
/// Thread-safe: every call takes the connection's lock, runs the sans-IO core, sends what it produced and
/// delivers its events to `handler`. Events arrive on the IO thread, or on the thread of a call that produced
/// them (e.g. `sendRTP`); deliveries never overlap. The handler may call back into the driver. The IO thread
/// serves every connection of the process, so a handler should hand work off rather than block.
public final class PeerConnectionDriver: @unchecked Sendable {
    public typealias Handler = @Sendable (PeerConnectionEvent) -> Void

    /// Where the connection's datagrams go. A shared endpoint comes with an unretained reference to it (the first keeps it
    /// alive) that the per-packet paths call through: a `MediaEndpoint` has a side table (its IO handler holds it weakly), so
    /// each retain and release of it takes the slow path (`incrementSlow`/`doDecrementSlow`, ~1 % of the router thread).
    private enum IO { case owned(SharedUDPIO), shared(MediaEndpoint, Unmanaged<MediaEndpoint>) }

    private let pc: PeerConnection
    private let lock = Lock()
    private let delivery = Lock(recursive: true)
    private let handler: Handler
    private let io: IO
    private var closed = false
    /// The remote address a shared endpoint routes to this connection.
    private var routedAddress: TransportAddress?
    /// The deadline last given to the IO (not repeated while it stays the same, as it does from packet to packet).
    private var deadlineGiven: Instant??
    /// The sockets this connection's host candidates are bound at.
    public private(set) var localAddresses: [TransportAddress] = []
    /// The local addresses of its TCP connections to TURN servers.
    private var tcpLocals: [TransportAddress] = []

    /// A connection with its own sockets, served by the process-wide IO thread that all such connections share.
    /// - Parameters:
    ///   - bind: addresses to bind (port 0 picks one); each becomes a host candidate. Use
    ///     `PeerConnectionDriver.hostBindAddresses(...)` for the machine's interfaces.
    public init(config: PeerConnectionConfig, bind: [TransportAddress] = [TransportAddress(ip: .v4(0x7F00_0001), port: 0)],
                handler: @escaping Handler) throws {
        pc = try PeerConnection(config: config, now: MonotonicClock.now())
        self.handler = handler
        let shared = try SharedUDPIO.shared()
        io = .owned(shared)
        // If a bind fails, `deinit` (which runs: every property is set) releases the sockets already bound.
        for a in bind {
            let bound = try shared.bind(a, for: self)
            localAddresses.append(bound)
            pc.addLocalCandidate(bound)
        }
    }

    /// A connection on a `MediaEndpoint`'s shared socket (made by `MediaEndpoint.makePeerConnection`).
    init(config: PeerConnectionConfig, endpoint: MediaEndpoint, handler: @escaping Handler) throws {
        pc = try PeerConnection(config: config, now: MonotonicClock.now())
        self.handler = handler
        localAddresses = [endpoint.address]
        pc.addLocalCandidate(endpoint.address)
        io = .shared(endpoint, Unmanaged.passUnretained(endpoint))
    }

    /// A connection dropped without `close()` still gives its sockets back.
    deinit { if case .owned(let shared) = io { shared.release(localAddresses + tcpLocals, of: ObjectIdentifier(self)) } }

    /// Addresses for host candidates on this machine's interfaces (port 0), honouring the LAN filter setting.
    public static func hostBindAddresses(includeIPv6: Bool = false, filterLAN: Bool = false, includeLoopback: Bool = false) -> [TransportAddress] {
        UDPDriver.hostAddresses(includeIPv6: includeIPv6, filterLAN: filterLAN, includeLoopback: includeLoopback).map { TransportAddress(ip: $0, port: 0) }
    }

    /// Our ICE username fragment (what a shared socket demultiplexes STUN by).
    public var localUfrag: String { pc.localUfrag }

    /// Runs `body` on the connection under its lock, then sends what it produced and delivers its events.
    public func withPeerConnection<R>(_ body: (PeerConnection, Instant) throws -> R) rethrows -> R {
        lock.lock()
        let r: R
        do { r = try body(pc, MonotonicClock.now()) } catch { lock.unlock(); throw error }
        let events = flushLocked()
        lock.unlock()
        deliver(events)
        return r
    }

    /// Our offer; with `iceRestart` (once connected) an ICE restart offer that keeps DTLS and SRTP (see
    /// `PeerConnection.createOffer(iceRestart:now:)`); its answer goes to `setRemoteAnswer`.
    public func createOffer(iceRestart: Bool = false) throws -> String {
        try withPeerConnection { pc, now in try pc.createOffer(iceRestart: iceRestart, now: now) }
    }
    /// Our answer to the peer's offer, or to its re-offer once connected (an ICE restart when its credentials changed).
    public func createAnswer(toOffer sdp: String) throws -> String {
        try withPeerConnection { pc, now in
            let before = pc.localUfrag
            let answer = try pc.createAnswer(toOffer: sdp, now: now)
            if case .shared(let endpoint, _) = io, pc.localUfrag != before { endpoint.rename(from: before, to: pc.localUfrag, self) }
            return answer
        }
    }
    public func setRemoteAnswer(_ sdp: String) throws { try withPeerConnection { pc, now in try pc.setRemoteAnswer(sdp, now: now) } }
    public func addRemoteCandidate(_ c: SDPCandidate) { withPeerConnection { pc, now in pc.addRemoteCandidate(c, now: now) } }
    public func addTURN(_ turn: TURNClient.Config, socket: TransportAddress) { withPeerConnection { pc, now in pc.addTURN(turn, socket: socket, now: now) } }
    /// Adds a TURN server, reached as its config says: over UDP from the first bound socket, over TCP or TLS
    /// (`turns:`) through a connection of its own on the IO thread (own sockets only), through `route`'s proxy when
    /// it has one. A TCP connection that cannot be made or closes (a TLS certificate refused, a proxy's refusal)
    /// fails that server's allocation (`PeerConnection.turnConnectionClosed`).
    public func addTURN(_ turn: TURNClient.Config, route: StreamRoute = StreamRoute()) {
        guard turn.transport.isStream else {
            if let socket = localAddresses.first { addTURN(turn, socket: socket) }
            return
        }
        guard case .owned(let shared) = io else { return }
        do {
            let name = turn.serverName ?? turn.server.ip.description
            var layers: [StreamLayer] = []
            if let p = route.proxy { layers.append(HTTPConnectTunnel(host: name, port: turn.server.port, credentials: p.credentials)) }
            if turn.transport == .tls { layers.append(try TLSStream(client: try route.tls ?? TLSClientContext.systemStore(), host: name)) }
            // Under the lock: the connection's first event (it may close at once) waits until its client exists.
            try withPeerConnection { pc, now in
                guard !closed else { return }
                let local = try shared.connectTCP(to: turn.server, via: route.proxy?.address, layers: layers, for: self)
                tcpLocals.append(local)
                pc.addTURN(turn, socket: local, now: now)
            }
        } catch {
            // Refused at once (e.g. nothing listens on a loopback port): the same failure as a later close.
            Log.warn("ice", "TURN over TCP to \(turn.server): \(error)")
            let unconnected = TransportAddress(ip: .v4(0), port: 0)
            withPeerConnection { pc, now in
                pc.addTURN(turn, socket: unconnected, now: now)
                pc.turnConnectionClosed(socket: unconnected, now: now, reason: error as? OTError)
            }
        }
    }

    /// Protects and sends an RTP packet (its storage then holds the SRTP bytes). False before the connection is up.
    /// `now`: the caller's clock reading (the router reads it once per packet it forwards to many).
    @discardableResult
    public func sendRTP(_ packet: inout [UInt8], now: Instant = MonotonicClock.now()) -> Bool {
        lock.lock()
        let ok = pc.sendRTP(&packet, now: now)
        // Sending media moves no deadline on a direct path (the router's forwarding path asks nothing more).
        let events = flushLocked(deadline: pc.mediaSendsMaySetTimers)
        lock.unlock()
        deliver(events)
        return ok
    }
    /// Answers a `retransmissionsRequested` event with the packets found where they are kept (`PeerConnection.resendRTP`).
    public func resendRTP(ssrc: UInt32, _ packets: [[UInt8]?]) { withPeerConnection { pc, now in pc.resendRTP(ssrc: ssrc, packets, now: now) } }
    @discardableResult
    public func sendRTCP(_ packet: [UInt8]) -> Bool { withPeerConnection { pc, _ in pc.sendRTCP(packet) } }
    public func requestKeyframe(ssrc: UInt32, useFIR: Bool = false, paced: Bool = true) {
        withPeerConnection { pc, now in pc.requestKeyframe(ssrc: ssrc, useFIR: useFIR, paced: paced, now: now) }
    }
    public var stats: PeerConnectionStats { withPeerConnection { pc, _ in pc.stats } }
    public var isConnected: Bool { withPeerConnection { pc, _ in pc.isConnected } }
    public var negotiated: SDPNegotiated? { withPeerConnection { pc, _ in pc.negotiated } }
    /// The ICE state and the pair media uses (see `PeerConnection.selectedCandidatePair`).
    public var iceState: ICEConnectionState { withPeerConnection { pc, _ in pc.iceState } }
    public var selectedCandidatePair: ICESelectedPair? { withPeerConnection { pc, _ in pc.selectedCandidatePair } }

    /// Sends BYE and close_notify, closes its sockets (own sockets) or leaves the shared endpoint. Idempotent.
    public func close() {
        let io: IO? = withPeerConnection { pc, now in
            guard !closed else { return nil }
            closed = true
            pc.close(now: now)
            return self.io
        }
        switch io {
        case .owned(let shared): shared.release(localAddresses + lock.withLock { tcpLocals }, of: ObjectIdentifier(self))
        case .shared(let endpoint, _): endpoint.remove(self)
        case nil: break
        }
    }

    // MARK: IO thread

    func receive(_ bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant) {
        lock.lock()
        if !closed { pc.handleReceive(bytes, from: from, local: local, now: now) }
        // On a shared socket, media is routed by the remote address of the pair ICE selected (after a
        // check that passed MESSAGE-INTEGRITY), never by an address a datagram merely claimed.
        if case .shared(_, let unretained) = io, let remote = pc.transport?.ice.selectedRoute?.remote, remote != routedAddress {
            routedAddress = remote
            unretained._withUnsafeGuaranteedRef { $0.route(remote, to: self) }
        }
        let events = flushLocked()
        lock.unlock()
        deliver(events)
    }

    func turnConnectionClosed(local: TransportAddress, now: Instant, reason: OTError?) {
        withPeerConnection { pc, _ in if !closed { pc.turnConnectionClosed(socket: local, now: now, reason: reason) } }
    }

    func timeout(now: Instant) {
        lock.lock()
        deadlineGiven = nil  // the IO forgot it when it fired
        if !closed { pc.handleTimeout(now: now) }
        let events = flushLocked()
        lock.unlock()
        deliver(events)
    }

    /// The events one call produced: most calls produce none or one (a packet), which need no array.
    private enum Events {
        case none, one(PeerConnectionEvent), many([PeerConnectionEvent])
    }

    /// Sends pending datagrams and (with `deadline`) updates the deadline; returns the events to deliver. Called
    /// under `lock`.
    private func flushLocked(deadline: Bool = true) -> Events {
        switch io {
        case .owned(let shared):
            while let t = pc.pollTransmit() { shared.send(t.bytes, from: t.source, to: t.destination) }
            guard deadline else { break }
            let d = closed ? nil : pc.pollTimeout()
            if deadlineGiven != .some(d) { deadlineGiven = d; shared.setDeadline(d, for: self) }
        case .shared(_, let unretained):
            unretained._withUnsafeGuaranteedRef { endpoint in
                while let t = pc.pollTransmit() { endpoint.send(t.bytes, to: t.destination) }
                guard deadline else { return }
                let d = closed ? nil : pc.pollTimeout()
                if deadlineGiven != .some(d) { deadlineGiven = d; endpoint.setDeadline(d, for: self) }
            }
        }
        guard let first = pc.pollEvent() else { return .none }
        guard let second = pc.pollEvent() else { return .one(first) }
        var events = [first, second]
        while let e = pc.pollEvent() { events.append(e) }
        return .many(events)
    }

    private func deliver(_ events: Events) {
        switch events {
        case .none: return
        case .one(let e):
            delivery.lock()
            handler(e)
        case .many(let all):
            delivery.lock()
            for e in all { handler(e) }
        }
        delivery.unlock()
    }
}
