import OTBase
import OTWire

/// What a media transport reports.
public enum MediaTransportEvent: Sendable, Equatable {
    case ice(ICEEvent)
    case dtls(DTLSEvent)
    /// An SRTP or SRTCP datagram (still protected) that arrived on the selected path.
    case srtp([UInt8], rtcp: Bool)
    /// A local candidate was gathered (a TURN relayed address): signal it to the peer (trickle).
    case localCandidate(SDPCandidate)
    case turn(TURNEvent)
}

/// ICE and DTLS on one demultiplexed socket set (RFC 7983): the sans-IO transport of one peer connection.
/// STUN goes to the ICE agent, DTLS to the endpoint (started once ICE selects a pair), SRTP/SRTCP comes
/// out as events. Outgoing DTLS and media leave on the selected pair. TURN clients (`addTURN`) add relayed
/// candidates: what ICE sends from a relayed address goes through its TURN client to the server.
public final class MediaTransport {
    public let ice: ICEAgent
    public let dtls: DTLSEndpoint
    /// TURN clients and the local socket each uses to reach its server.
    public private(set) var turns: [(client: TURNClient, socket: TransportAddress)] = []
    private var transmits = FIFO<ICETransmit>()
    private var events = FIFO<MediaTransportEvent>()
    private var dtlsStarted = false
    private var dtlsTimerRTT: Duration?

    public init(ice: ICEAgent, dtls: DTLSEndpoint) {
        self.ice = ice
        self.dtls = dtls
    }

    /// True once DTLS finished (SRTP keys are in `dtls.keyingMaterial`).
    public var isConnected: Bool { dtls.isConnected && ice.selectedPair != nil }

    /// Starts allocating a relayed candidate through `client`, talking to its server from local socket `socket`.
    public func addTURN(_ client: TURNClient, socket: TransportAddress, now: Instant) {
        turns.append((client, socket))
        client.start(now: now)
        pump(now: now)
    }

    /// The TCP (or TLS) connection from local `socket` to a TURN server closed (or could not be made, for `reason`):
    /// its client fails.
    public func turnConnectionClosed(socket: TransportAddress, now: Instant, reason: OTError? = nil) {
        for t in turns where t.socket == socket && t.client.config.transport.isStream { t.client.connectionClosed(now: now, reason: reason) }
        pump(now: now)
    }

    /// Adds a remote candidate to ICE and installs TURN permissions for its address.
    public func addRemoteCandidate(_ c: SDPCandidate, now: Instant) {
        ice.addRemoteCandidate(c)
        for t in turns { t.client.createPermission(c.address.ip, now: now) }
        pump(now: now)
    }

    /// Feeds a datagram received on local socket `local`.
    public func handleReceive(_ bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant) {
        if let t = turns.first(where: { $0.socket == local && $0.client.config.server == from }) {
            t.client.handleReceive(bytes, now: now)
            pump(now: now)
            return
        }
        demux(bytes, from: from, local: local, now: now)
        pump(now: now)
    }

    private func demux(_ bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant) {
        let kind = DemuxKind.classify(bytes)
        switch kind {
        case .stun: ice.handleReceive(bytes, from: from, local: local, now: now)
        case .dtls:
            if !dtls.isConnected { ice.handlePeerHandshake(from: from, local: local, now: now) }
            dtls.handleReceive(bytes, now: now)
        case .rtp, .rtcp:
            // Media from a peer that finished its handshake before we did: its final flight was lost.
            if !dtls.isConnected { dtls.handlePeerMedia(now: now) }
            events.push(.srtp(bytes, rtcp: kind == .rtcp))
        case .zrtp, .turnChannel, .unknown: break
        }
    }

    public func handleTimeout(now: Instant) {
        for t in turns { t.client.handleTimeout(now: now) }
        ice.handleTimeout(now: now)
        dtls.handleTimeout(now: now)
        pump(now: now)
    }

    /// SRTP/SRTCP and DTLS datagrams not sent because consent for the selected pair had expired (RFC 7675).
    public private(set) var sendsDroppedWithoutConsent = 0

    /// Counts a datagram the caller did not send because consent had expired (it checked `ice.consentExpired`).
    public func countDroppedWithoutConsent() { sendsDroppedWithoutConsent += 1 }

    /// Queues an (already protected) SRTP/SRTCP datagram on the selected pair. Returns false without one, or
    /// when consent for it expired (RFC 7675: counted in `sendsDroppedWithoutConsent`, nothing is sent).
    @discardableResult
    public func sendMedia(_ bytes: [UInt8]) -> Bool {
        guard let route = ice.selectedRoute else { return false }
        guard !ice.consentExpired else { sendsDroppedWithoutConsent += 1; return false }
        transmits.push(ICETransmit(source: route.local, destination: route.remote, bytes: bytes))
        routeRelayed(now: nil)
        return true
    }

    /// Moves transmits whose source is a relayed address into their TURN client.
    private func routeRelayed(now: Instant?) {
        guard !turns.isEmpty else { return }
        var relayed = false
        for x in transmits.elements {
            if let t = turns.first(where: { $0.client.relayedAddress == x.source }) {
                t.client.send(x.bytes, to: x.destination, now: now ?? lastNow)
                relayed = true
            }
        }
        if relayed { transmits.filter { x in !turns.contains { $0.client.relayedAddress == x.source } } }
        for t in turns {
            while let b = t.client.pollTransmit() { transmits.push(ICETransmit(source: t.socket, destination: t.client.config.server, bytes: b)) }
        }
    }

    private var lastNow = Instant.zero

    /// Collects output after calls made directly on `ice` or `dtls` (credentials, candidates, `dtls.send`).
    public func flush(now: Instant) { pump(now: now) }

    private func pump(now: Instant) {
        lastNow = now
        for t in turns {
            while let e = t.client.pollEvent() {
                switch e {
                case .allocated(let relayed, _):
                    for r in ice.remoteCandidates { t.client.createPermission(r.address.ip, now: now) }
                    if let c = ice.addLocalCandidate(relayed, kind: .relay) { events.push(.localCandidate(c)) }
                    // The allocation's mapped address is a server-reflexive candidate of the socket (UDP only).
                    if let mapped = t.client.mappedAddress, t.client.config.transport == .udp { ice.addServerReflexive(mapped, base: t.socket) }
                case .data(let peer, let bytes):
                    if let relayed = t.client.relayedAddress { demux(bytes, from: peer, local: relayed, now: now) }
                    continue
                case .failed: break
                }
                events.push(.turn(e))
            }
        }
        while let t = ice.pollTransmit() { transmits.push(t) }
        while let e = ice.pollEvent() { events.push(.ice(e)) }
        // DTLS flights retransmit after a timeout from the round-trip time ICE measured (an ICE-lite agent measures
        // none: DTLS then starts from its default and its own flights' round trips).
        if let rtt = ice.roundTripTime, rtt != dtlsTimerRTT, !dtls.isConnected {
            dtlsTimerRTT = rtt
            dtls.setRoundTripTime(rtt)
        }
        if !dtlsStarted, ice.selectedPair != nil {
            dtlsStarted = true
            dtls.start(now: now)
        }
        if let route = ice.selectedPair {
            while let d = dtls.pollTransmit() {
                if ice.consentExpired { sendsDroppedWithoutConsent += 1; continue }
                transmits.push(ICETransmit(source: route.local.address, destination: route.remote.address, bytes: d))
            }
        }
        while let e = dtls.pollEvent() { events.push(.dtls(e)) }
        routeRelayed(now: now)
    }

    public func pollTransmit() -> ICETransmit? { transmits.pop() }
    public func pollEvent() -> MediaTransportEvent? { events.pop() }
    public func pollTimeout() -> Instant? {
        var next = ice.pollTimeout()
        if let t = dtls.pollTimeout(), next.map({ t < $0 }) ?? true { next = t }
        for turn in turns { if let t = turn.client.pollTimeout(), next.map({ t < $0 }) ?? true { next = t } }
        return next
    }
}
