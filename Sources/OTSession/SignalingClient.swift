import OTBase
import OTWire

/// What a role lets a client do in a session.
public struct SessionCapabilities: Sendable, Equatable {
    public var canPublish: Bool
    public var canSubscribe: Bool
    public var canSignal: Bool
    public var canForceMute: Bool
    public var canForceDisconnect: Bool

    public init(role: SessionRole) {
        canPublish = role.canPublish; canSubscribe = role.canSubscribe; canSignal = role.canSignal
        canForceMute = role.canForceMute; canForceDisconnect = role.canForceDisconnect
    }
}

/// The session's connection status (as OTSessionConnectionStatus).
public enum SessionStatus: Int32, Sendable {
    case notConnected = 0, connected = 1, connecting = 2, disconnecting = 3, failed = 4
}

/// A change of a stream property.
public enum StreamPropertyChange: Sendable, Equatable {
    case hasAudio(Bool)
    case hasVideo(Bool)
    case dimensions(width: Int, height: Int)
}

/// What a force mute changed (as OTMuteForcedInfo, with the stream concerned).
public struct MuteForcedInfo: Sendable, Equatable {
    /// True when muting started (all streams or one), false when a mute all was disabled.
    public var active: Bool
    /// The one stream muted (`forceMuteStream`), or nil for the whole session (`forceMuteAll`, `disableForceMute`).
    public var streamId: String?
    /// A mute all's excluded streams (they keep their audio); empty otherwise.
    public var excludedStreamIds: [String]
    public init(active: Bool, streamId: String?, excludedStreamIds: [String] = []) {
        self.active = active; self.streamId = streamId; self.excludedStreamIds = excludedStreamIds
    }

    /// Whether this force mute mutes stream `id`: the stream itself, or a mute all that does not exclude it.
    public func mutes(streamId id: String) -> Bool {
        guard active else { return false }
        if let streamId { return streamId == id }
        return !excludedStreamIds.contains(id)
    }
}

/// Events the signaling client reports, in order.
public enum SessionEvent: Sendable, Equatable {
    case connected(ConnectionInfo)
    case disconnected
    case failed(OTError)
    case connectionCreated(ConnectionInfo)
    case connectionDestroyed(ConnectionInfo)
    case streamCreated(StreamInfo)
    case streamDestroyed(StreamInfo)
    case streamChanged(StreamInfo, StreamPropertyChange)
    case signal(type: String, data: String, from: ConnectionInfo?)
    case muteForced(MuteForcedInfo)
    /// The signaling connection dropped; the client is resuming its connection (status stays `.connected`).
    case reconnecting
    /// The connection was resumed (same connection id); roster changes follow as created/destroyed events.
    case reconnected
    /// The connection status changed (the driver reports it, as a key-value observer of `sessionConnectionStatus` would
    /// see it: before the messages of the change, e.g. `.connected` before `sessionDidConnect`).
    case statusChanged(SessionStatus)
}

/// The answer to a request.
public struct RequestReply: Sendable, Equatable {
    public var stream: StreamInfo?
    public var issueId: String?
    public init(stream: StreamInfo? = nil, issueId: String? = nil) { self.stream = stream; self.issueId = issueId }
}

/// The sans-IO client side of docs/protocol.md: messages and time in, messages and events out.
/// Owns no socket, thread or clock. Not thread-safe: its owner serialises calls.
public struct SignalingClient {
    public enum Output: Equatable {
        case send(ClientMessage)
        case event(SessionEvent)
        /// A request finished (`id` from the call that sent it).
        case completed(id: Int, Result<RequestReply, OTError>)
        /// Close the transport.
        case closeTransport
        /// Open a new transport to resume the connection, abandoning the current one (its end is not reported).
        case openTransport
        /// Abandon the current transport without reporting its end (a reconnection attempt that timed out).
        case dropTransport
        /// A media signaling message (offer, answer, candidate, close, subscriber settings) for the
        /// publisher or a subscriber.
        case media(ServerMessage)
    }

    public let apiKey: String
    public let sessionId: String
    public var eventsSuppressed: Bool
    public var connectTimeout: Duration

    public private(set) var status: SessionStatus = .notConnected
    public private(set) var connection: ConnectionInfo?
    public private(set) var role: SessionRole?
    public private(set) var resumeToken: String?
    /// Other clients' connections, by id.
    public private(set) var connections: [String: ConnectionInfo] = [:]
    /// Other clients' streams, by id.
    public private(set) var streams: [String: StreamInfo] = [:]
    /// Whether a force mute of the whole session is active.
    public private(set) var muteAllActive = false
    /// Whether the session is relayed (peer-to-peer media), as the server said on connect.
    public private(set) var relayed = false
    /// Whether the session is end-to-end encrypted, as the server said on connect.
    public private(set) var e2ee = false
    private var nextId = 1
    private var pending: Set<Int> = []
    private var connectDeadline: Instant?
    private var disconnectDeadline: Instant?
    private var token = ""

    /// Automatic reconnection: on a dropped transport, resume the connection until the server's grace period ends.
    public var reconnectEnabled = true
    /// How long one reconnection attempt (TCP, WebSocket upgrade, resume) may take.
    public var reconnectAttemptTimeout: Duration = .seconds(4)
    /// The grace period when the server does not announce one (`ServerLimits.reconnectGrace`'s default).
    public static let defaultReconnectGrace: Duration = .seconds(10)
    /// Delays before successive reconnection attempts (the last repeats).
    static let reconnectBackoff: [Duration] = [.milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)]

    private struct Reconnection {
        /// When the server's grace period ends: give up then.
        var giveUpAt: Instant
        var attempts = 0
        /// When to open the next transport (nil while an attempt runs).
        var retryAt: Instant?
        /// When the running attempt is abandoned.
        var attemptDeadline: Instant?
    }
    private var reconnection: Reconnection?
    private var reconnectGrace = SignalingClient.defaultReconnectGrace
    /// The longest grace period a server may announce (`ot-server --reconnect-grace` allows up to an hour): a longer one
    /// is cut to it, so an absurd number (up to `Int.max` milliseconds) cannot overflow a deadline.
    public static let maxReconnectGrace: Duration = .seconds(3600)

    private mutating func adoptReconnectGrace(_ info: ConnectedInfo) {
        if let g = info.reconnectGraceMillis, g > 0 { reconnectGrace = min(.milliseconds(g), Self.maxReconnectGrace) }
    }
    /// Messages produced while reconnecting, sent in order once the connection is resumed.
    private var outbox: [ClientMessage] = []
    /// A `connected` whose roster continues in `roster` messages, completed before it is handled.
    private var partialConnected: ConnectedInfo?

    /// Whether the connection is being resumed after a dropped transport (status stays `.connected`).
    public var isReconnecting: Bool { reconnection != nil }

    public init(apiKey: String, sessionId: String, eventsSuppressed: Bool = false, connectTimeout: Duration = .seconds(15)) {
        self.apiKey = apiKey; self.sessionId = sessionId; self.eventsSuppressed = eventsSuppressed; self.connectTimeout = connectTimeout
    }

    public var capabilities: SessionCapabilities? { role.map(SessionCapabilities.init) }

    /// When `tick` should next be called, if at all.
    public var nextDeadline: Instant? {
        [connectDeadline, disconnectDeadline, reconnection?.giveUpAt, reconnection?.retryAt, reconnection?.attemptDeadline]
            .compactMap { $0 }.min()
    }

    /// Starts connecting; the transport must be opened by the driver, which then calls `transportOpened`.
    public mutating func connect(token: String, now: Instant) throws {
        guard status == .notConnected || status == .failed else { throw OTError(.illegalState, "connect needs a session that is not connected") }
        guard !token.isEmpty else { throw OTError(.invalidParameter, "the token is empty") }
        self.token = token
        status = .connecting
        connection = nil; role = nil; resumeToken = nil; connections = [:]; streams = [:]; muteAllActive = false
        reconnection = nil; outbox = []
        connectDeadline = now + connectTimeout
    }

    /// The transport is open: send the connect request (a resume request when reconnecting).
    public mutating func transportOpened(now: Instant) -> [Output] {
        if reconnection != nil, status == .connected {
            guard let m = resumeRequest() else { return giveUp("no resumable connection") }
            return [.send(m)]
        }
        guard status == .connecting else { return [] }
        let id = takeId()
        return [.send(.connect(ConnectRequest(id: id, apiKey: apiKey, sessionId: sessionId, token: token, eventsSuppressed: eventsSuppressed)))]
    }

    /// A resume request for the connection kept by the server after a dropped socket (nil without one).
    public mutating func resumeRequest() -> ClientMessage? {
        guard let c = connection, let rt = resumeToken else { return nil }
        return .connect(ConnectRequest(id: takeId(), apiKey: apiKey, sessionId: sessionId, token: token, eventsSuppressed: eventsSuppressed,
                                       resumeConnectionId: c.id, resumeToken: rt))
    }

    /// Starts an orderly disconnect. Throws 1010 when not connected.
    public mutating func disconnect(now: Instant) throws -> [Output] {
        if reconnection != nil, status == .connected {
            // No server to say goodbye to: leave now (the server expires the connection after its grace period).
            reconnection = nil
            return finish()
        }
        switch status {
        case .connected:
            status = .disconnecting
            disconnectDeadline = now + .seconds(3)
            return [.send(.disconnect)]
        case .connecting:
            status = .disconnecting
            connectDeadline = nil
            return [.closeTransport]
        case .disconnecting:
            return []
        case .notConnected, .failed:
            throw OTError(.notConnected)
        }
    }

    /// Sends a request that needs the connected state; returns its id. While reconnecting it is queued and sent
    /// once the connection is resumed.
    public mutating func request(_ make: (Int) -> ClientMessage) throws -> (Int, [Output]) {
        guard status == .connected else { throw OTError(.notConnected) }
        let id = takeId()
        pending.insert(id)
        return (id, emit(make(id)))
    }

    /// Sends a message that needs no reply when connected (queued while reconnecting); nothing otherwise.
    public mutating func send(_ message: ClientMessage) -> [Output] {
        guard status == .connected else { return [] }
        return emit(message)
    }

    /// Validates and sends a signal (to all when `to` is nil). While reconnecting the signal is queued and sent
    /// after the connection is resumed, unless `retryAfterReconnect` is false: then it throws 1010.
    public mutating func signal(type: String, data: String, to: String?, retryAfterReconnect: Bool = true) throws -> (Int, [Output]) {
        guard status == .connected else { throw OTError(.notConnected) }
        try SignalRules.validate(type: type, data: data)
        guard role?.canSignal == true else { throw OTError(.forceUnpublishOrInvalidStream, "this role cannot send signals") }
        if reconnection != nil && !retryAfterReconnect {
            throw OTError(.notConnected, "the session is reconnecting and the signal asked not to be retried")
        }
        return try request { .signal(id: $0, type: type, data: data, to: to) }
    }

    private mutating func emit(_ m: ClientMessage) -> [Output] {
        if reconnection != nil { outbox.append(m); return [] }
        return [.send(m)]
    }

    /// A message from the server.
    public mutating func receive(_ msg: ServerMessage, now: Instant) -> [Output] {
        switch msg {
        case .connected(var info) where info.rosterFollows == true:
            info.rosterFollows = nil
            partialConnected = info
            return []
        case .roster(let conns, let streams, let last):
            guard var info = partialConnected else { return [] }
            info.connections += conns; info.streams += streams
            partialConnected = last ? nil : info
            return last ? receive(.connected(info), now: now) : []
        case .connected(let info) where reconnection != nil:
            return resumed(info)
        case .connected(let info):
            guard status == .connecting || status == .connected else { return [] }
            let wasConnected = status == .connected
            status = .connected
            connectDeadline = nil
            connection = info.connection; role = info.role; resumeToken = info.resumeToken; muteAllActive = info.muteForced
            relayed = info.relayed
            e2ee = info.e2ee
            adoptReconnectGrace(info)
            var out: [Output] = []
            if !wasConnected { out.append(.event(.connected(info.connection))) }
            for c in info.connections where c.id != info.connection.id && connections[c.id] == nil {
                connections[c.id] = c
                out.append(.event(.connectionCreated(c)))
            }
            for s in info.streams where s.connectionId != info.connection.id && streams[s.id] == nil {
                streams[s.id] = s
                out.append(.event(.streamCreated(s)))
            }
            return out
        case .error(let code, let message):
            // A refused resume ends the reconnection: the connection is gone.
            if reconnection != nil { return giveUp("the server refused to resume the connection (\(code): \(message))") }
            let err = OTError(OTErrorCode(rawValue: code) ?? .internalError, message)
            return fail(err)
        case .disconnected:
            return finish()
        case .reply(let id, let code, let message, let stream, let issueId):
            guard pending.remove(id) != nil else { return [] }
            if let code { return [.completed(id: id, .failure(OTError(OTErrorCode(rawValue: code) ?? .internalError, message)))] }
            return [.completed(id: id, .success(RequestReply(stream: stream, issueId: issueId)))]
        case .connectionCreated(let c):
            guard status == .connected, c.id != connection?.id, connections[c.id] == nil else { return [] }
            connections[c.id] = c
            return [.event(.connectionCreated(c))]
        case .connectionDestroyed(let id, _):
            guard let c = connections.removeValue(forKey: id) else { return [] }
            return [.event(.connectionDestroyed(c))]
        case .streamCreated(let s):
            guard status == .connected, streams[s.id] == nil else { return [] }
            streams[s.id] = s
            return [.event(.streamCreated(s))]
        case .streamDestroyed(let id, _):
            guard let s = streams.removeValue(forKey: id) else { return [] }
            return [.event(.streamDestroyed(s))]
        case .streamChanged(let s, let property):
            guard let old = streams[s.id] else { return [] }
            // Only the named property changes here: a change already reported (seen in the roster of a resumed
            // connection, then replayed by the server) is not reported twice.
            var cur = old
            let change: StreamPropertyChange
            switch property {
            case "hasAudio": cur.hasAudio = s.hasAudio; change = .hasAudio(s.hasAudio)
            case "hasVideo": cur.hasVideo = s.hasVideo; change = .hasVideo(s.hasVideo)
            case "dimensions": cur.width = s.width; cur.height = s.height; change = .dimensions(width: s.width, height: s.height)
            default: return []
            }
            guard cur != old else { return [] }
            streams[s.id] = cur
            return [.event(.streamChanged(cur, change))]
        case .signal(let type, let data, let from):
            guard status == .connected else { return [] }
            let sender: ConnectionInfo? = from.flatMap { id in id == connection?.id ? connection : connections[id] ?? ConnectionInfo(id: id, creationTime: 0, data: "") }
            return [.event(.signal(type: type, data: data, from: sender))]
        case .muteForced(let active, let streamId, let excluded):
            if streamId == nil { muteAllActive = active }
            return [.event(.muteForced(MuteForcedInfo(active: active, streamId: streamId, excludedStreamIds: excluded)))]
        case .mediaOffer, .mediaAnswer, .mediaCandidate, .mediaClose, .subscriberSettings, .mediaQuality, .publisherMedia:
            guard status == .connected else { return [] }
            return [.media(msg)]
        }
    }

    /// Drops a stream from the roster as the client's own decision (a subscription to it could not be re-established):
    /// its `streamDestroyed`, or nothing when the roster no longer has it.
    public mutating func forgetStream(_ id: String) -> [Output] {
        guard let s = streams.removeValue(forKey: id) else { return [] }
        return [.event(.streamDestroyed(s))]
    }

    /// The transport closed (error nil for an orderly close). A connected session that did not ask to leave
    /// starts reconnecting (`.reconnecting`, then `.openTransport` from `tick`).
    public mutating func transportClosed(error: OTError?, now: Instant) -> [Output] {
        partialConnected = nil
        switch status {
        case .connecting:
            return fail(error ?? OTError(.connectionFailed, "the server closed the connection"))
        case .connected where reconnection != nil:
            // An attempt failed: try again after a pause, within the grace period.
            return retryLater(now: now)
        case .connected where reconnectEnabled && resumeToken != nil:
            reconnection = Reconnection(giveUpAt: now + reconnectGrace)
            // Requests sent on the lost transport may or may not have reached the server: their outcome is unknown.
            var out = failPending(OTError(.connectionDropped, "the connection dropped before the server replied"))
            out.append(.event(.reconnecting))
            return out + retryLater(now: now)
        case .connected:
            return fail(error.map { OTError(.connectionDropped, $0.message) } ?? OTError(.connectionDropped))
        case .disconnecting:
            return finish()
        case .notConnected, .failed:
            return []
        }
    }

    /// Timeouts: connect, disconnect and the reconnection's attempts and grace period.
    public mutating func tick(now: Instant) -> [Output] {
        if var r = reconnection, status == .connected {
            if now >= r.giveUpAt { return giveUp("could not reconnect within the server's grace period") }
            if let at = r.retryAt, now >= at {
                r.retryAt = nil
                r.attempts += 1
                r.attemptDeadline = min(now + reconnectAttemptTimeout, r.giveUpAt)
                reconnection = r
                return [.openTransport]
            }
            if let d = r.attemptDeadline, now >= d {
                return [.dropTransport] + retryLater(now: now)
            }
            return []
        }
        if let d = connectDeadline, now >= d, status == .connecting {
            connectDeadline = nil
            return fail(OTError(.connectionTimedOut)) + [.closeTransport]
        }
        if let d = disconnectDeadline, now >= d, status == .disconnecting {
            disconnectDeadline = nil
            return finish() + [.closeTransport]
        }
        return []
    }

    private mutating func takeId() -> Int { defer { nextId += 1 }; return nextId }

    /// Schedules the next reconnection attempt (backoff, within the grace period).
    private mutating func retryLater(now: Instant) -> [Output] {
        guard var r = reconnection else { return [] }
        let delay = Self.reconnectBackoff[min(r.attempts, Self.reconnectBackoff.count - 1)]
        r.attemptDeadline = nil
        r.retryAt = min(now + delay, r.giveUpAt)
        reconnection = r
        return []
    }

    /// The connection could not be resumed: the session fails with 1022 (connection dropped) and disconnects.
    private mutating func giveUp(_ why: String) -> [Output] {
        reconnection = nil
        outbox = []
        return fail(OTError(.connectionDropped, why))
    }

    /// The server resumed our connection: reconcile the roster (streams and connections that came and went
    /// meanwhile) and send what was queued.
    private mutating func resumed(_ info: ConnectedInfo) -> [Output] {
        guard status == .connected, let own = connection, info.connection.id == own.id else {
            return giveUp("the server answered with another connection")
        }
        reconnection = nil
        role = info.role; resumeToken = info.resumeToken; muteAllActive = info.muteForced
        adoptReconnectGrace(info)
        var out: [Output] = [.event(.reconnected)]
        let liveStreams = Dictionary(info.streams.filter { $0.connectionId != own.id }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let liveConnections = Dictionary(info.connections.filter { $0.id != own.id }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for id in streams.keys.sorted() where liveStreams[id] == nil {
            if let s = streams.removeValue(forKey: id) { out.append(.event(.streamDestroyed(s))) }
        }
        if !eventsSuppressed {
            for id in connections.keys.sorted() where liveConnections[id] == nil {
                if let c = connections.removeValue(forKey: id) { out.append(.event(.connectionDestroyed(c))) }
            }
            for c in info.connections where c.id != own.id && connections[c.id] == nil {
                connections[c.id] = c
                out.append(.event(.connectionCreated(c)))
            }
        }
        for s in info.streams where s.connectionId != own.id {
            if let old = streams[s.id] {
                streams[s.id] = s
                for change in Self.changes(from: old, to: s) { out.append(.event(.streamChanged(s, change))) }
            } else {
                streams[s.id] = s
                out.append(.event(.streamCreated(s)))
            }
        }
        let queued = outbox
        outbox = []
        return out + queued.map { .send($0) }
    }

    /// The property changes between two versions of a stream.
    static func changes(from old: StreamInfo, to new: StreamInfo) -> [StreamPropertyChange] {
        var out: [StreamPropertyChange] = []
        if old.hasAudio != new.hasAudio { out.append(.hasAudio(new.hasAudio)) }
        if old.hasVideo != new.hasVideo { out.append(.hasVideo(new.hasVideo)) }
        if old.width != new.width || old.height != new.height { out.append(.dimensions(width: new.width, height: new.height)) }
        return out
    }

    private mutating func failPending(_ err: OTError) -> [Output] {
        let ids = pending.sorted()
        pending = []
        return ids.map { .completed(id: $0, .failure(err)) }
    }

    /// A connecting session fails (status failed); a connected one reports the error then disconnects.
    private mutating func fail(_ err: OTError) -> [Output] {
        let was = status
        connectDeadline = nil; disconnectDeadline = nil
        reconnection = nil; outbox = []
        switch was {
        case .connecting:
            status = .failed
            return [.event(.failed(err)), .closeTransport]
        case .connected, .disconnecting:
            var out = failPending(OTError(.notConnected))
            status = .notConnected
            clearRoster()
            out += [.event(.failed(err)), .event(.disconnected), .closeTransport]
            return out
        case .notConnected, .failed:
            return []
        }
    }

    private mutating func finish() -> [Output] {
        guard status == .connected || status == .disconnecting || status == .connecting else { return [] }
        connectDeadline = nil; disconnectDeadline = nil
        reconnection = nil; outbox = []
        var out = failPending(OTError(.notConnected))
        status = .notConnected
        clearRoster()
        out += [.event(.disconnected), .closeTransport]
        return out
    }

    private mutating func clearRoster() {
        connections = [:]; streams = [:]; muteAllActive = false
    }
}
