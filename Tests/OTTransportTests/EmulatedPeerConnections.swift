import OTBase
import OTWire
@testable import OTTransport

/// Peer connections on the seeded emulator with a virtual clock: deterministic for a seed. `run` drives them: it
/// moves what they send onto the emulator, delivers its datagrams and fires their timers in virtual time. Subclasses
/// route datagrams their own way (`send`, `deliver`) and act on events (`observe`): NATs, STUN servers, trickle ICE.
class EmulatedPeerConnections {
    let clock = VirtualClock()
    var net: NetworkEmulator
    var peers: [(pc: PeerConnection, addresses: [TransportAddress])] = []
    var events: [[PeerConnectionEvent]] = []
    /// With `logWire`, every datagram a peer put on the wire: its index, kind and send time.
    var logWire = false
    var wire: [(peer: Int, kind: DemuxKind, at: Instant)] = []

    init(seed: UInt64, conditions: LinkConditions) { net = NetworkEmulator(seed: seed, conditions: conditions) }

    /// A peer with one host candidate at `address`.
    func add(_ pc: PeerConnection, _ address: String) { add(pc, addresses: [TransportAddress(address)!]) }

    /// A peer with a host candidate at each of `addresses`.
    func add(_ pc: PeerConnection, addresses: [TransportAddress]) {
        for a in addresses { pc.addLocalCandidate(a) }
        peers.append((pc, addresses))
        events.append([])
    }

    /// Puts a datagram a peer sent onto the emulator.
    func send(_ bytes: [UInt8], from: TransportAddress, to: TransportAddress, now: Instant) {
        net.send(bytes, from: from, to: to, now: now)
    }

    /// Hands a datagram the emulator delivers to the peer at its destination.
    func deliver(_ d: EmulatedDatagram, now: Instant) { receive(d.bytes, from: d.from, at: d.to, now: now) }

    /// Gives `bytes` to the peer with the local address `to`, if any.
    func receive(_ bytes: [UInt8], from: TransportAddress, at to: TransportAddress, now: Instant) {
        peers.first { $0.addresses.contains(to) }?.pc.handleReceive(bytes, from: from, local: to, now: now)
    }

    /// Called with each event of peer `i`, after it is recorded in `events`.
    func observe(_ event: PeerConnectionEvent, of i: Int, now: Instant) {}

    func drain(now: Instant) {
        for (i, p) in peers.enumerated() {
            while let t = p.pc.pollTransmit() {
                if logWire { wire.append((i, DemuxKind.classify(t.bytes), now)) }
                send(t.bytes, from: t.source, to: t.destination, now: now)
            }
            while let e = p.pc.pollEvent() {
                events[i].append(e)
                observe(e, of: i, now: now)
            }
        }
    }

    /// Runs until `done` or `limit` of virtual time.
    @discardableResult
    func run(for limit: Duration, until done: () -> Bool = { false }) -> Bool {
        let end = clock.now() + limit
        for _ in 0..<200_000 {
            let now = clock.now()
            drain(now: now)
            if done() { return true }
            while let d = net.poll(now: now) {
                deliver(d, now: now)
                drain(now: now)
            }
            let next = (peers.map { $0.pc.pollTimeout() } + [net.nextDelivery]).compactMap { $0 }.min()
            guard let next, next <= end else { clock.advance(to: end); drain(now: clock.now()); return done() }
            clock.advance(to: max(next, now))
            let t = clock.now()
            for p in peers { if let d = p.pc.pollTimeout(), d <= t { p.pc.handleTimeout(now: t) } }
        }
        return done()
    }

    /// An offerer made from `offerer` at 10.0.0.1:5000 and an answerer made from `answerer` at 10.0.0.2:6000 (peers
    /// 0 and 1), their descriptions exchanged, run until both are connected; throws when 30 s of virtual time do not do it.
    func connectedPair(_ offerer: PeerConnectionConfig, _ answerer: PeerConnectionConfig) throws -> (a: PeerConnection, b: PeerConnection) {
        let now = clock.now()
        let a = try PeerConnection(config: offerer, now: now), b = try PeerConnection(config: answerer, now: now)
        add(a, "10.0.0.1:5000"); add(b, "10.0.0.2:6000")
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer(), now: now), now: now)
        guard run(for: .seconds(30), until: { connected(0) && connected(1) }) else { throw NotConnected(events: events) }
        return (a, b)
    }

    /// The pair did not connect; `events` says how far each got.
    struct NotConnected: Error { let events: [[PeerConnectionEvent]] }

    func has(_ i: Int, _ match: (PeerConnectionEvent) -> Bool) -> Bool { events[i].contains(where: match) }
    func connected(_ i: Int) -> Bool { has(i) { if case .connected = $0 { true } else { false } } }

    /// RTP packets (unprotected) peer `i` received so far, removed from its events.
    func takeRTP(_ i: Int) -> [[UInt8]] {
        var out: [[UInt8]] = []
        events[i].removeAll { if case .rtp(let r) = $0 { out.append(r.bytes); return true }; return false }
        return out
    }
}
