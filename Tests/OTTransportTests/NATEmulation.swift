import OTBase
import OTWire
@testable import OTTransport

/// A NAT in front of private addresses: port-preserving, endpoint-independent mapping, address-and-port-dependent
/// filtering (what Linux masquerading does): a datagram from outside reaches a private socket only if that socket
/// sent to the same remote address and port before.
struct EmulatedNAT {
    let publicIP: IPAddress
    let inside: Set<IPAddress>
    /// (private socket, remote) pairs that went out.
    var permissions: Set<[TransportAddress]> = []
}

/// Peer connections behind NATs (or not), a STUN server that answers Binding requests, signalling that trickles
/// candidates at once, all on the seeded emulator with a virtual clock: deterministic for a seed.
final class NATedPeerConnections: EmulatedPeerConnections {
    var nats: [EmulatedNAT] = []
    /// STUN servers that answer; `silentServers` swallow requests.
    var stunServers: Set<TransportAddress> = []
    var silentServers: Set<TransportAddress> = []
    /// Trickle each peer's candidates to the other (peers 0 and 1).
    var trickle = true
    /// Candidates each peer trickled.
    var trickled: [[SDPCandidate]] = []
    /// Datagrams dropped by a NAT's filter or because their destination was a private address elsewhere.
    var natDropped = 0

    override init(seed: UInt64, conditions: LinkConditions = LinkConditions()) { super.init(seed: seed, conditions: conditions) }

    func add(_ pc: PeerConnection, _ addresses: [String]) {
        add(pc, addresses: addresses.compactMap { TransportAddress($0) })
        trickled.append([])
    }

    private func nat(inside ip: IPAddress) -> Int? { nats.firstIndex { $0.inside.contains(ip) } }

    /// Sends through the sender's NAT, if it has one.
    override func send(_ bytes: [UInt8], from: TransportAddress, to: TransportAddress, now: Instant) {
        guard let n = nat(inside: from.ip) else { net.send(bytes, from: from, to: to, now: now); return }
        if let m = nat(inside: to.ip), m != n { natDropped += 1; return }  // another private network: no route
        nats[n].permissions.insert([from, to])
        net.send(bytes, from: TransportAddress(ip: nats[n].publicIP, port: from.port), to: to, now: now)
    }

    override func deliver(_ d: EmulatedDatagram, now: Instant) {
        var to = d.to
        if let n = nats.firstIndex(where: { $0.publicIP == d.to.ip }) {
            guard let inside = peers.flatMap(\.addresses).first(where: { nats[n].inside.contains($0.ip) && $0.port == d.to.port }),
                  nats[n].permissions.contains([inside, d.from]) else { natDropped += 1; return }
            to = inside
        }
        if stunServers.contains(to) {
            guard let m = try? STUNMessage.parse(d.bytes), m.messageClass == .request else { return }
            let ok = STUNMessage(method: .binding, messageClass: .success, transactionID: m.transactionID, attributes: [.xorMappedAddress(d.from)])
            net.send(ok.encode(), from: to, to: d.from, now: now)
            return
        }
        if silentServers.contains(to) { return }
        receive(d.bytes, from: d.from, at: to, now: now)
    }

    /// Trickles peer `i`'s candidates to the other peer.
    override func observe(_ event: PeerConnectionEvent, of i: Int, now: Instant) {
        guard trickle, peers.count == 2 else { return }
        let other = peers[1 - i].pc
        if case .localCandidate(let c) = event { trickled[i].append(c); other.addRemoteCandidate(c, now: now) }
        if case .localCandidatesComplete = event { other.endOfRemoteCandidates(now: now) }
    }

    func failed(_ i: Int) -> OTError? { events[i].lazy.compactMap { if case .failed(let e) = $0 { e } else { nil } }.first }
    func gatheringDone(_ i: Int) -> Bool { has(i) { $0 == .localCandidatesComplete } }
    func rtpCount(_ i: Int) -> Int { events[i].filter { if case .rtp = $0 { true } else { false } }.count }
}
