import OTBase
import OTWire

/// What the TURN client reports.
public enum TURNEvent: Sendable, Equatable {
    /// The allocation exists: the relayed address (a relay candidate) and our server-reflexive address.
    case allocated(relayed: TransportAddress, mapped: TransportAddress?)
    /// Data a peer sent to our relayed address.
    case data(from: TransportAddress, [UInt8])
    case failed(OTError)
}

/// A sans-IO TURN client (RFC 8656) over UDP or TCP to the server (relayed traffic is UDP): allocation with
/// long-term credentials, refreshes, permissions, channel bindings, Send/Data indications and ChannelData.
/// It talks only to the server: `pollTransmit` messages go from our local socket/connection to `config.server`.
/// Over TCP, `handleReceive` takes stream bytes in any chunking and frames them itself.
public final class TURNClient {
    /// How the client reaches its server: UDP, TCP, or TLS over TCP (`turns:`; the driver adds the TLS layer, the
    /// client sees the same byte stream as over TCP).
    public enum ServerTransport: Sendable {
        case udp, tcp, tls
        /// A byte stream (TCP or TLS): messages are framed from it and requests are not retransmitted.
        public var isStream: Bool { self != .udp }
    }

    public struct Config: Sendable {
        public var server: TransportAddress
        /// How we reach the server.
        public var transport: ServerTransport = .udp
        /// The server's host name as its URL gave it (a TLS connection checks the certificate against it; a proxy's
        /// CONNECT names it). Nil: the address.
        public var serverName: String?
        public var username: String
        public var password: String
        /// Requested allocation lifetime.
        public var lifetime: Duration = .seconds(600)
        public var seed: UInt64 = 1
        public var initialRTO: Duration = .milliseconds(500)
        public var maxTransmissions = 7
        /// Over TCP requests are not retransmitted (RFC 8489 §6.2.2): a transaction fails after this long.
        public var tcpTransactionTimeout: Duration = .milliseconds(39_500)
        public init(server: TransportAddress, username: String, password: String) {
            self.server = server; self.username = username; self.password = password
        }
    }

    enum Purpose: Equatable {
        case allocate, refresh(lifetime: UInt32), permission(IPAddress), channelBind(UInt16, TransportAddress)
    }

    struct Transaction {
        var purpose: Purpose
        var bytes: [UInt8]
        var transmissions: Int
        var rto: Duration
        var retransmitAt: Instant
    }

    public let config: Config
    public private(set) var relayedAddress: TransportAddress?
    public private(set) var mappedAddress: TransportAddress?
    public private(set) var isFailed = false
    private var realm: String?
    private var nonce: String?
    private var key: [UInt8] = []
    private var rng: SeededRandom
    private var transactions: [STUNTransactionID: Transaction] = [:]
    private var transmits = FIFO<[UInt8]>()
    private var events = FIFO<TURNEvent>()
    private var refreshAt: Instant?
    /// Installed permissions and when to refresh them (permissions last 300 s).
    private var permissions: [IPAddress: Instant] = [:]
    private var pendingPermissions: Set<IPAddress> = []
    /// Channel bindings: peer -> (channel, refresh time); bound once the ChannelBind succeeded.
    private var channels: [TransportAddress: (number: UInt16, refreshAt: Instant, bound: Bool)] = [:]
    private var peersByChannel: [UInt16: TransportAddress] = [:]
    private var nextChannel: UInt16 = 0x4000
    /// Data waiting for a permission.
    private var queued: [(TransportAddress, [UInt8])] = []
    private var authRetries = 0
    /// TCP: bytes received that do not yet form a whole message.
    private var streamBuffer: [UInt8] = []

    public init(config: Config) {
        self.config = config
        rng = SeededRandom(seed: config.seed)
    }

    // MARK: requests

    /// Sends the first Allocate (the server answers 401 with its realm and nonce; we retry with credentials).
    public func start(now: Instant) {
        guard !isFailed else { return }
        request(.allocate, now: now)
    }

    /// Over TCP or TLS: the connection to the server closed (or could not be made; `reason` says why when known, e.g.
    /// a TLS certificate refused, 9200). The allocation dies with it (RFC 8656 §3.1), so the client fails: with the
    /// reason's code, else `.connectionFailed` before the allocation and `.connectionDropped` after.
    public func connectionClosed(now: Instant, reason: OTError? = nil) {
        let kind = config.transport == .tls ? "TLS" : "TCP"
        if let reason {
            fail(OTError(reason.code, "TURN: the \(kind) connection to \(config.serverName ?? "\(config.server)") failed: \(reason.message)"))
        } else {
            let why = relayedAddress == nil ? "could not be made or closed before the allocation" : "closed: the allocation is gone"
            fail(OTError(relayedAddress == nil ? .connectionFailed : .connectionDropped, "TURN: the \(kind) connection to \(config.server) \(why)"))
        }
        relayedAddress = nil
    }

    private func request(_ purpose: Purpose, now: Instant) {
        let method: STUNMethod
        var attrs: [STUNAttribute] = []
        switch purpose {
        case .allocate:
            method = .allocate
            attrs = [.requestedTransport(17), .lifetime(UInt32(config.lifetime.microseconds / 1_000_000))]
        case .refresh(let lifetime):
            method = .refresh
            attrs = [.lifetime(lifetime)]
        case .permission(let ip):
            method = .createPermission
            attrs = [.xorPeerAddress(TransportAddress(ip: ip, port: 0))]
            pendingPermissions.insert(ip)
        case .channelBind(let number, let peer):
            method = .channelBind
            attrs = [.channelNumber(number), .xorPeerAddress(peer)]
        }
        var m = STUNMessage(method: method, messageClass: .request, transactionID: .random(using: &rng), attributes: attrs)
        var integrity: [UInt8]?
        if let realm, let nonce {
            m.attributes += [.username(config.username), .realm(realm), .nonce(nonce)]
            integrity = key
        }
        let bytes = m.encode(integrityKey: integrity, fingerprint: true)
        // Over TCP the one transmission is final: the transaction times out instead of being resent.
        let tcp = config.transport.isStream
        transactions[m.transactionID] = Transaction(purpose: purpose, bytes: bytes, transmissions: tcp ? config.maxTransmissions : 1,
                                                    rto: config.initialRTO, retransmitAt: now + (tcp ? config.tcpTransactionTimeout : config.initialRTO))
        transmits.push(bytes)
    }

    /// Installs a permission so `ip` may send to our relayed address (ICE does this for every remote candidate).
    public func createPermission(_ ip: IPAddress, now: Instant) {
        guard relayedAddress != nil, permissions[ip] == nil, !pendingPermissions.contains(ip) else { return }
        request(.permission(ip), now: now)
    }

    /// Binds a channel to `peer` (cheaper framing than Send indications); also installs its permission.
    public func bindChannel(_ peer: TransportAddress, now: Instant) {
        guard relayedAddress != nil, channels[peer] == nil, nextChannel <= 0x4FFF else { return }
        let n = nextChannel
        nextChannel += 1
        channels[peer] = (n, now + .seconds(540), false)
        peersByChannel[n] = peer
        request(.channelBind(n, peer), now: now)
    }

    /// Sends data to a peer through the relay: ChannelData when a channel is bound, else a Send indication
    /// once the peer's permission is installed (data waits for it; a channel is requested as well).
    public func send(_ data: [UInt8], to peer: TransportAddress, now: Instant) {
        guard relayedAddress != nil, !isFailed, data.count <= 65_000 else { return }
        if let c = channels[peer], c.bound {
            var w = ByteWriter(capacity: data.count + 8)
            w.u16(c.number); w.u16(UInt16(data.count)); w.append(data)
            if config.transport.isStream { w.zeros((4 - data.count % 4) % 4) }  // RFC 8656 §12.5: padded over TCP
            transmits.push(w.bytes)
            return
        }
        if permissions[peer.ip] != nil {
            let m = STUNMessage(method: .send, messageClass: .indication, transactionID: .random(using: &rng),
                                attributes: [.xorPeerAddress(peer), .data(data)])
            transmits.push(m.encode(fingerprint: false))
        } else {
            if queued.count < 64 { queued.append((peer, data)) }
            createPermission(peer.ip, now: now)
        }
        bindChannel(peer, now: now)
    }

    /// Deletes the allocation (Refresh with lifetime 0).
    public func close(now: Instant) {
        guard relayedAddress != nil else { return }
        request(.refresh(lifetime: 0), now: now)
        relayedAddress = nil
        refreshAt = nil
    }

    // MARK: input

    /// Handles a datagram (UDP) or stream bytes (TCP) from the TURN server. Returns false if it is not TURN traffic.
    @discardableResult
    public func handleReceive(_ bytes: [UInt8], now: Instant) -> Bool {
        guard config.transport.isStream else { return handleMessage(bytes, now: now) }
        streamBuffer += bytes
        var offset = 0
        while streamBuffer.count - offset >= 4 {
            let b0 = streamBuffer[offset]
            let len = Int(streamBuffer[offset + 2]) << 8 | Int(streamBuffer[offset + 3])
            let frame: Int
            if b0 >= 0x40 && b0 <= 0x4F { frame = 4 + len + (4 - len % 4) % 4 } else if b0 & 0xC0 == 0 { frame = 20 + len } else {
                fail(OTError(.connectionFailed, "TURN: unframeable byte 0x\(String(b0, radix: 16)) on the TCP stream"))
                streamBuffer = []
                return false
            }
            guard streamBuffer.count - offset >= frame else { break }
            var message = Array(streamBuffer[offset..<offset + frame])
            if b0 >= 0x40 && b0 <= 0x4F { message = Array(message.prefix(4 + len)) }
            handleMessage(message, now: now)
            offset += frame
        }
        streamBuffer.removeFirst(offset)
        return true
    }

    @discardableResult
    private func handleMessage(_ bytes: [UInt8], now: Instant) -> Bool {
        guard let first = bytes.first else { return false }
        if first >= 0x40 && first <= 0x4F {
            var r = ByteReader(bytes)
            guard let ch = try? r.u16(), let len = try? r.u16(), let payload = try? r.take(Int(len)),
                  let peer = peersByChannel[ch] else { return true }
            events.push(.data(from: peer, Array(payload)))
            return true
        }
        guard STUNMessage.isSTUN(bytes[...]), let m = try? STUNMessage.parse(bytes) else { return false }
        if m.messageClass == .indication {
            if m.method == STUNMethod.data.rawValue,
               case .xorPeerAddress(let peer)? = m.attribute(STUNAttributeType.xorPeerAddress),
               case .data(let d)? = m.attribute(STUNAttributeType.data) {
                events.push(.data(from: peer, d))
            }
            return true
        }
        guard let t = transactions[m.transactionID] else { return true }
        if m.integrityOffset != nil || realm != nil {
            guard m.messageClass == .error || m.verifyIntegrity(key: key) else { return true }
        }
        transactions[m.transactionID] = nil
        if m.messageClass == .error {
            handleError(m, t, now: now)
        } else {
            handleSuccess(m, t, now: now)
        }
        return true
    }

    private func handleError(_ m: STUNMessage, _ t: Transaction, now: Instant) {
        let code = m.errorCode?.code ?? 0
        if (code == STUNErrorCode.unauthorized || code == STUNErrorCode.staleNonce), let nonce = m.nonce, authRetries < 3 {
            authRetries += 1
            if let realm = m.realm { self.realm = realm }
            self.nonce = nonce
            key = STUNCrypto.longTermKey(username: config.username, realm: realm ?? "", password: config.password)
            if case .permission(let ip) = t.purpose { pendingPermissions.remove(ip) }
            request(t.purpose, now: now)
            return
        }
        let reason = "TURN: \(describe(t.purpose)) refused: \(code) \(m.errorCode?.reason ?? "")"
        switch t.purpose {
        case .allocate:
            fail(OTError(code == STUNErrorCode.unauthorized ? .authorizationFailure : .connectionFailed, reason))
        case .refresh:
            if relayedAddress != nil { fail(OTError(.connectionDropped, reason)) }
        case .permission(let ip):
            pendingPermissions.remove(ip)
            queued.removeAll { $0.0.ip == ip }
        case .channelBind(let n, let peer):
            channels[peer] = nil
            peersByChannel[n] = nil
        }
    }

    private func handleSuccess(_ m: STUNMessage, _ t: Transaction, now: Instant) {
        authRetries = 0
        switch t.purpose {
        case .allocate:
            guard case .xorRelayedAddress(let relayed)? = m.attribute(STUNAttributeType.xorRelayedAddress) else {
                fail(OTError(.connectionFailed, "TURN: Allocate success without XOR-RELAYED-ADDRESS"))
                return
            }
            relayedAddress = relayed
            mappedAddress = m.xorMappedAddress
            var lifetime: UInt32 = 600
            if case .lifetime(let l)? = m.attribute(STUNAttributeType.lifetime) { lifetime = l }
            refreshAt = now + .seconds(Int64(max(30, Int(lifetime) - 60)))
            events.push(.allocated(relayed: relayed, mapped: mappedAddress))
        case .refresh(let lifetime):
            if lifetime > 0 { refreshAt = now + .seconds(Int64(max(30, Int(lifetime) - 60))) }
        case .permission(let ip):
            pendingPermissions.remove(ip)
            permissions[ip] = now + .seconds(240)
            flushQueued(now: now)
        case .channelBind(let n, let peer):
            channels[peer] = (n, now + .seconds(540), true)
            permissions[peer.ip] = now + .seconds(240)
            flushQueued(now: now)
        }
    }

    private func flushQueued(now: Instant) {
        let ready = queued.filter { permissions[$0.0.ip] != nil }
        queued.removeAll { permissions[$0.0.ip] != nil }
        for (peer, data) in ready { send(data, to: peer, now: now) }
    }

    private func describe(_ p: Purpose) -> String {
        switch p {
        case .allocate: "Allocate"
        case .refresh: "Refresh"
        case .permission(let ip): "CreatePermission for \(ip)"
        case .channelBind(let n, let peer): "ChannelBind \(n) to \(peer)"
        }
    }

    private func fail(_ e: OTError) {
        guard !isFailed else { return }
        isFailed = true
        transactions = [:]
        refreshAt = nil
        events.push(.failed(e))
    }

    // MARK: timers and output

    public func handleTimeout(now: Instant) {
        for (id, t) in transactions where t.retransmitAt <= now {
            if t.transmissions >= config.maxTransmissions {
                transactions[id] = nil
                if t.purpose == .allocate { fail(OTError(.connectionTimedOut, "TURN: no answer from \(config.server)")) }
                if case .permission(let ip) = t.purpose { pendingPermissions.remove(ip) }
                continue
            }
            var u = t
            u.transmissions += 1
            u.rto = u.rto * 2
            u.retransmitAt = now + u.rto
            transactions[id] = u
            transmits.push(t.bytes)
        }
        if let at = refreshAt, at <= now {
            refreshAt = now + .seconds(60)
            request(.refresh(lifetime: UInt32(config.lifetime.microseconds / 1_000_000)), now: now)
        }
        for (ip, at) in permissions where at <= now {
            permissions[ip] = now + .seconds(240)
            request(.permission(ip), now: now)
        }
        for (peer, c) in channels where c.bound && c.refreshAt <= now {
            channels[peer] = (c.number, now + .seconds(540), true)
            request(.channelBind(c.number, peer), now: now)
        }
    }

    /// The channel number bound to `peer`, once the server confirmed it.
    public func boundChannel(to peer: TransportAddress) -> UInt16? {
        channels[peer].flatMap { $0.bound ? $0.number : nil }
    }

    /// The next datagram for the TURN server.
    public func pollTransmit() -> [UInt8]? { transmits.pop() }
    public func pollEvent() -> TURNEvent? { events.pop() }
    public func pollTimeout() -> Instant? {
        var t = transactions.values.map(\.retransmitAt).min()
        for x in [refreshAt, permissions.values.min(), channels.values.filter(\.bound).map(\.refreshAt).min()] {
            if let x { t = t.map { min($0, x) } ?? x }
        }
        return t
    }
}
