import OTBase
import OTWire

/// What a media transport reports.
public enum MediaTransportEvent: Sendable, Equatable {
    case ice(ICEEvent)
    case dtls(DTLSEvent)
    /// An SRTP or SRTCP datagram (still protected) that arrived on the selected path.
    case srtp([UInt8], rtcp: Bool)
}

/// ICE and DTLS on one demultiplexed socket set (RFC 7983): the sans-IO transport of one peer connection.
/// STUN goes to the ICE agent, DTLS to the endpoint (started once ICE selects a pair), SRTP/SRTCP comes
/// out as events. Outgoing DTLS and media leave on the selected pair.
public final class MediaTransport {
    public let ice: ICEAgent
    public let dtls: DTLSEndpoint
    private var transmits: [ICETransmit] = []
    private var events: [MediaTransportEvent] = []
    private var dtlsStarted = false

    public init(ice: ICEAgent, dtls: DTLSEndpoint) {
        self.ice = ice
        self.dtls = dtls
    }

    /// True once DTLS finished (SRTP keys are in `dtls.keyingMaterial`).
    public var isConnected: Bool { dtls.isConnected && ice.selectedPair != nil }

    /// Feeds a datagram received on local socket `local`.
    public func handleReceive(_ bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant) {
        switch DemuxKind.classify(bytes) {
        case .stun: ice.handleReceive(bytes, from: from, local: local, now: now)
        case .dtls: dtls.handleReceive(bytes, now: now)
        case .rtp: events.append(.srtp(bytes, rtcp: false))
        case .rtcp: events.append(.srtp(bytes, rtcp: true))
        case .zrtp, .turnChannel, .unknown: break
        }
        pump(now: now)
    }

    public func handleTimeout(now: Instant) {
        ice.handleTimeout(now: now)
        dtls.handleTimeout(now: now)
        pump(now: now)
    }

    /// Queues an (already protected) SRTP/SRTCP datagram on the selected pair. Returns false without one.
    @discardableResult
    public func sendMedia(_ bytes: [UInt8]) -> Bool {
        guard let route = ice.selectedPair else { return false }
        transmits.append(ICETransmit(source: route.local.address, destination: route.remote.address, bytes: bytes))
        return true
    }

    /// Collects output after calls made directly on `ice` or `dtls` (credentials, candidates, `dtls.send`).
    public func flush(now: Instant) { pump(now: now) }

    private func pump(now: Instant) {
        while let t = ice.pollTransmit() { transmits.append(t) }
        while let e = ice.pollEvent() { events.append(.ice(e)) }
        if !dtlsStarted, ice.selectedPair != nil {
            dtlsStarted = true
            dtls.start(now: now)
        }
        if let route = ice.selectedPair {
            while let d = dtls.pollTransmit() {
                transmits.append(ICETransmit(source: route.local.address, destination: route.remote.address, bytes: d))
            }
        }
        while let e = dtls.pollEvent() { events.append(.dtls(e)) }
    }

    public func pollTransmit() -> ICETransmit? { transmits.isEmpty ? nil : transmits.removeFirst() }
    public func pollEvent() -> MediaTransportEvent? { events.isEmpty ? nil : events.removeFirst() }
    public func pollTimeout() -> Instant? { [ice.pollTimeout(), dtls.pollTimeout()].compactMap { $0 }.min() }
}
