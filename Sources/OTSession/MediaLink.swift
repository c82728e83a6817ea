import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTTransport
import OTWire

/// A `PeerConnectionDriver` (own sockets on the process-wide IO thread) whose events are handed, in order, to the owner's
/// serial `queue`, so the publisher's and subscriber's media state stays confined to that queue.
final class MediaLink: @unchecked Sendable {
    private let driver: PeerConnectionDriver

    /// Binds the sockets `bindAddresses(serverURL:)` picks, gathers server-reflexive candidates from the session's
    /// STUN (and UDP TURN) servers, adds its TURN servers (over UDP from the first socket, over TCP or TLS through a
    /// connection of their own, through the proxy when there is one; relayed candidates only under the relay
    /// transport policy) and leaves LAN host candidates unsignalled under `filterOutLanCandidates`; the process-wide
    /// IO thread serves it. `servers` are the session's (`Session.mediaServers()`): the session server's and the
    /// custom ones, as `includeServers` says, names resolved.
    init(config: PeerConnectionConfig, settings: SessionSettings, servers: (servers: ResolvedICEServers, route: StreamRoute),
         queue: DispatchQueue, onEvent: @escaping @Sendable ([PeerConnectionEvent]) -> Void) throws {
        var config = config
        let ice = settings.iceConfig
        config.relayOnly = ice.transportPolicy == .relay
        config.stunServers = config.relayOnly ? [] : servers.servers.stun
        config.filterOutLanCandidates = ice.filterOutLanCandidates
        let turns = servers.servers.turn
        if config.relayOnly && turns.isEmpty {
            let whose = ice.includeServers == .custom ? "among the custom ICE servers (includeServers is custom)"
                : "from the session server or among the custom ICE servers"
            let unresolved = servers.servers.failures.isEmpty ? "" : " (\(servers.servers.failures.joined(separator: "; ")))"
            throw OTError(.invalidParameter, "the relay transport policy needs a TURN server: there is none \(whose)\(unresolved)")
        }
        driver = try PeerConnectionDriver(config: config, bind: Self.bindAddresses(serverURL: settings.serverURL)) { e in
            queue.async { onEvent([e]) }
        }
        for t in turns { driver.addTURN(t, route: servers.route) }
    }

    /// Host candidates: with a session server on this machine (loopback URL) every peer is local too, so one
    /// loopback socket; otherwise one socket per IPv4 interface address (loopback excluded).
    static func bindAddresses(serverURL: String) -> [TransportAddress] {
        let loopback = TransportAddress(ip: .v4(0x7F00_0001), port: 0)
        guard let host = try? ServerEndpoint.parse(serverURL).host else { return [loopback] }
        if host == "localhost" || IPAddress(host)?.isLoopback == true { return [loopback] }
        let all = PeerConnectionDriver.hostBindAddresses()
        return all.isEmpty ? [loopback] : all
    }

    deinit { driver.close() }

    /// Our offer (SDP text).
    func createOffer() throws -> String { try driver.createOffer() }
    /// Our answer to the peer's offer (connecting starts), or to its ICE restart offer.
    func createAnswer(offer: String) throws -> String { try driver.createAnswer(toOffer: offer) }
    /// The peer's answer to our offer (or to our ICE restart offer); connecting starts.
    func setRemoteAnswer(_ sdp: String) throws { try driver.setRemoteAnswer(sdp) }
    /// An ICE restart offer (new ICE credentials; DTLS and SRTP go on): send it like an offer and give its answer
    /// to `setRemoteAnswer`. The peer's link answers it with `createAnswer(offer:)`, which restarts too.
    /// Sessions do not call this yet (reconnection decides when).
    func restartICE() throws -> String { try driver.createOffer(iceRestart: true) }
    /// What both sides agreed, after the descriptions are exchanged.
    var negotiated: SDPNegotiated? { driver.negotiated }
    /// The ICE pair media uses (our candidate as the peer sees it) and the connection's counters.
    var selectedCandidatePair: ICESelectedPair? { driver.selectedCandidatePair }
    var stats: PeerConnectionStats { driver.stats }
    /// The round-trip time the connection works with (RTCP-measured, or ICE/DTLS's until then).
    var roundTripTime: Duration { driver.withPeerConnection { pc, _ in pc.rtpSession.rtt } }
    /// Packets lost from a remote SSRC's numbering (RFC 3550 cumulative loss, after retransmissions and FEC repaired
    /// what they could; the transport sees every packet of the SSRC, FEC packets included).
    func packetsLost(ssrc: UInt32) -> Int? {
        driver.withPeerConnection { pc, _ in pc.rtpSession.statistics(ssrc: ssrc).map { Int(max(0, $0.cumulativeLost)) } }
    }
    /// NACK counters of a remote SSRC (what we asked to have resent), and retransmission counters of one of ours.
    func nackCounters(ssrc: UInt32) -> (nacked: Int, recovered: Int, givenUp: Int, outstanding: Int)? {
        driver.withPeerConnection { pc, _ in pc.rtpSession.nackCounters(ssrc: ssrc) }
    }
    func retransmissionCounters(ssrc: UInt32) -> (packets: Int, bytes: Int, misses: Int)? {
        driver.withPeerConnection { pc, _ in pc.rtpSession.retransmissionCounters(ssrc: ssrc) }
    }

    /// Adds the `codec` the connection agreed for `kind` to a stats report; returns its id (nil before negotiation).
    func addCodec(_ kind: String, to b: inout RTCStatsReportBuilder) -> String? {
        guard let m = negotiated?.media.first(where: { $0.kind == kind }), let f = m.format else { return nil }
        return b.addCodec(f, payloadType: m.codec.payloadType)
    }

    /// The payload format the connection agreed for `kind`, once negotiated.
    func agreedFormat(_ kind: String) -> (any RTPPayloadFormat)? {
        negotiated?.media.first { $0.kind == kind }?.format
    }

    /// Adds the selected pair to a stats report (`candidate-pair`, `local-candidate`, `remote-candidate`).
    func addCandidatePair(to b: inout RTCStatsReportBuilder, id: String, availableOutgoingBitrate: Int? = nil) {
        guard let pair = selectedCandidatePair else { return }
        let s = stats
        let relay = pair.local.kind == .relay ? driver.withPeerConnection { pc, _ in pc.relayProtocol(of: pair.local.address) } : nil
        b.addCandidatePair(id: id, local: pair.local, remote: pair.remote, nominated: pair.nominated,
                           bytesSent: s.bytesSent, bytesReceived: s.bytesReceived, currentRoundTripTime: s.roundTripTime,
                           availableOutgoingBitrate: availableOutgoingBitrate,
                           localRelayProtocol: relay.map { switch $0 { case .udp: "udp"; case .tcp: "tcp"; case .tls: "tls" } })
    }

    /// The `mediaCandidate` message for one of our trickled candidates (`""`: the end of them), naming the m-section
    /// of our description that carries the transport (`sdpMid`, `sdpMLineIndex`).
    func candidateMessage(peerId: String, _ candidate: String) -> ClientMessage {
        let section = driver.withPeerConnection { pc, _ in pc.localDescription?.transportSection }
        return .mediaCandidate(peerId: peerId, candidate: candidate, sdpMid: section?.mid, sdpMLineIndex: section?.index)
    }

    /// A trickled candidate from signaling (`""` ends the candidates); malformed and mDNS ones are ignored.
    func addRemoteCandidate(_ line: String) {
        if line.isEmpty { driver.withPeerConnection { pc, now in pc.endOfRemoteCandidates(now: now) }; return }
        // mDNS names (browsers' host candidates) are not resolved: the peer shows up as peer-reflexive instead.
        if SDPCandidate.isMDNS(line) { Log.debug("media", "ignored an mDNS remote candidate"); return }
        guard let c = try? SDPCandidate(parsing: line) else { Log.warn("media", "ignored a bad remote candidate"); return }
        driver.addRemoteCandidate(c)
    }

    /// Protects and sends an RTP packet (the buffer holds the protected bytes afterwards).
    func sendRTP(_ packet: inout [UInt8]) { driver.sendRTP(&packet) }

    /// Asks the peer for a keyframe of its SSRC.
    func requestKeyframe(ssrc: UInt32) { driver.requestKeyframe(ssrc: ssrc) }

    /// Sends BYE, closes DTLS, stops the IO thread and closes the sockets. Idempotent.
    func close() { driver.close() }
}
