import OTBase
import OTWire
@testable import OTTransport

/// One side of an emulated connection: an ICE agent plus, optionally, a DTLS endpoint fed by the demultiplexer.
final class EmulatedPeer {
    let name: String
    var agent: ICEAgent
    var dtls: DTLSEndpoint?
    var iceEvents: [ICEEvent] = []
    var dtlsEvents: [DTLSEvent] = []
    var received: [[UInt8]] = []
    var dtlsStarted = false
    /// Drops outgoing DTLS datagrams while this returns true (for targeted loss).
    var dropDTLS: ([UInt8]) -> Bool = { _ in false }

    init(name: String, agent: ICEAgent) { self.name = name; self.agent = agent }

    var connected: Bool { agent.state.isConnected }
    var dtlsConnected: Bool { dtlsEvents.contains { if case .connected = $0 { true } else { false } } }

    func nextDeadline() -> Instant? {
        [agent.pollTimeout(), dtls?.pollTimeout()].compactMap { $0 }.min()
    }

    func timeout(_ now: Instant) {
        agent.handleTimeout(now: now)
        dtls?.handleTimeout(now: now)
    }

    func receive(_ d: EmulatedDatagram, now: Instant) {
        switch DemuxKind.classify(d.bytes) {
        case .stun: agent.handleReceive(d.bytes, from: d.from, local: d.to, now: now)
        case .dtls: dtls?.handleReceive(d.bytes, now: now)
        default: received.append(d.bytes)
        }
    }

    func drain(into net: inout NetworkEmulator, now: Instant) {
        while let t = agent.pollTransmit() { net.send(t.bytes, from: t.source, to: t.destination, now: now) }
        while let e = agent.pollEvent() { iceEvents.append(e) }
        if agent.selectedPair != nil, let dtls, !dtlsStarted {
            dtlsStarted = true
            if let rtt = agent.roundTripTime { dtls.setRoundTripTime(rtt) }  // as MediaTransport does
            dtls.start(now: now)
        }
        if let route = agent.selectedPair, let dtls {
            while let b = dtls.pollTransmit() { if !dropDTLS(b) { net.send(b, from: route.local.address, to: route.remote.address, now: now) } }
        }
        while let e = dtls?.pollEvent() { dtlsEvents.append(e) }
    }

    /// Sends an application datagram over the selected pair.
    func sendMedia(_ bytes: [UInt8], into net: inout NetworkEmulator, now: Instant) {
        guard let route = agent.selectedPair else { return }
        net.send(bytes, from: route.local.address, to: route.remote.address, now: now)
    }
}

/// Two peers, an emulator and a virtual clock, run deterministically.
struct EmulatedPair {
    let clock = VirtualClock()
    var net: NetworkEmulator
    let a: EmulatedPeer
    let b: EmulatedPeer

    init(seed: UInt64, conditions: LinkConditions, a: EmulatedPeer, b: EmulatedPeer) {
        net = NetworkEmulator(seed: seed, conditions: conditions)
        self.a = a; self.b = b
    }

    func owner(of address: TransportAddress) -> EmulatedPeer? {
        if a.agent.localCandidates.contains(where: { $0.address == address }) { return a }
        if b.agent.localCandidates.contains(where: { $0.address == address }) { return b }
        return nil
    }

    /// Runs until `done` holds or `limit` of virtual time passes; returns whether `done` held.
    @discardableResult
    mutating func run(for limit: Duration, until done: () -> Bool = { false }) -> Bool {
        let end = clock.now() + limit
        var steps = 0
        while steps < 200_000 {
            steps += 1
            let now = clock.now()
            a.drain(into: &net, now: now)
            b.drain(into: &net, now: now)
            if done() { return true }
            while let d = net.poll(now: now) {
                owner(of: d.to)?.receive(d, now: now)
                a.drain(into: &net, now: now); b.drain(into: &net, now: now)
            }
            if done() { return true }
            let next = [a.nextDeadline(), b.nextDeadline(), net.nextDelivery].compactMap { $0 }.min()
            guard let next, next <= end else { clock.advance(to: end); return done() }
            clock.advance(to: next)
            let t = clock.now()
            if let d = a.nextDeadline(), d <= t { a.timeout(t) }
            if let d = b.nextDeadline(), d <= t { b.timeout(t) }
        }
        return done()
    }
}
