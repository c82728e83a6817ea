import OTBase
import OTRTP
import OTWire

/// Settings of a `PeerConnection`.
public struct PeerConnectionConfig: Sendable {
    /// Be an ICE-lite agent (the media router): answers checks, never sends them.
    public var iceLite = false
    /// Use relayed (TURN) candidates only (`transportPolicy` relay).
    public var relayOnly = false
    /// STUN servers to gather server-reflexive candidates from, for every local socket (trickled as they come).
    public var stunServers: [TransportAddress] = []
    /// Do not signal host candidates with private or link-local addresses (`IPAddress.isLAN`); their sockets
    /// still answer checks and are the bases of server-reflexive and relayed candidates.
    public var filterOutLanCandidates = false
    /// Negotiate an audio and a video section.
    public var audio = true
    public var video = true
    /// The payload formats offered and accepted per kind, in order of preference (`SDPLocalParameters`).
    public var audioFormats: [any RTPPayloadFormat] = [PayloadFormats.opus]
    public var videoFormats: [any RTPPayloadFormat] = [PayloadFormats.vp8]
    /// Answer with the first of our formats that the offer lists, in our order (`SDPLocalParameters.answerInLocalOrder`).
    public var answerInLocalOrder = false
    /// What we send on each section; nil means receive only.
    public var audioTrack: SDPLocalTrack?
    public var videoTrack: SDPLocalTrack?
    /// RTCP CNAME.
    public var cname = "libotsession"
    /// Seed of the ICE pacing and RTCP interval randomization.
    public var seed: UInt64 = .random(in: 1 ... .max)
    /// DTLS timers: wall clock for real sockets, `.virtualClock` for tests on a `VirtualClock`.
    public var dtlsTimerMode: DTLSEndpoint.TimerMode = .wallClock
    public var srtpProfiles: [SRTPProfile] = SRTPProfile.preferred
    /// Answer NACKs from the retransmission cache and send NACKs for gaps.
    public var nack = true
    /// With `nack`: keep a copy of each RTP packet sent to answer NACKs from. Off (the media router, which keeps one
    /// history per stream for all its subscribers), NACKs that call for a resend come up as `retransmissionsRequested`
    /// and are answered with `resendRTP`.
    public var sendHistory = true
    /// Ask for the round trip with RTCP XR RRTRs while media comes in and none goes out (RFC 3611; the peer answers with
    /// DLRR; `RTPSession.Config.receiverReferenceTime`): a leg that only receives (a subscriber, the router's uplink)
    /// gets no report block about a stream of its own to measure it from.
    public var receiverReferenceTime = true
    /// Offer/answer video FEC (ULPFEC inside RED), sent when the measured loss calls for it.
    public var videoFEC = true
    /// Overrides of the ICE timers (consent, pacing); role, lite and credentials are set by the connection.
    public var ice: (@Sendable (inout ICEConfig) -> Void)?
    /// Run a send-side bandwidth estimator on transport-wide feedback for what we send (nil: none). Stamping
    /// transport-wide sequence numbers and sending feedback for what we receive happen whenever the extension
    /// is negotiated.
    public var bandwidthEstimation: BandwidthEstimatorConfig?
    /// How often transport-wide feedback goes out while packets carrying the extension arrive.
    public var transportFeedbackInterval: Duration = .milliseconds(50)
    /// 1:1 NAT: host candidates are described with this address instead of the one their socket is bound at (the
    /// public address that the NAT maps to the bound one, port unchanged). The media router's `advertise`.
    public var advertisedHostIP: IPAddress?

    public init(audio: Bool = true, video: Bool = true, audioTrack: SDPLocalTrack? = nil, videoTrack: SDPLocalTrack? = nil, iceLite: Bool = false) {
        self.audio = audio; self.video = video; self.audioTrack = audioTrack; self.videoTrack = videoTrack; self.iceLite = iceLite
    }
}

/// What a `PeerConnection` reports.
public enum PeerConnectionEvent: Sendable, Equatable {
    /// A local candidate to signal to the peer (trickle): server-reflexive and relayed candidates gathered after
    /// the description.
    case localCandidate(SDPCandidate)
    /// Gathering finished (every STUN and TURN server answered or timed out) after the description was made
    /// without `a=end-of-candidates`: signal the end of candidates to the peer.
    case localCandidatesComplete
    /// ICE selected a pair and DTLS-SRTP is up: media can flow.
    case connected(local: SDPCandidate, remote: SDPCandidate)
    /// ICE or DTLS failed (fingerprint mismatch: `.connectionRefused`), or consent was lost.
    case failed(OTError)
    case iceStateChanged(ICEConnectionState)
    /// An unprotected RTP packet, parsed once here, with the negotiated section its payload type names.
    case rtp(ReceivedRTP)
    /// The peer asked for a keyframe of one of our SSRCs (PLI or FIR).
    case keyframeRequested(ssrc: UInt32)
    /// The peer NACKed packets of one of our SSRCs; those still cached were already resent.
    case nackRequested(ssrc: UInt32, sequences: [UInt16])
    /// Without `PeerConnectionConfig.sendHistory`: the peer NACKed these packets of one of our SSRCs, sent recently and
    /// not resent within the RTT; answer with `resendRTP`.
    case retransmissionsRequested(ssrc: UInt32, sequences: [UInt16])
    /// Our NACKs of these packets of a remote SSRC were given up (retries used up, or too old): they will not be
    /// repaired, so a decoder waiting for them should stop and ask for a keyframe.
    case packetsUnrecoverable(ssrc: UInt32, sequences: [UInt16])
    /// A new round-trip time measured from the peer's report blocks.
    case roundTripTime(Duration)
    /// The peer's report about one of our SSRCs (loss, jitter).
    case receiverReport(RTCPReportBlock)
    /// Transport-wide congestion control feedback from the peer.
    case transportFeedback(TransportCCFeedback)
    /// The send-side bandwidth estimate changed (target or detector state), with `bandwidthEstimation` on.
    case bandwidthEstimate(BandwidthEstimate)
    /// The peer said goodbye for an SSRC.
    case bye(ssrc: UInt32)
}

/// The negotiated m-section a media payload type belongs to, and its payload format.
public struct RTPSection: Sendable, Equatable {
    public var kind: MediaKind
    public var mid: String
    public var payloadType: UInt8
    /// The format of the payload type (nil: a codec we negotiated but have no format for).
    public var format: (any RTPPayloadFormat)?
    public static func == (a: RTPSection, b: RTPSection) -> Bool {
        a.kind == b.kind && a.mid == b.mid && a.payloadType == b.payloadType && a.format?.name == b.format?.name
    }
}

/// An RTP packet as the transport hands it up: unprotected, RTX unwrapped, RED taken apart, the header parsed once
/// (pipelines take `packet` as it is), and demultiplexed by payload type onto the negotiated sections.
public struct ReceivedRTP: Sendable, Equatable {
    /// The packet's bytes, which `packet`'s payload is a slice of (a router forwards them).
    public var bytes: [UInt8]
    public var packet: RTPPacket
    /// The section its payload type belongs to; nil for a payload type no section negotiated.
    public var section: RTPSection?
    public init(bytes: [UInt8], packet: RTPPacket, section: RTPSection?) {
        self.bytes = bytes; self.packet = packet; self.section = section
    }
    public static func == (a: ReceivedRTP, b: ReceivedRTP) -> Bool { a.bytes == b.bytes && a.section == b.section }
}

/// Counters of a `PeerConnection`.
public struct PeerConnectionStats: Sendable, Equatable {
    public var packetsSent = 0
    public var bytesSent = 0
    public var packetsReceived = 0
    public var bytesReceived = 0
    public var rtcpSent = 0
    public var rtcpReceived = 0
    /// Packets of received RTCP compounds that did not parse, skipped (the rest of each compound is still handled;
    /// `RTCP.parseCompound`).
    public var rtcpPacketsSkipped = 0
    /// Packets resent in answer to NACKs, and their bytes (RTP before SRTP, as `bytesSent`).
    public var retransmissionsSent = 0
    public var retransmittedBytesSent = 0
    /// NACKed sequence numbers we no longer (or never) had to resend.
    public var retransmissionMisses = 0
    /// Sequence numbers we NACKed (retries counted), packets that arrived after being NACKed, and missing packets
    /// given up on.
    public var nackedSequences = 0
    public var nackRepaired = 0
    public var nackGivenUp = 0
    /// FEC packets sent (ULPFEC inside RED) and their bytes (RTP before SRTP); media packets the peer's FEC rebuilt here.
    public var fecPacketsSent = 0
    public var fecBytesSent = 0
    public var fecPacketsRecovered = 0
    /// RTP packets received that carry a transport-wide sequence number, and the numbers missing between the first and
    /// the highest received: the loss on the wire, before retransmissions repaired it.
    public var transportPacketsReceived = 0
    public var transportPacketsLost = 0
    /// Retransmissions that arrived on an RTX stream (RFC 4588), unwrapped into the packets they resend, and RTX
    /// packets of no known stream or too short to name their original.
    public var rtxPacketsReceived = 0
    public var rtxPacketsDiscarded = 0
    public var nacksReceived = 0
    public var keyframeRequestsReceived = 0
    /// SRTP packets dropped as replays (a retransmission of a packet that had arrived): not errors.
    public var replaysDropped = 0
    /// SRTP packets that failed authentication or were malformed.
    public var srtpErrors = 0
    /// Media we were asked to send before DTLS finished, dropped.
    public var sendsBeforeConnected = 0
    /// Packets given to `sendRTP` that were not RTP, dropped.
    public var malformedSends = 0
    /// RTP given to `sendRTP`, and RTCP, retransmissions and DTLS records, not sent because consent for the
    /// selected pair had expired (RFC 7675; sending resumes when a pair is selected again, e.g. after an ICE restart).
    public var sendsDroppedWithoutConsent = 0
    public var roundTripTime: Duration?
    /// NACKed packets not resent because retransmissions were over their share of the bandwidth estimate.
    public var retransmissionsSkipped = 0
    /// Transport-wide feedback messages sent (for what we receive) and received (for what we send).
    public var transportFeedbackSent = 0
    public var transportFeedbackReceived = 0
    /// The send-side estimate (bits per second), as W3C `RTCIceCandidatePairStats.availableOutgoingBitrate`.
    public var availableOutgoingBitrate: Int?
    /// The delay-based detector's state behind that estimate.
    public var bandwidthUsage: BandwidthUsage?
    public init() {}
}

/// One WebRTC media path, sans-IO: ICE (full or lite) and DTLS through `MediaTransport`, SRTP keyed from the
/// DTLS exporter, an `RTPSession` (reports, NACK answers from its retransmission cache, NACK generation, PLI/FIR,
/// RTT), and SDP offer/answer through `SDPNegotiation`, everything BUNDLEd on one transport.
///
/// Bytes and time in (`handleReceive`, `handleTimeout`, `sendRTP`), datagrams, events and a deadline out
/// (`pollTransmit`, `pollEvent`, `pollTimeout`). Not thread-safe: `PeerConnectionDriver` runs it on sockets.
public final class PeerConnection {
    public let config: PeerConnectionConfig
    public let certificate: DTLSCertificate
    /// Our ICE credentials (the shared-socket `MediaEndpoint` demultiplexes STUN by `localUfrag`); an ICE
    /// restart changes them.
    public private(set) var localUfrag: String
    public private(set) var localPwd: String
    /// An ICE restart offer of ours waits for its answer.
    public private(set) var isRestartingICE = false
    /// Counters (the RTP session's repair counters included).
    public var stats: PeerConnectionStats {
        var s = counters
        let r = rtpSession.repair
        s.retransmissionMisses = r.retransmissionMisses
        s.nackedSequences = r.nackedSequences
        s.nackRepaired = r.nackRepaired
        s.nackGivenUp = r.nackGivenUp
        s.transportPacketsReceived = rtpSession.transportPacketsReceived
        s.transportPacketsLost = rtpSession.transportPacketsLost
        s.transportFeedbackSent = rtpSession.transportFeedbackSent
        return s
    }
    private var counters = PeerConnectionStats()
    /// What both sides agreed, once the remote description is set.
    public private(set) var negotiated: SDPNegotiated?
    /// Our latest description (offer or answer); its `transportSection` is the m-section our trickled candidates
    /// belong to (`sdpMid`, `sdpMLineIndex`).
    public private(set) var localDescription: SessionDescription?
    /// The transport, once the remote description is set.
    public private(set) var transport: MediaTransport?
    /// The RTP session (reports, NACK state, RTT).
    public let rtpSession: RTPSession
    public private(set) var isConnected = false
    public private(set) var isFailed = false

    private var ice: ICEAgent?
    private var localAddresses: [TransportAddress] = []
    private var pendingTURN: [(client: TURNClient, socket: TransportAddress)] = []
    private var pendingRemoteCandidates: [SDPCandidate] = []
    private var localOffer: SessionDescription?
    private var srtp: SRTPContext?
    private var clockRates: [UInt8: UInt32] = [:]
    /// Media payload types of the negotiated sections, for demultiplexing what arrives.
    private var sections: [UInt8: RTPSection] = [:]
    private var rtxReceiver: RTXReceiver?
    /// Video FEC: per SSRC of ours, and for what the peer sends; the loss measured for it.
    private var fecSenders: [UInt32: ULPFECSender] = [:]
    private var fecReceiver: ULPFECReceiver?
    private var fecLoss = TransportFeedbackLoss()
    private var fecLossSince: Instant?
    private var smoothedLoss: Double?
    /// The RTP session's round-trip time was measured on the path (ICE's selected pair or RTCP), not a default or the
    /// DTLS handshake's estimate (which holds the peer's handshake processing: 31–100 ms on loopback): FEC is decided
    /// on it only then.
    private var pathRoundTripMeasured = false
    /// RTX payload type -> media SSRC, for a section whose RTX SSRC was not declared.
    private var rtxBySection: [UInt8: UInt32] = [:]
    private var events = FIFO<PeerConnectionEvent>()
    private var transmits = FIFO<ICETransmit>()
    private let tieBreaker: UInt64
    /// The latest time a call gave us (used by calls that take none).
    private var lastNow: Instant
    /// The end of our candidates was signalled (in the description or by `.localCandidatesComplete`).
    private var candidatesCompleteSignalled = false
    /// Our description was made (candidates after it are trickled).
    private var describedLocally = false
    /// Transport-wide congestion control: the negotiated extension id and our numbering of what we send (what we
    /// receive is recorded, and its feedback sent, by the RTP session).
    private var transportCCId: UInt8?
    private var transportStamper = TransportSequenceStamper()
    /// Where received SRTP is decrypted: the datagram is copied in and unprotected in place, so a steady stream
    /// allocates nothing for it (in place in the datagram, which its driver still holds, copied it on write: one
    /// allocation per packet). Its storage is reused once the packet's event is gone; a receiver that keeps a packet
    /// keeps it, and the next one gets storage of its own.
    private var received: [UInt8] = []
    private var estimator: SendSideBandwidthEstimator?
    private var retransmitBudget = 0.0
    private var retransmitBudgetAt: Instant?
    /// The send-side bandwidth estimate, with `bandwidthEstimation` on and feedback received.
    public private(set) var bandwidthEstimate: BandwidthEstimate?

    public init(config: PeerConnectionConfig, certificate: DTLSCertificate? = nil, now: Instant) throws {
        self.config = config
        self.certificate = try certificate ?? DTLSCertificate()
        lastNow = now
        var rng = SystemRandomNumberGenerator()
        let cred = ICEConfig.randomCredentials(using: &rng)
        localUfrag = cred.ufrag
        localPwd = cred.pwd
        tieBreaker = .random(in: 0 ... .max, using: &rng)
        let ssrcs = [config.audioTrack, config.videoTrack].compactMap { $0 }.filter(\.announcesSSRC).flatMap { [$0.ssrc] + ($0.rtxSSRC.map { [$0] } ?? []) }
        var rc = RTPSession.Config(localSSRCs: ssrcs.isEmpty ? [UInt32.random(in: 1 ... .max, using: &rng)] : ssrcs, cname: config.cname)
        rc.nack = config.nack
        rc.sendHistory = config.sendHistory
        rc.receiverReferenceTime = config.receiverReferenceTime
        rc.seed = config.seed
        rc.transportFeedbackInterval = config.transportFeedbackInterval
        rtpSession = RTPSession(config: rc, now: now)
        estimator = config.bandwidthEstimation.map { SendSideBandwidthEstimator(config: $0) }
    }

    // MARK: candidates and descriptions

    /// Adds a host candidate for a socket the driver bound (before or after the description).
    /// Returns the candidate to signal, or nil under a relay-only policy.
    /// Under `filterOutLanCandidates` a LAN address is added but not signalled (nil).
    @discardableResult
    public func addLocalCandidate(_ address: TransportAddress) -> SDPCandidate? {
        if !localAddresses.contains(address) { localAddresses.append(address) }
        guard let ice else { return nil }
        let c = ice.addLocalCandidate(address, signal: signals(address))
        for server in config.stunServers { ice.gatherServerReflexive(server: server, base: address, now: lastNow) }
        if let transport { transport.flush(now: lastNow); pump(now: lastNow) } else { drainAgent() }
        return c
    }

    private func signals(_ address: TransportAddress) -> Bool { !(config.filterOutLanCandidates && address.ip.isLAN) }

    /// Allocates a relayed candidate from a TURN server reached from local socket `socket`; the candidate comes
    /// out as `.localCandidate` (signal it). Starts once the remote description is set.
    /// Over TCP, `socket` names the connection to the server (`UDPDriver.connectTCP`); tell
    /// `turnConnectionClosed(socket:now:)` when it closes.
    public func addTURN(_ turn: TURNClient.Config, socket: TransportAddress, now: Instant) {
        if let transport { transport.addTURN(TURNClient(config: turn), socket: socket, now: now); pump(now: now) }
        else { pendingTURN.append((TURNClient(config: turn), socket)) }
    }

    /// The TCP (or TLS) connection from `socket` to a TURN server closed or could not be made (`reason`, when
    /// known): that server's relayed candidate is gone (under the relay-only policy, losing the last one fails the connection).
    public func turnConnectionClosed(socket: TransportAddress, now: Instant, reason: OTError? = nil) {
        lastNow = now
        if let transport { transport.turnConnectionClosed(socket: socket, now: now, reason: reason); pump(now: now); return }
        for t in pendingTURN where t.socket == socket && t.client.config.transport.isStream { t.client.connectionClosed(now: now, reason: reason) }
        for t in pendingTURN {
            while let e = t.client.pollEvent() { if case .failed(let err) = e { turnFailed(err) } }
        }
        checkCandidatesComplete()
    }

    /// The transport of the relayed local candidate at `address` (its TURN client's connection to the server).
    public func relayProtocol(of address: TransportAddress) -> TURNClient.ServerTransport? {
        transport?.turns.first { $0.client.relayedAddress == address }?.client.config.transport
    }

    /// A TURN client failed. Under the relay-only policy with no TURN server left, nothing can connect: fail
    /// now with the server's error rather than waiting for ICE (which has no pair to fail).
    private func turnFailed(_ err: OTError) {
        Log.warn("ice", "\(err.message)")
        guard config.relayOnly else { return }
        let live = (transport?.turns.map(\.client) ?? []) + pendingTURN.map(\.client)
        guard live.allSatisfy(\.isFailed) else { return }
        fail(OTError(err.code, "no relayed candidate (\(err.message))"))
    }

    private func makeAgent(role: ICERole, now: Instant) -> ICEAgent {
        var c = ICEConfig(role: config.iceLite ? .controlled : role, localUfrag: localUfrag, localPwd: localPwd,
                          tieBreaker: tieBreaker, seed: config.seed, lite: config.iceLite)
        config.ice?(&c)
        c.lite = config.iceLite
        c.relayOnly = config.relayOnly
        let agent = ICEAgent(config: c)
        for a in localAddresses { agent.addLocalCandidate(a, signal: signals(a)) }
        for a in localAddresses {
            for server in config.stunServers { agent.gatherServerReflexive(server: server, base: a, now: now) }
        }
        ice = agent
        drainAgent()
        return agent
    }

    /// Whether STUN or TURN servers are still to answer.
    private var isGathering: Bool {
        ice?.isGathering == true || pendingTURN.contains { !$0.client.isFailed }
            || transport?.turns.contains { $0.client.relayedAddress == nil && !$0.client.isFailed } == true
    }

    private func localParameters(_ agent: ICEAgent) -> SDPLocalParameters {
        var p = SDPLocalParameters(iceUfrag: localUfrag, icePwd: localPwd, fingerprint: certificate.fingerprint)
        p.candidates = agent.candidatesToSignal
        if let ip = config.advertisedHostIP {
            for i in p.candidates.indices where p.candidates[i].kind == .host { p.candidates[i].address.ip = ip }
        }
        p.endOfCandidates = config.iceLite || !isGathering
        candidatesCompleteSignalled = p.endOfCandidates
        describedLocally = true
        p.iceLite = config.iceLite
        p.sessionID = tieBreaker >> 2
        p.audio = config.audio
        p.video = config.video
        p.audioTrack = config.audioTrack
        p.videoTrack = config.videoTrack
        p.videoFEC = config.videoFEC
        p.audioFormats = config.audioFormats
        p.videoFormats = config.videoFormats
        p.answerInLocalOrder = config.answerInLocalOrder
        return p
    }

    /// Our offer (SDP text): we become the ICE controlling agent (unless lite) and `a=setup:actpass`.
    /// Gathering server-reflexive candidates starts here; they are trickled (`.localCandidate`).
    public func createOffer() throws -> String { try createOffer(now: lastNow) }

    /// Our offer, gathering from `now`. With `iceRestart` (after the first offer/answer exchange): new ICE
    /// credentials, the agent restarts (RFC 8445 §9) and the offer keeps the DTLS role and fingerprint, so media
    /// and SRTP go on over the old pair until the answer's checks select a new one, with no new DTLS handshake.
    public func createOffer(iceRestart: Bool = false, now: Instant) throws -> String {
        lastNow = now
        if iceRestart { return try restartOffer(now: now) }
        guard ice == nil else { throw OTError(.illegalState, "PeerConnection: the description was already created") }
        let offer = SDPNegotiation.offer(localParameters(makeAgent(role: .controlling, now: now)))
        localOffer = offer
        localDescription = offer
        return offer.serialized()
    }

    /// Answers a remote offer (SDP text): negotiates the media and starts connecting. Once connected, a new
    /// offer from the peer with other ICE credentials is an ICE restart: we restart too (new credentials) and
    /// keep DTLS and SRTP.
    public func createAnswer(toOffer sdp: String, now: Instant) throws -> String {
        lastNow = now
        if ice != nil, transport != nil { return try answerReoffer(sdp, now: now) }
        guard ice == nil else { throw OTError(.illegalState, "PeerConnection: the description was already created") }
        let offer = try Self.parse(sdp)
        let agent = makeAgent(role: .controlled, now: now)
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: localParameters(agent))
        try start(neg, agent: agent, now: now)
        localDescription = answer
        return answer.serialized()
    }

    /// Applies the remote answer to our offer and starts connecting (or, after `createOffer(iceRestart:)`,
    /// checks the new ICE credentials and candidates).
    public func setRemoteAnswer(_ sdp: String, now: Instant) throws {
        lastNow = now
        if isRestartingICE, let offer = localOffer, let agent = ice, let transport {
            let neg = try SDPNegotiation.accept(answer: try Self.parse(sdp), offer: offer)
            try checkSameDTLS(neg)
            isRestartingICE = false
            applyRemoteICE(neg, agent: agent, transport: transport, now: now)
            return
        }
        guard let offer = localOffer, let agent = ice, transport == nil else {
            throw OTError(.illegalState, "PeerConnection: setRemoteAnswer needs our offer first (and only once)")
        }
        let neg = try SDPNegotiation.accept(answer: try Self.parse(sdp), offer: offer)
        try start(neg, agent: agent, now: now)
    }

    // MARK: ICE restart

    /// New credentials; the agent restarts and gathers again. Media stays on the old pair meanwhile.
    private func restartICE(_ agent: ICEAgent, now: Instant) {
        var rng = SystemRandomNumberGenerator()
        let cred = ICEConfig.randomCredentials(using: &rng)
        localUfrag = cred.ufrag
        localPwd = cred.pwd
        agent.restart(ufrag: cred.ufrag, pwd: cred.pwd, now: now)
        for a in localAddresses {
            for server in config.stunServers { agent.gatherServerReflexive(server: server, base: a, now: now) }
        }
        isFailed = false
    }

    private func restartOffer(now: Instant) throws -> String {
        guard let agent = ice, let transport, let current = negotiated, !config.iceLite else {
            throw OTError(.illegalState, "PeerConnection: an ICE restart needs a finished offer/answer exchange (and a full agent)")
        }
        restartICE(agent, now: now)
        var offer = SDPNegotiation.offer(localParameters(agent))
        // Keep the DTLS role we have (RFC 8842 §5.3): a re-offer says active or passive, not actpass.
        for i in offer.media.indices { offer.media[i].setup = current.localIsDTLSClient ? .active : .passive }
        localOffer = offer
        localDescription = offer
        isRestartingICE = true
        transport.flush(now: now)
        pump(now: now)
        return offer.serialized()
    }

    private func answerReoffer(_ sdp: String, now: Instant) throws -> String {
        guard let agent = ice, let transport, let current = negotiated else {
            throw OTError(.illegalState, "PeerConnection: the description was already created")
        }
        let offer = try Self.parse(sdp)
        var (answer, neg) = try SDPNegotiation.answer(to: offer, local: localParameters(agent))
        try checkSameDTLS(neg)
        if neg.remoteIceUfrag != current.remoteIceUfrag || neg.remoteIcePwd != current.remoteIcePwd {
            restartICE(agent, now: now)
            (answer, neg) = try SDPNegotiation.answer(to: offer, local: localParameters(agent))
        }
        applyRemoteICE(neg, agent: agent, transport: transport, now: now)
        localDescription = answer
        return answer.serialized()
    }

    /// A renegotiation keeps the DTLS association: same remote certificate, same roles.
    private func checkSameDTLS(_ neg: SDPNegotiated) throws {
        guard let current = negotiated else { return }
        guard neg.remoteFingerprint == current.remoteFingerprint, neg.localIsDTLSClient == current.localIsDTLSClient else {
            throw OTError(.invalidParameter, "SDP: a renegotiation may not change the DTLS fingerprint or role (a new connection is needed)")
        }
    }

    private func applyRemoteICE(_ neg: SDPNegotiated, agent: ICEAgent, transport: MediaTransport, now: Instant) {
        var kept = neg
        kept.media = negotiated?.media ?? neg.media  // the media were agreed by the first exchange
        negotiated = kept
        if agent.remoteUfrag != neg.remoteIceUfrag {
            agent.setRemoteCredentials(ufrag: neg.remoteIceUfrag, pwd: neg.remoteIcePwd)
            for c in neg.remoteCandidates { transport.addRemoteCandidate(c, now: now) }
            if neg.remoteEndOfCandidates { agent.endOfRemoteCandidates(now: now) }
        }
        transport.flush(now: now)
        pump(now: now)
    }

    private static func parse(_ sdp: String) throws -> SessionDescription {
        do { return try SessionDescription.parse(sdp) } catch let e as OTError { throw e } catch {
            throw OTError(.invalidParameter, "SDP: \(error)")
        }
    }

    private func start(_ neg: SDPNegotiated, agent: ICEAgent, now: Instant) throws {
        guard !neg.media.isEmpty else { throw OTError(.invalidParameter, "SDP: no media section was agreed") }
        negotiated = neg
        let twcc = neg.media.lazy.flatMap(\.extmaps).first { $0.uri == SDPNegotiation.transportCCExtension }
        if let id = twcc?.id, (1...255).contains(id) { transportCCId = UInt8(id); transportStamper.extensionId = UInt8(id) }
        sections = [:]
        for m in neg.media {
            // The agreed codec and the answer's others we can receive, each a section entry of its payload type.
            for c in [m.codec] + m.otherCodecs {
                if let kind = MediaKind(rawValue: m.kind) {
                    sections[c.payloadType] = RTPSection(kind: kind, mid: m.mid, payloadType: c.payloadType, format: PayloadFormats.format(for: c))
                }
                clockRates[c.payloadType] = c.clockRate
            }
            for rtx in [m.rtxPayloadType].compactMap({ $0 }) + m.otherRTXPayloadTypes.keys { clockRates[rtx] = m.codec.clockRate }
        }
        configureRTX(neg)
        configureFEC(neg)
        agent.setRemoteCredentials(ufrag: neg.remoteIceUfrag, pwd: neg.remoteIcePwd)
        agent.remoteIsLite = neg.remoteIceLite
        let dtls = try DTLSEndpoint(role: neg.localIsDTLSClient ? .client : .server, certificate: certificate,
                                    remoteFingerprint: neg.remoteFingerprint, srtpProfiles: config.srtpProfiles,
                                    timerMode: config.dtlsTimerMode)
        let t = MediaTransport(ice: agent, dtls: dtls)
        transport = t
        for c in neg.remoteCandidates + pendingRemoteCandidates { t.addRemoteCandidate(c, now: now) }
        pendingRemoteCandidates = []
        if neg.remoteEndOfCandidates { agent.endOfRemoteCandidates(now: now) }
        for (client, socket) in pendingTURN { t.addTURN(client, socket: socket, now: now) }
        pendingTURN = []
        t.flush(now: now)
        pump(now: now)
    }

    /// RTX (RFC 4588) where both sides negotiated it: our retransmissions of a track with an RTX SSRC go on its RTX
    /// stream; the peer's RTX packets are unwrapped into the packets they resend.
    private func configureRTX(_ neg: SDPNegotiated) {
        var ssrcs: [UInt32: UInt32] = [:], types: [UInt8: UInt8] = [:]
        for m in neg.media {
            guard let rtxPT = m.rtxPayloadType else { continue }
            types[rtxPT] = m.codec.payloadType
            for (rtx, media) in m.otherRTXPayloadTypes { types[rtx] = media }
            for (media, rtx) in m.remoteRTXSSRCs { ssrcs[rtx] = media }
            // An RTX stream the peer did not declare: its packets belong to the section's only media SSRC.
            if m.remoteRTXSSRCs.isEmpty, m.remoteSSRCs.count == 1 {
                for rtx in [rtxPT] + m.otherRTXPayloadTypes.keys { rtxBySection[rtx] = m.remoteSSRCs[0] }
            }
            let track = m.kind == "video" ? config.videoTrack : m.kind == "audio" ? config.audioTrack : nil
            if let track, let rtxSSRC = track.rtxSSRC, m.direction == .sendrecv || m.direction == .sendonly {
                rtpSession.enableRTX(ssrc: track.ssrc, rtx: RTXSender(rtxSSRC: rtxSSRC, payloadTypes: [m.codec.payloadType: rtxPT],
                                                                     initialSequence: .random(in: 0 ... .max)))
            }
        }
        rtxReceiver = types.isEmpty ? nil : RTXReceiver(ssrcs: ssrcs, payloadTypes: types)
    }

    /// Video FEC (ULPFEC inside RED) where both sides negotiated it: our video track's packets go through an
    /// `ULPFECSender` whose protection follows the loss the peer's transport-wide feedback shows; the peer's RED and FEC
    /// packets go through an `ULPFECReceiver`.
    private func configureFEC(_ neg: SDPNegotiated) {
        for m in neg.media {
            guard let red = m.redPayloadType, let ulpfec = m.ulpfecPayloadType else { continue }
            clockRates[red] = m.codec.clockRate
            clockRates[ulpfec] = m.codec.clockRate
            if m.direction == .sendrecv || m.direction == .recvonly { fecReceiver = ULPFECReceiver(redPayloadType: red, ulpfecPayloadType: ulpfec) }
            let track = m.kind == "video" ? config.videoTrack : nil
            if let track, m.direction == .sendrecv || m.direction == .sendonly {
                fecSenders[track.ssrc] = ULPFECSender(mediaPayloadType: m.codec.payloadType, redPayloadType: red, ulpfecPayloadType: ulpfec)
            }
        }
    }

    /// Once a second of transport-wide feedback: FEC protection for the loss it showed (half the new figure, half the
    /// old, so one bad second does not swing it) and the round-trip time.
    private func updateFECProtection(_ fb: TransportCCFeedback, now: Instant) {
        guard !fecSenders.isEmpty else { return }
        fecLoss.add(fb)
        let since = fecLossSince ?? now
        fecLossSince = since
        guard now - since >= .seconds(1), let loss = fecLoss.take() else { return }
        fecLossSince = now
        smoothedLoss = smoothedLoss.map { ($0 + loss) / 2 } ?? loss
        let protection = pathRoundTripMeasured ? ULPFECSender.protection(forLoss: smoothedLoss ?? 0, roundTripTime: rtpSession.rtt) : 0
        for ssrc in Array(fecSenders.keys) { fecSenders[ssrc]?.protection = protection }
    }

    /// The packet an RTX packet resends (plain RTP, allocated), or nil when `p` is not RTX of a negotiated stream.
    private func unwrapRTX(_ p: [UInt8], ssrc: UInt32, payloadType: UInt8) -> [UInt8]? {
        guard let receiver = rtxReceiver, receiver.payloadTypes[payloadType] != nil else { return nil }
        guard let packet = try? RTPPacket(parsing: p) else { return nil }
        if receiver.ssrcs[ssrc] == nil, let media = rtxBySection[payloadType] {
            // An undeclared RTX SSRC: the section's media SSRC.
            guard packet.payload.count >= 2 else { return nil }
            let s = packet.payload.startIndex
            let osn = UInt16(packet.payload[s]) << 8 | UInt16(packet.payload[s + 1])
            return RTPPacket(marker: packet.marker, payloadType: receiver.payloadTypes[payloadType] ?? payloadType, sequenceNumber: osn,
                             timestamp: packet.timestamp, ssrc: media, csrcs: packet.csrcs, extensions: packet.extensions,
                             payload: packet.payload.dropFirst(2)).serialized()
        }
        guard let original = try? receiver.unwrap(packet) else { return nil }
        return original.serialized()
    }

    /// Adds a trickled remote candidate (kept until the remote description is set).
    public func addRemoteCandidate(_ c: SDPCandidate, now: Instant) {
        guard let transport else { pendingRemoteCandidates.append(c); return }
        transport.addRemoteCandidate(c, now: now)
        pump(now: now)
    }

    /// The peer has no more candidates.
    public func endOfRemoteCandidates(now: Instant) {
        guard let transport else { return }
        transport.ice.endOfRemoteCandidates(now: now)
        pump(now: now)
    }

    // MARK: media

    /// Protects and sends an RTP packet (plain RTP in, SRTP on the wire), keeping the plain packet for NACK
    /// answers. `packet`'s storage is reused: it holds the protected bytes afterwards. Returns false when the
    /// connection is not up yet or the packet is not RTP (counted, dropped).
    @discardableResult
    public func sendRTP(_ packet: inout [UInt8], now: Instant) -> Bool {
        guard let srtp, let transport else { counters.sendsBeforeConnected += 1; return false }
        guard let h = Self.header(packet) else { counters.malformedSends += 1; return false }
        // Without consent nothing is sent, cached, numbered or counted as sent.
        guard !transport.ice.consentExpired else {
            transport.countDroppedWithoutConsent()
            counters.sendsDroppedWithoutConsent = transport.sendsDroppedWithoutConsent
            return false
        }
        // Video FEC where negotiated: the packet goes as RED (renumbered past the FEC packets), FEC packets after a frame.
        var fec: [[UInt8]] = []
        var stamped: UInt16?? = nil
        if !fecSenders.isEmpty, let i = fecSenders.index(forKey: h.ssrc) {
            // Numbered before FEC covers it, so the packet FEC can rebuild is the one on the wire, number and all.
            stamped = .some(transportStamper.stamp(&packet))
            // In place: a sender taken out as a value and stored back copied its frame's buffers.
            fec = fecSenders.values[i].process(&packet)
        }
        // With FEC the packet became RED (new payload type and number): its header is read again.
        guard transmit(&packet, header: stamped == nil ? h : nil, srtp: srtp, transport: transport, now: now, stamped: stamped) else { return false }
        for var p in fec where transmit(&p, srtp: srtp, transport: transport, now: now) {
            counters.fecPacketsSent += 1
            counters.fecBytesSent += p.count
        }
        drainTransport()
        return true
    }

    /// Whether `sendRTP` may set a timer (so the caller asks `pollTimeout` again after it): only with TURN servers,
    /// whose clients may open a permission or channel for the packet. On a direct path sending moves no deadline
    /// (the RTP session's, ICE's and DTLS's timers do not depend on what is sent).
    public var mediaSendsMaySetTimers: Bool { !(transport?.turns.isEmpty ?? true) }

    /// Numbers (transport-wide; `stamped`: already numbered, with that number), records (for NACK), protects and queues
    /// one RTP packet of ours.
    private func transmit(_ packet: inout [UInt8], header: (ssrc: UInt32, seq: UInt16, ts: UInt32, pt: UInt8)? = nil, srtp: SRTPContext,
                          transport: MediaTransport, now: Instant, stamped: UInt16?? = nil) -> Bool {
        guard let h = header ?? Self.header(packet) else { counters.malformedSends += 1; return false }
        // This connection's transport-wide number, over whatever the packet carried (a router forwards packets
        // numbered for the publisher's uplink).
        let twccSequence = stamped ?? transportStamper.stamp(&packet)
        rtpSession.sent(ssrc: h.ssrc, sequence: h.seq, rtpTimestamp: h.ts, clockRate: clockRates[h.pt] ?? 90000,
                        payloadBytes: max(0, packet.count - 12), packet: packet, now: now)
        counters.packetsSent += 1
        counters.bytesSent += packet.count
        do { try srtp.protectRTP(&packet) } catch { counters.srtpErrors += 1; return false }
        if let seq = twccSequence { estimator?.packetSent(sequence: seq, size: packet.count, at: now) }
        transport.sendMedia(packet)
        return true
    }

    /// Answers a `retransmissionsRequested` of `ssrc` with the packets found where they are kept (plain RTP as first
    /// sent, this connection's sequence numbers; nil: no longer held): resent like the session's own NACK answers (RTX
    /// where negotiated, within the retransmission budget).
    public func resendRTP(ssrc: UInt32, _ packets: [[UInt8]?], now: Instant) {
        guard let srtp, let transport else { return }
        for p in packets { rtpSession.resend(ssrc: ssrc, p) }
        sendRetransmissions(srtp: srtp, transport: transport, now: now)
        drainTransport()
    }

    /// Protects and sends the RTP session's queued NACK answers.
    private func sendRetransmissions(srtp: SRTPContext, transport: MediaTransport, now: Instant) {
        while let r = rtpSession.pollRetransmission() {
            guard retransmissionAllowed(bytes: r.count, now: now) else { counters.retransmissionsSkipped += 1; continue }
            var p = r
            // A retransmission is a new packet on the transport: it gets its own transport-wide number, so the
            // estimator counts it in what the link carries.
            let twcc = transportStamper.stamp(&p)
            if (try? srtp.protectRTP(&p)) != nil {
                if let seq = twcc { estimator?.packetSent(sequence: seq, size: p.count, at: now) }
                transport.sendMedia(p)
                counters.retransmissionsSent += 1
                counters.retransmittedBytesSent += r.count
            } else { counters.srtpErrors += 1 }
        }
    }

    /// With an estimator, NACK answers may use at most `retransmissionShare` of the estimate (a token bucket holding
    /// 250 ms of it): under congestion, resending everything that was dropped would only fill the queue further. As in
    /// libwebrtc the share is the whole estimate: random loss of 20–30 % needs retransmissions of 25–45 % of the media
    /// rate (more with retransmissions lost too), and the loss rule already holds the media rate down.
    private func retransmissionAllowed(bytes: Int, now: Instant) -> Bool {
        guard let target = estimator?.targetBitrateBps else { return true }
        let rate = Double(target) * Self.retransmissionShare / 8
        let elapsed = retransmitBudgetAt.map { Double(max(now - $0, .zero).microseconds) / 1_000_000 } ?? 0.25
        retransmitBudgetAt = now
        retransmitBudget = min(retransmitBudget + rate * elapsed, max(rate / 4, 2 * 1300))
        guard retransmitBudget >= Double(bytes) else { return false }
        retransmitBudget -= Double(bytes)
        return true
    }

    static let retransmissionShare = 1.0

    /// Protects and sends an RTCP compound packet we built (e.g. a receiver's NACK from the media pipeline).
    @discardableResult
    public func sendRTCP(_ packet: [UInt8]) -> Bool {
        guard let srtp, let transport else { return false }
        var p = packet
        do { try srtp.protectRTCP(&p) } catch { counters.srtpErrors += 1; return false }
        counters.rtcpSent += 1
        transport.sendMedia(p)
        drainTransport()
        return true
    }

    /// Asks the peer for a keyframe of its SSRC (PLI, or FIR when `useFIR`); paced unless `paced` is false
    /// (`RTPSession.requestKeyframe`).
    public func requestKeyframe(ssrc: UInt32, useFIR: Bool = false, paced: Bool = true, now: Instant) {
        rtpSession.requestKeyframe(ssrc: ssrc, useFIR: useFIR, paced: paced, now: now)
        pump(now: now)
    }

    /// Sends an RTCP BYE for our SSRCs, closes DTLS (close_notify) and ICE (`.iceStateChanged(.closed)`).
    /// The connection sends nothing after this.
    public func close(now: Instant) {
        if let transport {
            if let srtp {
                var bye = RTCP.serialize([.bye(ssrcs: rtpSession.config.localSSRCs, reason: nil)])
                if (try? srtp.protectRTCP(&bye)) != nil { transport.sendMedia(bye) }
                transport.dtls.close()
            }
            transport.ice.close()
            transport.flush(now: now)
            drainTransport()
            // Only the closed state is reported: what closing does to DTLS is not a failure.
            while let e = transport.pollEvent() { if case .ice(.stateChanged(.closed)) = e { events.push(.iceStateChanged(.closed)) } }
        } else if let ice {
            ice.close()
            while ice.pollTransmit() != nil {}
            while let e = ice.pollEvent() { if e == .stateChanged(.closed) { events.push(.iceStateChanged(.closed)) } }
        }
        self.srtp = nil
        isConnected = false
    }

    /// The ICE state (`.new` before the description).
    public var iceState: ICEConnectionState { ice?.state ?? .new }

    /// The pair media uses, with our candidate as the peer sees it (for statistics); nil before one is selected.
    public var selectedCandidatePair: ICESelectedPair? { ice?.selectedPairInfo }

    // MARK: IO

    /// Feeds a datagram received on local socket `local`.
    public func handleReceive(_ bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant) {
        lastNow = now
        guard let transport else {
            // Before the remote description only STUN goes on: STUN servers' answers (gathering), and the peer's
            // checks, which reach an offerer before the answer does. They are answered at once (RFC 8445 §7.3:
            // answering needs only our own credentials) and queue a triggered check, sent once the answer gives the
            // peer's credentials; otherwise the answerer would wait for its check's retransmission.
            if let ice, DemuxKind.classify(bytes) == .stun {
                ice.handleReceive(bytes, from: from, local: local, now: now)
                drainAgent()
            }
            return
        }
        transport.handleReceive(bytes, from: from, local: local, now: now)
        pump(now: now)
    }

    /// Runs the timers that are due (ICE checks and consent, DTLS retransmission, TURN refresh, RTCP reports, NACK retries).
    public func handleTimeout(now: Instant) {
        lastNow = now
        if transport == nil, let ice {
            ice.handleTimeout(now: now)
            drainAgent()
        }
        transport?.handleTimeout(now: now)
        if srtp != nil { rtpSession.handleTimeout(now: now) }
        pump(now: now)
    }

    public func pollTransmit() -> ICETransmit? { transmits.pop() }
    public func pollEvent() -> PeerConnectionEvent? { events.pop() }
    public func pollTimeout() -> Instant? {
        func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
            guard let a else { return b }
            guard let b else { return a }
            return min(a, b)
        }
        return earliest(transport?.pollTimeout(), srtp != nil ? rtpSession.pollTimeout() : nil)
    }

    /// Collects the agent's output before the transport exists (gathering): STUN requests and candidates.
    private func drainAgent() {
        guard transport == nil, let ice else { return }
        while let t = ice.pollTransmit() { transmits.push(t) }
        while let e = ice.pollEvent() { self.ice(e) }
        checkCandidatesComplete()
    }

    private func checkCandidatesComplete() {
        guard !candidatesCompleteSignalled, describedLocally, !isGathering else { return }
        candidatesCompleteSignalled = true
        events.push(.localCandidatesComplete)
    }

    private func drainTransport() {
        guard let transport else { return }
        while let t = transport.pollTransmit() { transmits.push(t) }
        counters.sendsDroppedWithoutConsent = transport.sendsDroppedWithoutConsent
    }

    private func pump(now: Instant) {
        guard let transport else { return }
        while let e = transport.pollEvent() {
            switch e {
            case .srtp(let bytes, let rtcp): rtcp ? receiveRTCP(bytes, now: now) : receiveRTP(bytes, now: now)
            case .ice(let ie): ice(ie)
            case .dtls(let de): dtls(de, transport: transport)
            case .localCandidate(let c): events.push(.localCandidate(c))
            case .turn(.failed(let err)): turnFailed(err)
            case .turn: break
            }
        }
        if let srtp {
            sendRetransmissions(srtp: srtp, transport: transport, now: now)
            while let r = rtpSession.pollRTCP() {
                var p = r
                if (try? srtp.protectRTCP(&p)) != nil { transport.sendMedia(p); counters.rtcpSent += 1 } else { counters.srtpErrors += 1 }
            }
        }
        while let e = rtpSession.pollEvent() {
            switch e {
            case .keyframeRequested(let s): counters.keyframeRequestsReceived += 1; events.push(.keyframeRequested(ssrc: s))
            case .roundTripTime(let d):
                pathRoundTripMeasured = true
                counters.roundTripTime = d
                estimator?.updateRoundTripTime(d)
                events.push(.roundTripTime(d))
            case .receiverReport(let b): events.push(.receiverReport(b))
            case .bye(let s): events.push(.bye(ssrc: s))
            case .packetsUnrecoverable(let s, let seqs): events.push(.packetsUnrecoverable(ssrc: s, sequences: seqs))
            case .retransmissionsRequested(let s, let seqs): events.push(.retransmissionsRequested(ssrc: s, sequences: seqs))
            case .transportFeedback(let f):
                counters.transportFeedbackReceived += 1
                updateFECProtection(f, now: now)
                events.push(.transportFeedback(f))
                if estimator != nil { estimate(f, now: now) }
            }
        }
        drainTransport()
        checkCandidatesComplete()
    }

    private func estimate(_ f: TransportCCFeedback, now: Instant) {
        guard let e = estimator?.handleFeedback(f, now: now) else { return }
        counters.availableOutgoingBitrate = e.targetBitrateBps
        counters.bandwidthUsage = e.usage
        let changed = bandwidthEstimate.map { $0.targetBitrateBps != e.targetBitrateBps || $0.usage != e.usage } ?? true
        bandwidthEstimate = e
        if changed { events.push(.bandwidthEstimate(e)) }
    }

    private func ice(_ e: ICEEvent) {
        switch e {
        case .stateChanged(let s):
            events.push(.iceStateChanged(s))
            if s == .failed, !isFailed {
                isFailed = true
                events.push(.failed(OTError(isConnected ? .connectionDropped : .connectionFailed, "ICE failed: no working candidate pair")))
            }
        case .localCandidate(let c): events.push(.localCandidate(c))
        case .roundTripTime(let d):
            // The path's round trip before any media: NACK retries and waits start from it until RTCP measures one.
            rtpSession.setInitialRoundTripTime(d)
            pathRoundTripMeasured = true
        case .selectedPairChanged, .roleChanged, .gatheringComplete: break
        }
    }

    private func dtls(_ e: DTLSEvent, transport: MediaTransport) {
        switch e {
        case .connected(let km):
            guard let km else { return fail(OTError(.connectionRefused, "DTLS: the peer did not negotiate use_srtp")) }
            do {
                srtp = try SRTPContext(profile: km.profile, keys: SRTPKeys(local: km.localKey + km.localSalt, remote: km.remoteKey + km.remoteSalt))
            } catch { return fail(OTError(.internalError, "SRTP: \(error)")) }
            // Without the selected pair's round trip (ICE-lite, or not measured yet), NACK retries and waits start from the
            // handshake's until ICE or RTCP measures one.
            if transport.ice.selectedPairRoundTripTime == nil, let rtt = transport.dtls.roundTripTime { rtpSession.setInitialRoundTripTime(rtt) }
            if let pair = transport.ice.selectedPair {
                isConnected = true
                events.push(.connected(local: pair.local, remote: pair.remote))
            }
        case .failed(let err): fail(err)
        case .closed: if !isFailed { fail(OTError(.connectionDropped, "DTLS: the peer closed the connection")) }
        case .applicationData: break
        }
    }

    private func fail(_ err: OTError) {
        guard !isFailed else { return }
        isFailed = true
        isConnected = false
        events.push(.failed(err))
    }

    private func receiveRTP(_ bytes: [UInt8], now: Instant) {
        guard let srtp else { return }
        received.removeAll(keepingCapacity: true)
        received.append(contentsOf: bytes)
        do { try srtp.unprotectRTP(&received) } catch SRTPError.replayed { counters.replaysDropped += 1; return } catch { counters.srtpErrors += 1; return }
        let p = received
        guard let parsed = try? RTPPacket(parsing: p) else { counters.srtpErrors += 1; return }
        let h = (ssrc: parsed.ssrc, seq: parsed.sequenceNumber, ts: parsed.timestamp, pt: parsed.payloadType)
        counters.packetsReceived += 1
        counters.bytesReceived += p.count
        if let id = transportCCId, let at = TransportWideSequenceNumber.valueOffset(in: p, id: id) {
            rtpSession.receivedTransportSequence(UInt16(p[at]) << 8 | UInt16(p[at + 1]), ssrc: h.ssrc, now: now)
        }
        var bytes = p, packet = parsed
        if let receiver = rtxReceiver, receiver.payloadTypes[h.pt] != nil {
            // A retransmission on the RTX stream: it repairs the original stream (its own numbering is not NACKed).
            guard let original = unwrapRTX(p, ssrc: h.ssrc, payloadType: h.pt), let o = try? RTPPacket(parsing: original) else {
                counters.rtxPacketsDiscarded += 1
                return
            }
            counters.rtxPacketsReceived += 1
            bytes = original
            packet = o
        }
        rtpSession.received(ssrc: packet.ssrc, sequence: packet.sequenceNumber, rtpTimestamp: packet.timestamp,
                            clockRate: clockRates[packet.payloadType] ?? 90000, now: now)
        guard fecReceiver != nil, packet.payloadType == fecReceiver?.redPayloadType else {
            events.push(.rtp(ReceivedRTP(bytes: bytes, packet: packet, section: sections[packet.payloadType])))
            return
        }
        // RED: the media it carries goes on; an FEC packet may rebuild a media packet that went missing.
        let outs = fecReceiver?.receive(bytes) ?? []
        for (media, rebuilt) in outs {
            guard let m = try? RTPPacket(parsing: media) else { continue }
            if rebuilt {
                counters.fecPacketsRecovered += 1
                rtpSession.received(ssrc: m.ssrc, sequence: m.sequenceNumber, rtpTimestamp: m.timestamp,
                                    clockRate: clockRates[m.payloadType] ?? 90000, now: now)
            }
            events.push(.rtp(ReceivedRTP(bytes: media, packet: m, section: sections[m.payloadType])))
        }
    }

    private func receiveRTCP(_ bytes: [UInt8], now: Instant) {
        guard let srtp else { return }
        var p = bytes
        do { try srtp.unprotectRTCP(&p) } catch SRTPError.replayed { counters.replaysDropped += 1; return } catch { counters.srtpErrors += 1; return }
        counters.rtcpReceived += 1
        let compound = rtpSession.handleRTCP(p, now: now)
        counters.rtcpPacketsSkipped += compound.skipped
        // NACKs were answered by the session from its cache; report them too (a pipeline may count them).
        for case .nack(_, let media, let lost) in compound.packets {
            counters.nacksReceived += 1
            events.push(.nackRequested(ssrc: media, sequences: lost))
        }
    }

    /// SSRC, sequence number, timestamp and payload type of an RTP header, without copying.
    static func header(_ p: [UInt8]) -> (ssrc: UInt32, seq: UInt16, ts: UInt32, pt: UInt8)? {
        guard p.count >= 12, p[0] >> 6 == 2 else { return nil }
        let seq = UInt16(p[2]) << 8 | UInt16(p[3])
        let ts = UInt32(p[4]) << 24 | UInt32(p[5]) << 16 | UInt32(p[6]) << 8 | UInt32(p[7])
        let ssrc = UInt32(p[8]) << 24 | UInt32(p[9]) << 16 | UInt32(p[10]) << 8 | UInt32(p[11])
        return (ssrc, seq, ts, p[1] & 0x7F)
    }
}
