import OTBase
import OTWire

/// Which side decides the nomination (RFC 8445 §6.1.1).
public enum ICERole: Sendable, Equatable { case controlling, controlled }

/// The connection state users observe (RTCIceConnectionState).
public enum ICEConnectionState: String, Sendable, Equatable {
    case new, checking
    /// A pair is selected; media can flow. Checks may still go on.
    case connected
    /// A full agent is done: a pair is selected, the peer signalled the end of its candidates, our gathering
    /// ended and no check is pending. New remote candidates bring it back to `connected`.
    case completed
    /// Consent checks went unanswered for `disconnectedTimeout` (may come back).
    case disconnected
    case failed
    /// `close()` was called: the agent sends and reports nothing more.
    case closed

    /// Connected or completed: media can flow.
    public var isConnected: Bool { self == .connected || self == .completed }
}

/// The pair media uses, as statistics show it (W3C `candidate-pair` with its local and remote candidates).
public struct ICESelectedPair: Sendable, Equatable {
    /// Our candidate as the peer sees it: the host or relayed candidate, or the server-reflexive or
    /// peer-reflexive one when the checks' XOR-MAPPED-ADDRESS differed from the socket (RFC 8445 §7.2.5.3.1).
    public var local: SDPCandidate
    public var remote: SDPCandidate
    /// The local socket (the base) media leaves from.
    public var base: TransportAddress
    public var nominated: Bool
}

/// A datagram the agent wants sent from the local socket `source` (a candidate's base) to `destination`.
public struct ICETransmit: Sendable, Equatable {
    public var source: TransportAddress
    public var destination: TransportAddress
    public var bytes: [UInt8]
}

/// What the agent reports.
public enum ICEEvent: Sendable, Equatable {
    case stateChanged(ICEConnectionState)
    /// The pair media should use from now on.
    case selectedPairChanged(local: SDPCandidate, remote: SDPCandidate)
    case roleChanged(ICERole)
    /// A server-reflexive candidate was gathered: signal it to the peer (it is not paired itself; its base is).
    case localCandidate(SDPCandidate)
    /// Every STUN server asked by `gatherServerReflexive` answered or timed out.
    case gatheringComplete
    /// The selected pair's round-trip time, measured by a check or consent request sent once and answered on it
    /// (smoothed per pair, RFC 6298): on selection when the pair has one, then at each new sample.
    case roundTripTime(Duration)
}

/// Settings of an ICE agent. Durations are the engine's timers; tests may shorten them.
public struct ICEConfig: Sendable {
    public var role: ICERole
    /// ICE-lite (RFC 8445 §2.5): answers checks, never sends them; always controlled.
    public var lite = false
    /// Relay-only transport policy: local candidates other than relayed ones are not used.
    public var relayOnly = false
    public var localUfrag: String
    public var localPwd: String
    public var tieBreaker: UInt64
    /// Seed for transaction IDs and timer jitter.
    public var seed: UInt64
    /// Pacing between new checks (Ta).
    public var pacing: Duration = .milliseconds(50)
    /// First retransmission timeout of a request to a STUN server; doubles up to `maxRTO`.
    public var initialRTO: Duration = .milliseconds(250)
    /// First retransmission timeout of a connectivity check while no round-trip time has been measured; once one is,
    /// a check's is SRTT + 4·RTTVAR (RFC 6298, Karn's rule: only from checks sent once), at least `minRTO`, and never
    /// below `pacing` × the pairs waiting or in progress (RFC 8445 §14.3), so retransmissions stay paced. A check
    /// backs off to 4 × that (a request to a STUN server to `maxRTO`): checks are small and paced, and a lost one is
    /// mostly loss, not congestion; a 1.6 s wait for the next try is what slow set-ups at 20 % loss were made of.
    public var initialCheckRTO: Duration = .milliseconds(100)
    public var minRTO: Duration = .milliseconds(50)
    public var maxRTO: Duration = .milliseconds(1600)
    /// Transmissions of one check before its pair fails (Rc), unless the pair is known to work (`workingPairCheckTimeout`).
    public var maxTransmissions = 7
    /// How long a check on a pair known to work (the peer's check or DTLS arrived on it, or one of ours succeeded on it)
    /// is retransmitted past `maxTransmissions` before the pair fails: a path that has carried checks is lossy, not
    /// broken, and a lone pair at 30 % loss can lose seven checks in a row. As long as the session's connect timeout
    /// (15 s).
    public var workingPairCheckTimeout: Duration = .seconds(15)
    /// How long the controlling agent waits after the first valid pair for better ones before nominating.
    public var nominationDelay: Duration = .milliseconds(150)
    /// RFC 7675 consent: request interval (randomized ±20 %), and when missing responses mean disconnected / failed.
    public var consentInterval: Duration = .seconds(5)
    public var disconnectedTimeout: Duration = .seconds(10)
    public var consentTimeout: Duration = .seconds(30)
    /// A pair selected without a round-trip time (every answered check on it had been retransmitted: Karn's rule) gets
    /// consent requests at once and every check RTO, up to this many, until one is answered: what it measures is the
    /// path's round trip before media starts (RTP sessions start from it), not a default.
    public var roundTripProbes = 4

    public init(role: ICERole, localUfrag: String, localPwd: String, tieBreaker: UInt64, seed: UInt64, lite: Bool = false) {
        self.role = lite ? .controlled : role
        self.localUfrag = localUfrag; self.localPwd = localPwd
        self.tieBreaker = tieBreaker; self.seed = seed; self.lite = lite
    }

    /// Random credentials of RFC 8445 length (ufrag 8, pwd 24 characters from the ice-char set).
    public static func randomCredentials<G: RandomNumberGenerator>(using g: inout G) -> (ufrag: String, pwd: String) {
        let chars = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        func s(_ n: Int) -> String { String((0..<n).map { _ in chars[Int.random(in: 0..<chars.count, using: &g)] }) }
        return (s(8), s(24))
    }
}

/// A sans-IO ICE agent (RFC 8445) for one component (rtcp-mux, BUNDLE), with trickle, consent freshness
/// (RFC 7675), ICE restart, and an ICE-lite mode. Feed it datagrams and time; drain transmits, events and the next deadline.
public final class ICEAgent {
    public enum PairState: Sendable { case frozen, waiting, inProgress, succeeded, failed }

    struct Pair {
        var local: Int
        var remote: Int
        var priority: UInt64
        var state: PairState
        var foundation: String
        var nominated = false
        /// A USE-CANDIDATE check was requested for this pair (controlling) or received (controlled).
        var nominateOnSuccess = false
        /// Our address as the peer saw it in the check's response (XOR-MAPPED-ADDRESS).
        var mapped: TransportAddress?
        /// A valid check of the peer's (or its DTLS: `handlePeerHandshake`) arrived on this pair, or one of ours succeeded on it.
        var works = false
        /// Smoothed round-trip time of requests sent once on this pair and answered (RFC 6298 SRTT).
        var roundTripTime: Duration?
    }

    struct Transaction {
        var pair: Int
        var bytes: [UInt8]
        var source: TransportAddress
        var destination: TransportAddress
        var transmissions: Int
        var rto: Duration
        var retransmitAt: Instant
        /// When it was first sent (for RTT samples of requests sent once).
        var sentAt: Instant
        var consent: Bool
        var useCandidate: Bool
        var role: ICERole
        /// For a Binding request to a STUN server: the local socket whose reflexive address we ask for.
        var gatherBase: TransportAddress?
        /// Replaced by a triggered check (RFC 8445 §7.3.1.4): not retransmitted, and its silence fails nothing;
        /// a response that still comes counts.
        var cancelled = false
    }

    public private(set) var config: ICEConfig
    public private(set) var state: ICEConnectionState = .new
    public private(set) var localCandidates: [SDPCandidate] = []
    public private(set) var remoteCandidates: [SDPCandidate] = []
    public private(set) var remoteUfrag: String?
    private var remotePwd: String?
    /// The remote side is ICE-lite (`a=ice-lite`): a full agent then takes the controlling role.
    public var remoteIsLite = false {
        didSet { if remoteIsLite && !config.lite { switchRole(to: .controlling) } }
    }
    private var pairs: [Pair] = []
    private var triggered: [Int] = []
    private var transactions: [STUNTransactionID: Transaction] = [:]
    private var nextCheckAt: Instant?
    private var nominationAt: Instant?
    private var selected: (local: SDPCandidate, remote: SDPCandidate)?
    private var selectedPairIndex: Int?
    private var lastConsentAt: Instant?
    private var nextConsentAt: Instant?
    /// Round-trip probes sent on the selected pair (`ICEConfig.roundTripProbes`).
    private var probesSent = 0
    /// RFC 7675 §5.1: consent for the selected pair expired (no answer to consent checks, or no checks from the
    /// peer for a lite agent, for `consentTimeout`). Nothing but STUN may then go to the peer: media and DTLS
    /// stop until a pair is selected again (after an ICE restart, whose checks give the new pair consent).
    public private(set) var consentExpired = false
    private var remoteCandidatesComplete = false
    /// Smoothed round-trip time of connectivity checks on any pair (RFC 6298; it times new checks), nil until one
    /// answered check was sent only once.
    public private(set) var roundTripTime: Duration?
    private var rttVariation: Duration = .zero
    private var rng: SeededRandom
    private var transmits = FIFO<ICETransmit>()
    private var events = FIFO<ICEEvent>()
    private var foundations: [String: String] = [:]
    /// Server-reflexive candidates gathered from STUN servers (signalled, not paired).
    public private(set) var serverReflexiveCandidates: [SDPCandidate] = []
    /// Local candidates that are paired and answer checks but are not signalled (LAN host candidates under
    /// `filterOutLanCandidates`: bases of server-reflexive candidates).
    private var unsignalled: Set<TransportAddress> = []
    /// The local socket each server-reflexive candidate was learnt on.
    private var reflexiveBases: [TransportAddress: TransportAddress] = [:]

    /// What a server-reflexive candidate of an unsignalled base says as its related address: the unspecified
    /// address and port 0 (RFC 8839 §5.1, as browsers do), so the LAN address stays private.
    static func hiddenBase(_ base: TransportAddress) -> TransportAddress {
        TransportAddress(ip: base.ip.isIPv6 ? .v6(0, 0) : .v4(0), port: 0)
    }
    /// STUN Binding requests for server-reflexive candidates still waiting for an answer.
    public var isGathering: Bool { transactions.values.contains { $0.gatherBase != nil } }

    public init(config: ICEConfig) {
        self.config = config
        rng = SeededRandom(seed: config.seed)
    }

    public var role: ICERole { config.role }
    /// The pair media uses: the local candidate's base to send from, and the remote address.
    public var selectedPair: (local: SDPCandidate, remote: SDPCandidate)? { selected }
    /// The selected pair's addresses (the local candidate's base, the remote address), read in place without copying
    /// the candidates: what the media send and routing paths ask per packet.
    public var selectedRoute: (local: TransportAddress, remote: TransportAddress)? {
        guard let local = selected?.local.address, let remote = selected?.remote.address else { return nil }
        return (local, remote)
    }

    /// The selected pair's round-trip time (nil before a request sent once on it was answered; `.roundTripTime` reports it).
    public var selectedPairRoundTripTime: Duration? { selectedPairIndex.flatMap { $0 < pairs.count ? pairs[$0].roundTripTime : nil } }

    // MARK: candidates and credentials

    /// Adds a local host (or relayed) candidate bound at `address`; returns it for signalling (trickle), or nil
    /// when it is not to be signalled (`signal: false`, or not relayed under the relay-only policy).
    @discardableResult
    public func addLocalCandidate(_ address: TransportAddress, kind: SDPCandidate.Kind = .host, localPreference: UInt16? = nil,
                                  signal: Bool = true) -> SDPCandidate? {
        guard !config.relayOnly || kind == .relay else { return nil }
        if !signal { unsignalled.insert(address) }
        let key = "\(kind.rawValue) \(address.ip)"
        let foundation = foundations[key] ?? String(foundations.count + 1)
        foundations[key] = foundation
        // IPv6 above IPv4, then in the order added.
        let pref = localPreference ?? UInt16(max(0, (address.ip.isIPv6 ? 65535 : 32767) - localCandidates.count * 16))
        let c = SDPCandidate(foundation: foundation, priority: SDPCandidate.priority(kind: kind, localPreference: pref),
                             address: address, kind: kind)
        guard state != .closed else { return nil }
        if let existing = localCandidates.first(where: { $0.address == address }) { return signal ? existing : nil }
        localCandidates.append(c)
        for r in remoteCandidates.indices { formPair(local: localCandidates.count - 1, remote: r) }
        if state == .completed { setState(.connected) }
        return signal ? c : nil
    }

    /// The candidates to put in a description: local ones that are signalled, and server-reflexive ones.
    public var candidatesToSignal: [SDPCandidate] {
        localCandidates.filter { !unsignalled.contains($0.address) && $0.priority > 0 } + serverReflexiveCandidates
    }

    /// Asks the STUN server `server` (RFC 8489 Binding, no credentials) for our address as seen from local socket `base`;
    /// a different mapped address becomes a server-reflexive candidate (`.localCandidate` event).
    public func gatherServerReflexive(server: TransportAddress, base: TransportAddress, now: Instant) {
        guard !config.relayOnly, state != .closed, server.ip.isIPv6 == base.ip.isIPv6 else { return }
        let id = STUNTransactionID.random(using: &rng)
        let bytes = STUNMessage(method: .binding, messageClass: .request, transactionID: id).encode()
        transactions[id] = Transaction(pair: -1, bytes: bytes, source: base, destination: server, transmissions: 1,
                                       rto: config.initialRTO, retransmitAt: now + config.initialRTO, sentAt: now, consent: false,
                                       useCandidate: false, role: config.role, gatherBase: base)
        transmits.push(ICETransmit(source: base, destination: server, bytes: bytes))
    }

    private func gathered(_ msg: STUNMessage, base: TransportAddress) {
        guard msg.messageClass == .success, let mapped = msg.xorMappedAddress else { return }
        addServerReflexive(mapped, base: base)
    }

    /// Adds a server-reflexive candidate learnt elsewhere (a TURN allocation's mapped address) for local socket
    /// `base`. Redundant ones (RFC 8445 §5.1.3: equal to a local candidate or to one already gathered) are dropped.
    public func addServerReflexive(_ mapped: TransportAddress, base: TransportAddress) {
        guard !config.relayOnly, mapped.ip.isIPv6 == base.ip.isIPv6,
              !localCandidates.contains(where: { $0.address == mapped }),
              !serverReflexiveCandidates.contains(where: { $0.address == mapped }),
              let baseCandidate = localCandidates.first(where: { $0.address == base }) else { return }
        let key = "srflx \(mapped.ip)"
        let foundation = foundations[key] ?? String(foundations.count + 1)
        foundations[key] = foundation
        let pref = UInt16((baseCandidate.priority >> 8) & 0xFFFF)
        let c = SDPCandidate(foundation: foundation, priority: SDPCandidate.priority(kind: .srflx, localPreference: pref),
                             address: mapped, kind: .srflx, relatedAddress: unsignalled.contains(base) ? Self.hiddenBase(base) : base)
        reflexiveBases[mapped] = base
        serverReflexiveCandidates.append(c)
        events.push(.localCandidate(c))
    }

    /// Sets the remote ufrag and password (from the remote description).
    public func setRemoteCredentials(ufrag: String, pwd: String) {
        remoteUfrag = ufrag
        remotePwd = pwd
    }

    /// Adds a remote candidate (from SDP or trickled). UDP only; TCP candidates are ignored.
    public func addRemoteCandidate(_ c: SDPCandidate) {
        guard c.transport == "udp", c.component == 1, state != .closed else { return }
        if let i = remoteCandidates.firstIndex(where: { $0.address == c.address }) {
            if remoteCandidates[i].kind == .prflx && c.kind != .prflx { remoteCandidates[i] = c }
            return
        }
        remoteCandidates.append(c)
        for l in localCandidates.indices { formPair(local: l, remote: remoteCandidates.count - 1) }
        if state == .completed { setState(.connected) }
    }

    /// The remote side said it has no more candidates: a checklist with every pair failed now fails the agent.
    public func endOfRemoteCandidates(now: Instant) {
        remoteCandidatesComplete = true
        checkFailure()
        checkCompleted()
    }

    /// Stops the agent (RTCIceConnectionState closed): no more checks, consent, timers or events after this one.
    public func close() {
        guard state != .closed else { return }
        transactions = [:]
        triggered = []
        nextCheckAt = nil
        nominationAt = nil
        nextConsentAt = nil
        lastConsentAt = nil
        setState(.closed)
    }

    /// ICE restart (RFC 8445 §9): new local credentials; remote credentials and candidates must be set again.
    /// Media keeps using the old selected pair until a new one is nominated.
    public func restart(ufrag: String, pwd: String, now: Instant) {
        config.localUfrag = ufrag
        config.localPwd = pwd
        remoteUfrag = nil
        remotePwd = nil
        remoteCandidates = []
        remoteCandidatesComplete = false
        pairs = []
        triggered = []
        transactions = transactions.filter { $0.value.gatherBase != nil }  // gathering goes on
        nominationAt = nil
        selectedPairIndex = nil
        nextConsentAt = nil
        lastConsentAt = nil
        nextCheckAt = now
        setState(.checking)
    }

    /// Removes a local candidate (its socket went away) and every pair using it.
    public func removeLocalCandidate(_ address: TransportAddress) {
        guard let i = localCandidates.firstIndex(where: { $0.address == address }) else { return }
        localCandidates[i].priority = 0
        for p in pairs.indices where pairs[p].local == i { pairs[p].state = .failed }
        let wasGathering = isGathering
        transactions = transactions.filter { $0.value.source != address }
        if wasGathering && !isGathering { events.push(.gatheringComplete) }
        serverReflexiveCandidates.removeAll { reflexiveBases[$0.address] == address }
    }

    private func pairPriority(_ l: SDPCandidate, _ r: SDPCandidate) -> UInt64 {
        let (g, d) = config.role == .controlling ? (UInt64(l.priority), UInt64(r.priority)) : (UInt64(r.priority), UInt64(l.priority))
        return (1 << 32) * min(g, d) + 2 * max(g, d) + (g > d ? 1 : 0)
    }

    @discardableResult
    private func formPair(local l: Int, remote r: Int) -> Int? {
        let lc = localCandidates[l], rc = remoteCandidates[r]
        guard lc.address.ip.isIPv6 == rc.address.ip.isIPv6, lc.priority > 0 else { return nil }
        if let i = pairs.firstIndex(where: { $0.local == l && $0.remote == r }) { return i }
        guard pairs.count < 100 else { return nil }
        let foundation = lc.foundation + "/" + rc.foundation
        let sameFoundationActive = pairs.contains { $0.foundation == foundation && $0.state != .frozen }
        pairs.append(Pair(local: l, remote: r, priority: pairPriority(lc, rc), state: sameFoundationActive ? .frozen : .waiting,
                          foundation: foundation))
        if nextCheckAt == nil { nextCheckAt = .zero }  // due at once
        return pairs.count - 1
    }

    // MARK: input

    /// Handles a datagram that arrived on local socket `local` from `from`. Returns false when it is not
    /// STUN for this agent (the caller passes it on to DTLS/SRTP).
    @discardableResult
    public func handleReceive(_ bytes: [UInt8], from: TransportAddress, local: TransportAddress, now: Instant) -> Bool {
        guard STUNMessage.isSTUN(bytes[...]), let msg = try? STUNMessage.parse(bytes),
              msg.method == STUNMethod.binding.rawValue else { return false }
        guard state != .closed else { return true }
        switch msg.messageClass {
        case .request: handleRequest(msg, from: from, local: local, now: now)
        case .success, .error: handleResponse(msg, from: from, local: local, now: now)
        case .indication: break
        }
        checkCompleted()
        return true
    }

    /// The peer's DTLS arrived on `local` from `from`. Before any check of ours on that pair succeeded, this means the
    /// peer got one (an ICE-lite peer starts its handshake on our first check) and only its responses were lost: the
    /// pair is known to work, so its check goes on past Rc (`workingPairCheckTimeout`), and goes again now unless it
    /// went within the last `checkRTO`, instead of after its backed-off timeout.
    public func handlePeerHandshake(from: TransportAddress, local: TransportAddress, now: Instant) {
        guard state != .closed, selectedPairIndex == nil,
              let p = pairs.firstIndex(where: { localCandidates[$0.local].address == local && remoteCandidates[$0.remote].address == from })
        else { return }
        pairs[p].works = true
        let rto = checkRTO
        for (id, t) in transactions where t.pair == p && !t.consent && !t.cancelled {
            let lastSent = t.retransmitAt - t.rto
            transactions[id]?.retransmitAt = min(t.retransmitAt, max(now, lastSent + rto))
        }
    }

    private func respond(_ m: STUNMessage, key: [UInt8]?, from local: TransportAddress, to: TransportAddress) {
        transmits.push(ICETransmit(source: local, destination: to, bytes: m.encode(integrityKey: key)))
    }

    private func handleRequest(_ msg: STUNMessage, from: TransportAddress, local: TransportAddress, now: Instant) {
        let key = Array(config.localPwd.utf8)
        guard let user = msg.username, let colon = user.firstIndex(of: ":"), user[..<colon] == config.localUfrag else {
            var e = STUNMessage(method: .binding, messageClass: .error, transactionID: msg.transactionID)
            e.attributes = [.errorCode(code: STUNErrorCode.unauthorized, reason: "Unauthorized")]
            respond(e, key: nil, from: local, to: from)
            return
        }
        guard msg.verifyIntegrity(key: key) else {
            var e = STUNMessage(method: .binding, messageClass: .error, transactionID: msg.transactionID)
            e.attributes = [.errorCode(code: STUNErrorCode.unauthorized, reason: "Unauthorized")]
            respond(e, key: nil, from: local, to: from)
            return
        }
        guard let l = localCandidates.firstIndex(where: { $0.address == local }) else { return }

        // Role conflict (RFC 8445 §7.3.1.1).
        var theirControlling: UInt64?, theirControlled: UInt64?
        for a in msg.attributes {
            if case .iceControlling(let t) = a { theirControlling = t }
            if case .iceControlled(let t) = a { theirControlled = t }
        }
        if config.role == .controlling, let t = theirControlling {
            if config.tieBreaker >= t {
                var e = STUNMessage(method: .binding, messageClass: .error, transactionID: msg.transactionID)
                e.attributes = [.errorCode(code: STUNErrorCode.roleConflict, reason: "Role Conflict")]
                respond(e, key: key, from: local, to: from)
                return
            }
            switchRole(to: .controlled)
        } else if config.role == .controlled, let t = theirControlled, !config.lite {
            if config.tieBreaker >= t {
                switchRole(to: .controlling)
            } else {
                var e = STUNMessage(method: .binding, messageClass: .error, transactionID: msg.transactionID)
                e.attributes = [.errorCode(code: STUNErrorCode.roleConflict, reason: "Role Conflict")]
                respond(e, key: key, from: local, to: from)
                return
            }
        }

        var ok = STUNMessage(method: .binding, messageClass: .success, transactionID: msg.transactionID)
        ok.attributes = [.xorMappedAddress(from)]
        respond(ok, key: key, from: local, to: from)
        if state == .new { setState(.checking) }

        // Peer-reflexive remote candidate for an unknown source.
        var r = remoteCandidates.firstIndex { $0.address == from }
        if r == nil {
            let prio = msg.priority ?? SDPCandidate.priority(kind: .prflx, localPreference: 0)
            remoteCandidates.append(SDPCandidate(foundation: "prflx\(remoteCandidates.count)", priority: prio, address: from, kind: .prflx))
            r = remoteCandidates.count - 1
        }
        guard let r, let p = formPair(local: l, remote: r) else { return }
        pairs[p].works = true
        let useCandidate = msg.attribute(STUNAttributeType.useCandidate) != nil
        if config.lite {
            pairs[p].state = .succeeded
            lastConsentAt = now
            if useCandidate || selected == nil { pairs[p].nominated = true; select(p, now: now) }
            return
        }
        if useCandidate && config.role == .controlled {
            if pairs[p].state == .succeeded {
                pairs[p].nominated = true
                select(p, now: now)
            } else {
                pairs[p].nominateOnSuccess = true
            }
        }
        switch pairs[p].state {
        case .succeeded: break
        case .inProgress:
            // RFC 8445 §7.3.1.4: cancel the outstanding check and trigger a new one. The peer can hear us now, so the
            // new check goes at the next tick instead of after the old one's retransmission timeout (our first
            // check may have reached the peer before it could answer it, or been lost).
            for (id, t) in transactions where t.pair == p && !t.consent && !t.cancelled { transactions[id]?.cancelled = true }
            pairs[p].state = .waiting
            if !triggered.contains(p) { triggered.append(p) }
            if nextCheckAt == nil { nextCheckAt = now }
        default:
            pairs[p].state = .waiting
            if !triggered.contains(p) { triggered.append(p) }
            if nextCheckAt == nil { nextCheckAt = now }
        }
    }

    /// RFC 6298 §2: SRTT and RTTVAR from a sample, the agent's and pair `p`'s; the selected pair's is reported, and once
    /// it has one its probes stop (the next consent request goes after the usual interval).
    private func sampleRoundTripTime(_ r: Duration, pair p: Int, now: Instant) {
        guard r >= .zero else { return }
        pairs[p].roundTripTime = pairs[p].roundTripTime.map { ($0 * 7 + r) / 8 } ?? r
        if p == selectedPairIndex, let srtt = pairs[p].roundTripTime {
            if probesSent > 0, !config.lite { nextConsentAt = now + jittered(config.consentInterval) }
            probesSent = 0
            events.push(.roundTripTime(srtt))
        }
        guard let srtt = roundTripTime else {
            roundTripTime = r
            rttVariation = r / 2
            return
        }
        let diff = srtt > r ? srtt - r : r - srtt
        rttVariation = (rttVariation * 3 + diff) / 4
        roundTripTime = (srtt * 7 + r) / 8
    }

    /// The retransmission timeout of a new connectivity check (see `ICEConfig.initialCheckRTO`).
    private var checkRTO: Duration {
        var rto = config.initialCheckRTO
        if let srtt = roundTripTime { rto = min(max(srtt + max(rttVariation * 4, .milliseconds(1)), config.minRTO), config.maxRTO) }
        let active = pairs.lazy.filter { $0.state == .waiting || $0.state == .inProgress }.count
        return max(rto, config.pacing * active)
    }

    private func switchRole(to r: ICERole) {
        guard config.role != r else { return }
        config.role = r
        for i in pairs.indices { pairs[i].priority = pairPriority(localCandidates[pairs[i].local], remoteCandidates[pairs[i].remote]) }
        events.push(.roleChanged(r))
    }

    private func handleResponse(_ msg: STUNMessage, from: TransportAddress, local: TransportAddress, now: Instant) {
        guard let t = transactions[msg.transactionID] else { return }
        if let base = t.gatherBase {
            guard from == t.destination else { return }
            transactions[msg.transactionID] = nil
            gathered(msg, base: base)
            if !isGathering { events.push(.gatheringComplete) }
            return
        }
        guard let pwd = remotePwd, msg.verifyIntegrity(key: Array(pwd.utf8)) else { return }
        transactions[msg.transactionID] = nil
        let p = t.pair
        guard p < pairs.count else { return }
        if t.transmissions == 1, from == t.destination { sampleRoundTripTime(now - t.sentAt, pair: p, now: now) }
        if t.consent {
            if msg.messageClass == .success, from == t.destination {
                lastConsentAt = now
                if state == .disconnected { setState(.connected); checkCompleted() }
            }
            return
        }
        if msg.messageClass == .error {
            if msg.errorCode?.code == STUNErrorCode.roleConflict {
                if config.role == t.role { switchRole(to: t.role == .controlling ? .controlled : .controlling) }
                pairs[p].state = .waiting
                triggered.append(p)
            } else {
                pairs[p].state = .failed
                checkFailure()
            }
            return
        }
        // Non-symmetric responses fail the pair (RFC 8445 §7.2.5.2.1).
        guard from == t.destination, local == t.source else { pairs[p].state = .failed; checkFailure(); return }
        pairs[p].state = .succeeded
        pairs[p].works = true
        pairs[p].mapped = msg.xorMappedAddress
        lastConsentAt = now
        // Unfreeze pairs with the same foundation.
        for i in pairs.indices where pairs[i].state == .frozen && pairs[i].foundation == pairs[p].foundation { pairs[i].state = .waiting }
        if config.role == .controlling {
            if t.useCandidate {
                pairs[p].nominated = true
                select(p, now: now)
            } else if selectedPairIndex == nil {
                // Nominate at once when no better pair can still succeed; otherwise give them `nominationDelay`.
                let betterPending = pairs.contains {
                    $0.priority > pairs[p].priority && ($0.state == .waiting || $0.state == .inProgress || $0.state == .frozen)
                }
                if !betterPending || remoteIsLite {
                    nominationAt = now
                } else if nominationAt == nil {
                    nominationAt = now + config.nominationDelay
                }
            }
        } else if pairs[p].nominateOnSuccess {
            pairs[p].nominated = true
            select(p, now: now)
        }
    }

    /// Consent for the selected pair is lost: the agent fails and application data stops (`consentExpired`).
    private func expireConsent() {
        consentExpired = true
        nextConsentAt = nil  // no more consent checks (and no deadline left in the past)
        setState(.failed)
    }

    /// Selects pair `p`, unless a nominated pair of higher priority is selected already: with several nominated pairs
    /// both sides use the highest-priority one (RFC 8445 §8.1.1), so that a lite or controlled agent, which a full
    /// controlling peer may nominate several pairs to (aggressive nomination towards a lite agent), ends on the pair
    /// the peer keeps.
    private func select(_ p: Int, now: Instant) {
        if let cur = selectedPairIndex, cur != p, pairs[cur].nominated, pairs[cur].priority > pairs[p].priority { return }
        let lc = localCandidates[pairs[p].local], rc = remoteCandidates[pairs[p].remote]
        let changed = selected.map { $0.local.address != lc.address || $0.remote.address != rc.address } ?? true
        selectedPairIndex = p
        selected = (lc, rc)
        lastConsentAt = now
        // The pair's check (or the peer's nominating check, after our answer to it) just succeeded: consent.
        consentExpired = false
        if changed { probesSent = 0 }
        if !config.lite {
            // Without a round trip on the pair, probe it at once (`ICEConfig.roundTripProbes`).
            if pairs[p].roundTripTime == nil, changed, config.roundTripProbes > 0 { nextConsentAt = now }
            else if nextConsentAt == nil { nextConsentAt = now + jittered(config.consentInterval) }
        }
        if changed {
            events.push(.selectedPairChanged(local: lc, remote: rc))
            if let rtt = pairs[p].roundTripTime { events.push(.roundTripTime(rtt)) }
        }
        if !state.isConnected { setState(.connected) }
    }

    /// Connected → completed once nothing is left to check or gather (full agents only).
    private func checkCompleted() {
        guard state == .connected, !config.lite, let sp = selectedPairIndex, pairs[sp].nominated, remoteCandidatesComplete, !isGathering,
              !pairs.contains(where: { $0.state == .waiting || $0.state == .inProgress || $0.state == .frozen }) else { return }
        setState(.completed)
    }

    /// The selected pair as statistics report it, with our candidate as the peer sees it.
    public var selectedPairInfo: ICESelectedPair? {
        guard let p = selectedPairIndex, p < pairs.count else { return nil }
        let base = localCandidates[pairs[p].local], remote = remoteCandidates[pairs[p].remote]
        var local = base
        if let mapped = pairs[p].mapped, mapped != base.address {
            if let s = serverReflexiveCandidates.first(where: { $0.address == mapped }) { local = s } else {
                local = SDPCandidate(foundation: "prflx", priority: SDPCandidate.priority(kind: .prflx, localPreference: UInt16((base.priority >> 8) & 0xFFFF)),
                                     address: mapped, kind: .prflx, relatedAddress: base.address)
            }
        }
        return ICESelectedPair(local: local, remote: remote, base: base.address, nominated: pairs[p].nominated)
    }

    private func jittered(_ d: Duration) -> Duration {
        .microseconds(Int64(Double(d.microseconds) * (0.8 + 0.4 * rng.unit())))
    }

    private func setState(_ s: ICEConnectionState) {
        guard s != state else { return }
        state = s
        events.push(.stateChanged(s))
    }

    private func checkFailure() {
        guard selectedPairIndex == nil, remoteCandidatesComplete, !pairs.isEmpty,
              pairs.allSatisfy({ $0.state == .failed }), state != .failed else { return }
        setState(.failed)
    }

    // MARK: timers

    /// Runs timers due at `now`: retransmissions, new checks, nomination, consent.
    public func handleTimeout(now: Instant) {
        guard state != .closed else { return }
        let wasGathering = isGathering
        defer {
            if wasGathering && !isGathering { events.push(.gatheringComplete) }
            checkCompleted()
        }
        for (id, t) in transactions where t.retransmitAt <= now {
            if t.cancelled {
                transactions[id] = nil
                continue
            }
            let onWorkingPair = !t.consent && t.pair >= 0 && t.pair < pairs.count && pairs[t.pair].works
            if t.consent || t.transmissions >= config.maxTransmissions && !(onWorkingPair && now - t.sentAt < config.workingPairCheckTimeout) {
                transactions[id] = nil
                if !t.consent, t.pair >= 0, t.pair < pairs.count, pairs[t.pair].state == .inProgress {
                    pairs[t.pair].state = .failed
                    checkFailure()
                }
                continue
            }
            var u = t
            u.transmissions += 1
            u.rto = min(u.rto * 2, t.pair >= 0 ? min(checkRTO * 4, config.maxRTO) : config.maxRTO)
            u.retransmitAt = now + u.rto
            transactions[id] = u
            transmits.push(ICETransmit(source: t.source, destination: t.destination, bytes: t.bytes))
        }
        guard !config.lite else {
            if selectedPairIndex != nil, let last = lastConsentAt {
                if now - last >= config.consentTimeout { expireConsent() } else if now - last >= config.disconnectedTimeout { setState(.disconnected) }
            }
            return
        }
        let nominationDue = nominationAt.map { $0 <= now } ?? false
        if nominationDue { nominationAt = nil }
        if nominationDue, config.role == .controlling, selectedPairIndex == nil {
            let best = pairs.indices.filter { pairs[$0].state == .succeeded }.max { pairs[$0].priority < pairs[$1].priority }
            if let best { sendCheck(best, useCandidate: true, now: now) }
        }
        if let at = nextCheckAt, at <= now, remotePwd != nil {
            if let p = nextPairToCheck() {
                let nominate = config.role == .controlling && (pairs[p].nominateOnSuccess || remoteIsLite)
                sendCheck(p, useCandidate: nominate, now: now)
                nextCheckAt = now + config.pacing
            } else {
                nextCheckAt = nil
            }
        }
        if let last = lastConsentAt, selectedPairIndex != nil {
            if now - last >= config.consentTimeout {
                expireConsent()
            } else if now - last >= config.disconnectedTimeout, state.isConnected {
                setState(.disconnected)
            }
        }
        if let at = nextConsentAt, at <= now, let p = selectedPairIndex, state != .failed {
            let probe = pairs[p].roundTripTime == nil && probesSent < config.roundTripProbes
            if probe { probesSent += 1 }
            nextConsentAt = now + (probe && probesSent < config.roundTripProbes ? checkRTO : jittered(config.consentInterval))
            sendRequest(p, useCandidate: false, consent: true, now: now)
        }
    }

    private func nextPairToCheck() -> Int? {
        while let p = triggered.first {
            triggered.removeFirst()
            if pairs[p].state != .inProgress && pairs[p].state != .succeeded { return p }
        }
        if let p = pairs.indices.filter({ pairs[$0].state == .waiting }).max(by: { pairs[$0].priority < pairs[$1].priority }) { return p }
        if let p = pairs.indices.filter({ pairs[$0].state == .frozen }).max(by: { pairs[$0].priority < pairs[$1].priority }) { return p }
        return nil
    }

    private func sendCheck(_ p: Int, useCandidate: Bool, now: Instant) {
        if state == .new { setState(.checking) }
        pairs[p].state = .inProgress
        if useCandidate { pairs[p].nominateOnSuccess = true }
        sendRequest(p, useCandidate: useCandidate, consent: false, now: now)
    }

    private func sendRequest(_ p: Int, useCandidate: Bool, consent: Bool, now: Instant) {
        guard let ru = remoteUfrag, let rp = remotePwd else { return }
        let lc = localCandidates[pairs[p].local], rc = remoteCandidates[pairs[p].remote]
        let id = STUNTransactionID.random(using: &rng)
        var m = STUNMessage(method: .binding, messageClass: .request, transactionID: id)
        m.attributes = [.username("\(ru):\(config.localUfrag)"),
                        .priority(SDPCandidate.priority(kind: .prflx, localPreference: UInt16((lc.priority >> 8) & 0xFFFF)))]
        m.attributes.append(config.role == .controlling ? .iceControlling(config.tieBreaker) : .iceControlled(config.tieBreaker))
        if useCandidate { m.attributes.append(.useCandidate) }
        let bytes = m.encode(integrityKey: Array(rp.utf8))
        let rto = consent ? config.consentInterval : checkRTO
        transactions[id] = Transaction(pair: p, bytes: bytes, source: lc.address, destination: rc.address, transmissions: 1,
                                       rto: rto, retransmitAt: now + rto, sentAt: now, consent: consent, useCandidate: useCandidate,
                                       role: config.role, gatherBase: nil)
        transmits.push(ICETransmit(source: lc.address, destination: rc.address, bytes: bytes))
    }

    // MARK: output

    /// The next datagram to send, if any.
    public func pollTransmit() -> ICETransmit? { transmits.pop() }
    /// The next event, if any.
    public func pollEvent() -> ICEEvent? { events.pop() }
    /// When `handleTimeout` must next be called.
    public func pollTimeout() -> Instant? {
        var t: Instant? = transactions.values.lazy.map(\.retransmitAt).min()
        func merge(_ x: Instant?) { if let x { t = t.map { min($0, x) } ?? x } }
        if !config.lite {
            if remotePwd != nil { merge(nextCheckAt) }
            if selectedPairIndex == nil { merge(nominationAt) }
            // A failed agent sends no consent check (`handleTimeout`): its deadline is not one.
            if state != .failed { merge(nextConsentAt) }
        }
        if let last = lastConsentAt, selectedPairIndex != nil, state != .failed {
            merge(state.isConnected ? last + config.disconnectedTimeout : last + config.consentTimeout)
        }
        return t
    }

    /// The state of each pair (for tests and stats): local address, remote address, state, nominated.
    public var pairStates: [(local: TransportAddress, remote: TransportAddress, state: PairState, nominated: Bool)] {
        pairs.map { (localCandidates[$0.local].address, remoteCandidates[$0.remote].address, $0.state, $0.nominated) }
    }
}
