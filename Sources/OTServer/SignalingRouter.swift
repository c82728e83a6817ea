import OTBase
import OTTransport
import OTWire

/// The sans-IO heart of the server: rooms, connections, roles, streams and limits.
/// Sockets are plain integer ids; every call takes the time and returns what to send.
/// Not thread-safe: one driver thread owns it.
public final class SignalingRouter {
    /// What the driver must do.
    public enum Output: Equatable {
        /// Send one message to each listed socket.
        case send([Int], ServerMessage)
        /// Close the socket once what was queued for it is written.
        case close(Int)
        /// Routed session: hand this offer to the media router, then call `mediaAnswered`.
        case routeOffer(MediaOfferRequest)
        /// Routed session: the peer connection ended.
        case routeClose(peerId: String)
        /// Routed session: a subscriber's audio/video wishes.
        case routeSubscription(peerId: String, audio: Bool, video: Bool)
        /// Routed session: a client left.
        case routeConnectionGone(connectionId: String)
    }

    /// A peer connection the server relays signaling for.
    final class MediaPeer {
        let sessionId: String
        let offerer: String
        /// Relayed: the publishing client that answers; routed: nil (the media router answers).
        let answerer: String?
        let streamId: String
        let direction: MediaDirection
        /// Routed: the offer's request id, replied to when the router answers.
        var pendingReply: Int?
        init(sessionId: String, offerer: String, answerer: String?, streamId: String, direction: MediaDirection, pendingReply: Int?) {
            self.sessionId = sessionId; self.offerer = offerer; self.answerer = answerer; self.streamId = streamId
            self.direction = direction; self.pendingReply = pendingReply
        }
    }

    final class Member {
        var info: ConnectionInfo
        let role: SessionRole
        let resumeToken: String
        var socket: Int?
        var eventsSuppressed: Bool
        var droppedAt: Instant?
        var queued: [ServerMessage] = []
        var queuedBytes = 0
        var tokens: Double
        var lastRefill: Instant
        /// Identifies the token it connected with (a digest), for the per-token cap.
        let tokenKey: String
        init(info: ConnectionInfo, role: SessionRole, resumeToken: String, socket: Int, eventsSuppressed: Bool, tokens: Double, now: Instant,
             tokenKey: String) {
            self.info = info; self.role = role; self.resumeToken = resumeToken; self.socket = socket
            self.eventsSuppressed = eventsSuppressed; self.tokens = tokens; self.lastRefill = now; self.tokenKey = tokenKey
        }
    }

    final class Room {
        let id: SessionID
        let idString: String
        var members: [String: Member] = [:]
        /// Join order, for stable listings.
        var order: [String] = []
        var streams: [String: StreamInfo] = [:]
        var streamOrder: [String] = []
        var muteAllActive = false
        init(id: SessionID, idString: String) { self.id = id; self.idString = idString }
        func orderedMembers() -> [Member] { order.compactMap { members[$0] } }
        func orderedStreams() -> [StreamInfo] { streamOrder.compactMap { streams[$0] } }
    }

    public private(set) var projects: [String: Project] = [:]
    public var limits: ServerLimits
    /// The longest refusal a relayed publisher's `mediaClose` carries to the subscriber, in UTF-8 bytes.
    static let maxRefusalBytes = 500
    private var rooms: [String: Room] = [:]
    /// socket → (session, connection)
    private var sockets: [Int: (String, String)] = [:]
    /// The latest reports from `reportIssue` (at most `limits.maxIssueReports`).
    public var issues: [IssueReport] { Array(issueRing.elements) }
    private var issueRing = FIFO<IssueReport>()
    /// Open peer connections by peer id.
    private var peers: [String: MediaPeer] = [:]
    /// Connections (live or resumable) per token digest.
    private var tokenUse: [String: Int] = [:]
    /// The ICE servers each `connected` carries, for a connection id at a time (ms since 1970); nil: none.
    public var iceServers: ((_ connectionId: String, _ nowMillis: Int64) -> [ICEServerInfo])?

    public init(projects: [Project], limits: ServerLimits = ServerLimits()) {
        for p in projects { self.projects[p.apiKey] = p }
        self.limits = limits
    }

    public func addProject(_ p: Project) { projects[p.apiKey] = p }

    // MARK: sessions

    /// Creates a session of a known project and returns its id. Throws 1011 for an unknown key, or for `e2ee` with
    /// `relayed` (end-to-end encryption needs the media router).
    public func createSession(apiKey: String, relayed: Bool = false, e2ee: Bool = false, location: String = "", nowMillis: Int64) throws -> String {
        guard projects[apiKey] != nil else { throw OTError(.invalidParameter, "unknown api key \(apiKey)") }
        guard !(e2ee && relayed) else { throw OTError(.invalidParameter, "end-to-end encryption needs a routed session") }
        let sid = SessionID(apiKey: apiKey, location: location, createTimeMillis: nowMillis, relayed: relayed, e2ee: e2ee)
        let s = sid.string
        rooms[s] = Room(id: sid, idString: s)
        return s
    }

    /// Connections currently in a session (including dropped ones within their grace period).
    public func connections(in sessionId: String) -> [ConnectionInfo] { rooms[sessionId]?.orderedMembers().map(\.info) ?? [] }

    /// Streams currently published in a session.
    public func streams(in sessionId: String) -> [StreamInfo] { rooms[sessionId]?.orderedStreams() ?? [] }

    public func sessionExists(_ sessionId: String) -> Bool { rooms[sessionId] != nil }

    /// Whether the session's force mute all is active.
    public func muteAllActive(in sessionId: String) -> Bool { rooms[sessionId]?.muteAllActive ?? false }

    public func project(forSession sessionId: String) -> Project? { rooms[sessionId].flatMap { projects[$0.id.apiKey] } }

    // MARK: sockets

    /// A message arrived from a socket.
    public func receive(socket: Int, _ msg: ClientMessage, now: Instant, nowMillis: Int64) -> [Output] {
        switch msg {
        case .connect(let req): return connect(socket: socket, req, now: now, nowMillis: nowMillis)
        case .ping(let id): return [.send([socket], .reply(id: id, code: nil, message: nil, stream: nil, issueId: nil))]
        default: break
        }
        guard let (sid, cid) = sockets[socket], let room = rooms[sid], let m = room.members[cid] else {
            return [.send([socket], .error(code: OTErrorCode.notConnected.rawValue, message: "send connect first")), .close(socket)]
        }
        var out: [Output] = []
        func reply(_ id: Int, _ err: OTError? = nil, stream: StreamInfo? = nil, issueId: String? = nil) {
            out.append(.send([socket], .reply(id: id, code: err?.code.rawValue, message: err?.message, stream: stream, issueId: issueId)))
        }
        switch msg {
        case .connect, .ping: break
        case .disconnect:
            sockets[socket] = nil
            m.socket = nil
            out += remove(room, m, reason: "clientDisconnected")
            out.append(.close(socket))
        case .signal(let id, let type, let data, let to):
            guard m.role.canSignal else { reply(id, OTError(.forceUnpublishOrInvalidStream, "role \(m.role.rawValue) cannot signal")); break }
            do { try SignalRules.validate(type: type, data: data) } catch let e as OTError { reply(id, SignalingError.badSignal(e).otError); break } catch { break }
            refill(m, now)
            guard m.tokens >= 1 else { reply(id, OTError(.illegalState, "signal rate limit exceeded")); break }
            m.tokens -= 1
            if let to {
                guard let target = room.members[to] else { reply(id, SignalingError.connectionNotFound(to).otError); break }
                out += deliver([target], .signal(type: type, data: data, from: m.info.id))
            } else {
                out += deliver(room.orderedMembers(), .signal(type: type, data: data, from: m.info.id))
            }
            reply(id)
        case .publish(let id, let p):
            guard m.role.canPublish else { reply(id, OTError(.unableToPublish, "role \(m.role.rawValue) cannot publish")); break }
            guard p.name.utf8.count <= limits.maxStreamNameBytes, ["camera", "screen", "custom"].contains(p.videoType),
                  (0...limits.maxVideoDimension).contains(p.width), (0...limits.maxVideoDimension).contains(p.height) else {
                reply(id, OTError(.invalidParameter, "bad stream properties (name at most \(limits.maxStreamNameBytes) UTF-8 bytes, "
                                  + "videoType camera, screen or custom, dimensions 0 to \(limits.maxVideoDimension))")); break
            }
            guard room.streams.count < limits.maxStreamsPerSession else {
                reply(id, OTError(.streamLimitExceeded, "the session has \(limits.maxStreamsPerSession) streams")); break
            }
            guard room.streams.values.lazy.filter({ $0.connectionId == m.info.id }).count < limits.maxStreamsPerConnection else {
                reply(id, OTError(.streamLimitExceeded, "at most \(limits.maxStreamsPerConnection) streams per connection")); break
            }
            let stream = StreamInfo(id: Self.uuid(), connectionId: m.info.id, name: p.name,
                                    hasAudio: p.hasAudio && !room.muteAllActive, hasVideo: p.hasVideo, videoType: p.videoType,
                                    width: p.width, height: p.height, creationTime: nowMillis, audioFallbackEnabled: p.audioFallbackEnabled,
                                    connection: m.info)
            room.streams[stream.id] = stream
            room.streamOrder.append(stream.id)
            reply(id, stream: stream)
            out += deliver(room.orderedMembers().filter { $0 !== m }, .streamCreated(stream))
        case .unpublish(let id, let streamId):
            guard let s = room.streams[streamId], s.connectionId == m.info.id else {
                reply(id, OTError(.forceUnpublishOrInvalidStream, "no stream \(streamId) of this connection")); break
            }
            reply(id)
            out += removeStream(room, s.id, reason: "clientUnpublished")
        case .updateStream(let id, let streamId, let a, let v, let w, let h):
            guard var s = room.streams[streamId], s.connectionId == m.info.id else {
                reply(id, OTError(.forceUnpublishOrInvalidStream, "no stream \(streamId) of this connection")); break
            }
            var changed: [String] = []
            if let a, a != s.hasAudio { s.hasAudio = a; changed.append("hasAudio") }
            if let v, v != s.hasVideo { s.hasVideo = v; changed.append("hasVideo") }
            let dims = 0...limits.maxVideoDimension
            if let w, let h, dims.contains(w), dims.contains(h), w != s.width || h != s.height { s.width = w; s.height = h; changed.append("dimensions") }
            room.streams[streamId] = s
            reply(id, stream: s)
            for p in changed { out += deliver(room.orderedMembers().filter { $0 !== m }, .streamChanged(s, property: p)) }
        case .subscribe(let id, let streamId):
            guard m.role.canSubscribe else { reply(id, OTError(.forceUnpublishOrInvalidStream, "role \(m.role.rawValue) cannot subscribe")); break }
            guard let s = room.streams[streamId] else { reply(id, SignalingError.streamNotFound(streamId).otError); break }
            reply(id, stream: s)
        case .forceMuteStream(let id, let streamId):
            guard m.role.canForceMute else { reply(id, OTError(.forceUnpublishOrInvalidStream, "only a moderator can force mute")); break }
            guard room.streams[streamId] != nil else { reply(id, SignalingError.streamNotFound(streamId).otError); break }
            reply(id)
            out += muteStream(room, streamId)
        case .forceMuteAll(let id, let active, let excluded):
            guard m.role.canForceMute else { reply(id, OTError(.forceUnpublishOrInvalidStream, "only a moderator can force mute")); break }
            reply(id)
            out += muteAll(room, active: active, excluded: excluded)
        case .forceDisconnect(let id, let target):
            guard m.role.canForceDisconnect else { reply(id, OTError(.unableToForceDisconnect, "only a moderator can force disconnect")); break }
            guard let victim = room.members[target] else { reply(id, OTError(.unableToForceDisconnect, "no connection \(target) in this session")); break }
            reply(id)
            out += forceDisconnect(room, victim)
        case .reportIssue(let id, let suggested, let description):
            let ok = (8...64).contains(suggested.utf8.count) && suggested.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D
            }
            let issueId = ok ? suggested : Self.uuid()
            let report = IssueReport(issueId: issueId, sessionId: sid, connectionId: cid,
                                     description: Self.prefix(description, utf8Bytes: limits.maxIssueDescriptionBytes), timeMillis: nowMillis)
            issueRing.push(report)
            while issueRing.count > max(0, limits.maxIssueReports) { _ = issueRing.pop() }
            Log.info("server", "issue \(issueId) reported by \(cid) in \(sid): \(Log.escaped(report.description, max: 1000))")
            reply(id, issueId: issueId)
        case .mediaOffer(let id, let peerId, let streamId, let direction, let sdp):
            switch checkOffer(room, m, peerId: peerId, streamId: streamId, direction: direction) {
            case .failure(let e): reply(id, e)
            case .success(let stream):
                if room.id.relayed {
                    guard let owner = room.members[stream.connectionId] else { reply(id, OTError(.serverCannotFindStream)); break }
                    peers[peerId] = MediaPeer(sessionId: sid, offerer: m.info.id, answerer: owner.info.id, streamId: streamId,
                                              direction: direction, pendingReply: nil)
                    out += deliver([owner], .mediaOffer(peerId: peerId, streamId: streamId, direction: direction, sdp: sdp, from: m.info.id))
                    reply(id)
                } else {
                    peers[peerId] = MediaPeer(sessionId: sid, offerer: m.info.id, answerer: nil, streamId: streamId,
                                              direction: direction, pendingReply: id)
                    out.append(.routeOffer(MediaOfferRequest(sessionId: sid, connectionId: m.info.id, peerId: peerId, streamId: streamId,
                                                             direction: direction, sdp: sdp, audioFallbackEnabled: stream.audioFallbackEnabled)))
                }
            }
        case .mediaAnswer(let peerId, let sdp):
            guard let p = peers[peerId], p.sessionId == sid, p.answerer == m.info.id, let offerer = room.members[p.offerer] else { break }
            out += deliver([offerer], .mediaAnswer(peerId: peerId, sdp: sdp))
        case .mediaCandidate(let peerId, let candidate, let mid, let index):
            guard let p = peers[peerId], p.sessionId == sid, let answerer = p.answerer else { break }
            let other = p.offerer == m.info.id ? answerer : (answerer == m.info.id ? p.offerer : nil)
            if let other, let target = room.members[other] {
                out += deliver([target], .mediaCandidate(peerId: peerId, candidate: candidate, sdpMid: mid, sdpMLineIndex: index))
            }
        case .mediaClose(let peerId, let refusal):
            guard let p = peers[peerId], p.sessionId == sid, p.offerer == m.info.id || p.answerer == m.info.id else { break }
            // Only the answerer (a relayed publisher) refuses an offer; its reason reaches the subscriber, cut short.
            if let refusal, p.answerer == m.info.id {
                out += closePeer(room, peerId, reason: "refused", message: String(decoding: refusal.utf8.prefix(Self.maxRefusalBytes), as: UTF8.self),
                                 notify: p.offerer)
            } else {
                out += closePeer(room, peerId, reason: "closed", notify: p.offerer == m.info.id ? p.answerer : p.offerer)
            }
        case .subscriberSettings(let peerId, let audio, let video):
            guard let p = peers[peerId], p.sessionId == sid, p.offerer == m.info.id, p.direction == .subscribe else { break }
            if let answerer = p.answerer {
                if let target = room.members[answerer] { out += deliver([target], .subscriberSettings(peerId: peerId, audio: audio, video: video)) }
            } else {
                out.append(.routeSubscription(peerId: peerId, audio: audio, video: video))
            }
        }
        return out
    }

    /// The media router answered an offer (or failed it): the offerer gets `reply` then `mediaAnswer`,
    /// or a `reply` with the error code.
    public func mediaAnswered(peerId: String, _ result: Result<String, OTError>) -> [Output] {
        guard let p = peers[peerId], let room = rooms[p.sessionId], let offerer = room.members[p.offerer] else { return [] }
        let id = p.pendingReply ?? 0
        p.pendingReply = nil
        switch result {
        case .success(let sdp):
            return deliver([offerer], .reply(id: id, code: nil, message: nil, stream: nil, issueId: nil))
                + deliver([offerer], .mediaAnswer(peerId: peerId, sdp: sdp))
        case .failure(let e):
            peers[peerId] = nil
            return deliver([offerer], .reply(id: id, code: e.code.rawValue, message: e.message, stream: nil, issueId: nil))
        }
    }

    /// The media router's audio-fallback decision for a routed subscriber's peer connection: told to its offerer.
    public func mediaQuality(peerId: String, event: MediaQualityEvent) -> [Output] {
        guard let p = peers[peerId], p.answerer == nil, p.direction == .subscribe, let room = rooms[p.sessionId],
              let offerer = room.members[p.offerer] else { return [] }
        return deliver([offerer], .mediaQuality(peerId: peerId, event: event))
    }

    /// The media router's word that a routed stream's publisher lost (`up` false) or regained its media connection:
    /// told to each subscriber's peer connection of the stream (`publisherMedia`). Nothing once the stream is gone.
    public func publisherMedia(streamId: String, up: Bool) -> [Output] {
        var out: [Output] = []
        for (peerId, p) in peers.sorted(by: { $0.key < $1.key })
        where p.streamId == streamId && p.direction == .subscribe && p.answerer == nil {
            guard let room = rooms[p.sessionId], room.streams[streamId] != nil, let offerer = room.members[p.offerer] else { continue }
            out += deliver([offerer], .publisherMedia(peerId: peerId, state: up ? .resumed : .interrupted))
        }
        return out
    }

    /// Open peer connections (relayed and routed).
    public var mediaPeerCount: Int { peers.count }

    private func checkOffer(_ room: Room, _ m: Member, peerId: String, streamId: String, direction: MediaDirection) -> Result<StreamInfo, OTError> {
        // No control characters: peer ids reach the logs (the media router's).
        guard !peerId.isEmpty, peerId.utf8.count <= 128, !peerId.unicodeScalars.contains(where: { $0.properties.generalCategory == .control
                || $0.properties.generalCategory == .lineSeparator || $0.properties.generalCategory == .paragraphSeparator }) else {
            return .failure(OTError(.invalidParameter, "peerId must be 1–128 bytes without control characters"))
        }
        guard peers[peerId] == nil else { return .failure(OTError(.invalidParameter, "peer \(peerId) already exists")) }
        let cid = m.info.id
        guard peers.values.lazy.filter({ $0.offerer == cid }).count < limits.maxMediaPeersPerConnection else {
            return .failure(OTError(.streamLimitExceeded, "at most \(limits.maxMediaPeersPerConnection) peer connections per client"))
        }
        switch direction {
        case .subscribe:
            guard m.role.canSubscribe else { return .failure(OTError(.forceUnpublishOrInvalidStream, "role \(m.role.rawValue) cannot subscribe")) }
            guard let s = room.streams[streamId] else { return .failure(SignalingError.streamNotFound(streamId).otError) }
            return .success(s)
        case .publish:
            guard m.role.canPublish else { return .failure(OTError(.unableToPublish, "role \(m.role.rawValue) cannot publish")) }
            guard let s = room.streams[streamId], s.connectionId == m.info.id else {
                return .failure(OTError(.forceUnpublishOrInvalidStream, "no stream \(streamId) of this connection"))
            }
            guard !room.id.relayed else {
                return .failure(OTError(.invalidParameter, "relayed sessions have no media router: subscribers offer to the publisher"))
            }
            return .success(s)
        }
    }

    /// Forgets a peer; tells the other side (`notify`, a connection id) and, in routed sessions, the router.
    private func closePeer(_ room: Room, _ peerId: String, reason: String, message: String? = nil, notify: String?) -> [Output] {
        guard let p = peers.removeValue(forKey: peerId) else { return [] }
        var out: [Output] = []
        if let notify, let target = room.members[notify] { out += deliver([target], .mediaClose(peerId: peerId, reason: reason, message: message)) }
        if p.answerer == nil { out.append(.routeClose(peerId: peerId)) }
        return out
    }

    /// The socket closed: an orderly close after `disconnect` is already handled; otherwise the
    /// connection stays resumable for `limits.reconnectGrace`.
    public func socketClosed(_ socket: Int, now: Instant) -> [Output] {
        guard let (sid, cid) = sockets.removeValue(forKey: socket), let room = rooms[sid], let m = room.members[cid], m.socket == socket else { return [] }
        m.socket = nil
        m.droppedAt = now
        return []
    }

    /// Expires dropped connections whose grace period is over.
    public func tick(now: Instant) -> [Output] {
        var out: [Output] = []
        for room in rooms.values {
            for m in room.orderedMembers() where m.socket == nil {
                if let d = m.droppedAt, now - d >= limits.reconnectGrace { out += remove(room, m, reason: "networkDisconnected") }
            }
        }
        return out
    }

    // MARK: server operations (the backend's calls: the REST API and the server SDKs)

    /// A signal from the server (no sender connection), to all or to one connection.
    public func signalFromServer(sessionId: String, connectionId: String?, type: String, data: String) throws(SignalingError) -> [Output] {
        let room = try room(sessionId)
        do { try SignalRules.validate(type: type, data: data) } catch let e as OTError { throw .badSignal(e) } catch { throw .badSignal(OTError(.invalidParameter)) }
        if let connectionId {
            guard let target = room.members[connectionId] else { throw .connectionNotFound(connectionId) }
            return deliver([target], .signal(type: type, data: data, from: nil))
        }
        return deliver(room.orderedMembers(), .signal(type: type, data: data, from: nil))
    }

    public func forceDisconnect(sessionId: String, connectionId: String) throws(SignalingError) -> [Output] {
        let room = try room(sessionId)
        guard let victim = room.members[connectionId] else { throw .connectionNotFound(connectionId) }
        return forceDisconnect(room, victim)
    }

    public func forceMuteStream(sessionId: String, streamId: String) throws(SignalingError) -> [Output] {
        let room = try room(sessionId)
        guard room.streams[streamId] != nil else { throw .streamNotFound(streamId) }
        return muteStream(room, streamId)
    }

    public func forceMuteAll(sessionId: String, active: Bool, excluded: [String]) throws(SignalingError) -> [Output] {
        muteAll(try room(sessionId), active: active, excluded: excluded)
    }

    public func stream(sessionId: String, streamId: String) throws(SignalingError) -> StreamInfo {
        guard let s = try room(sessionId).streams[streamId] else { throw .streamNotFound(streamId) }
        return s
    }

    /// Streams of a session, in publishing order.
    public func listStreams(sessionId: String) throws(SignalingError) -> [StreamInfo] { try room(sessionId).orderedStreams() }

    /// Sets layout class lists; every id must exist (else `.invalidArgument` and nothing changes).
    public func setLayoutClassLists(sessionId: String, _ items: [(String, [String])]) throws(SignalingError) {
        let room = try room(sessionId)
        for (id, _) in items where room.streams[id] == nil { throw .invalidArgument("stream \(id) not found") }
        for (id, classes) in items { room.streams[id]?.layoutClassList = classes }
    }

    private func room(_ sessionId: String) throws(SignalingError) -> Room {
        guard let room = rooms[sessionId] else { throw .sessionNotFound(sessionId) }
        return room
    }

    // MARK: internals

    private func connect(socket: Int, _ req: ConnectRequest, now: Instant, nowMillis: Int64) -> [Output] {
        func refuse(_ e: OTError) -> [Output] { [.send([socket], .error(code: e.code.rawValue, message: e.message)), .close(socket)] }
        guard sockets[socket] == nil else { return refuse(OTError(.illegalState, "already connected on this socket")) }
        let sid: SessionID
        do { sid = try SessionID.parse(req.sessionId) } catch let e as OTError { return refuse(e) } catch { return refuse(OTError(.invalidSession)) }
        guard let room = rooms[req.sessionId], let project = projects[sid.apiKey] else {
            return refuse(OTError(.invalidSession, "unknown session \(req.sessionId)"))
        }
        guard req.apiKey == sid.apiKey else { return refuse(OTError(.authorizationFailure, "api key does not match the session")) }
        let token: ClientToken
        do {
            token = try ClientToken.verify(req.token, apiKey: project.apiKey, secret: project.secret, now: nowMillis / 1000)
        } catch let e as OTError { return refuse(e) } catch { return refuse(OTError(.authorizationFailure)) }
        guard token.sessionId == req.sessionId else { return refuse(OTError(.authorizationFailure, "token refused: it is for another session")) }

        // Resume a dropped connection?
        if let rid = req.resumeConnectionId {
            guard let m = room.members[rid], let rt = req.resumeToken, TokenCrypto.equal(Array(rt.utf8), Array(m.resumeToken.utf8)) else {
                return refuse(OTError(.connectionDropped, "connection \(rid) cannot be resumed"))
            }
            var out: [Output] = []
            if let old = m.socket { sockets[old] = nil; out.append(.close(old)) }
            m.socket = socket; m.droppedAt = nil
            sockets[socket] = (req.sessionId, m.info.id)
            let others = m.eventsSuppressed ? [] : room.orderedMembers().filter { $0 !== m }.map(\.info)
            out.append(.send([socket], .connected(ConnectedInfo(id: req.id, connection: m.info, role: m.role, resumeToken: m.resumeToken,
                connections: others, streams: room.orderedStreams().filter { $0.connectionId != m.info.id },
                muteForced: room.muteAllActive, resumed: true, relayed: room.id.relayed, e2ee: room.id.e2ee,
                reconnectGraceMillis: Int(limits.reconnectGrace.microseconds / 1000), iceServers: iceServers?(m.info.id, nowMillis)))))
            let q = m.queued; m.queued = []; m.queuedBytes = 0
            for msg in q { out.append(.send([socket], msg)) }
            return out
        }
        guard room.members.count < limits.maxConnectionsPerSession else {
            return refuse(OTError(.connectionLimitExceeded, "the session has \(limits.maxConnectionsPerSession) connections"))
        }
        let tokenKey = TokenCrypto.hex(TokenCrypto.sha1(Array(req.token.utf8)))
        guard limits.maxConnectionsPerToken <= 0 || tokenUse[tokenKey, default: 0] < limits.maxConnectionsPerToken else {
            return refuse(OTError(.connectionLimitExceeded, "this token already has \(limits.maxConnectionsPerToken) connections"))
        }
        var cid = ""
        repeat { cid = Self.uuid() } while room.members[cid] != nil
        let info = ConnectionInfo(id: cid, creationTime: nowMillis, data: token.connectionData ?? "")
        let m = Member(info: info, role: token.role, resumeToken: TokenCrypto.hex(TokenCrypto.randomBytes(16)), socket: socket,
                       eventsSuppressed: req.eventsSuppressed, tokens: limits.signalBurst, now: now, tokenKey: tokenKey)
        tokenUse[tokenKey, default: 0] += 1
        let others = room.orderedMembers()
        room.members[cid] = m
        room.order.append(cid)
        sockets[socket] = (req.sessionId, cid)
        var out: [Output] = [.send([socket], .connected(ConnectedInfo(id: req.id, connection: info, role: token.role, resumeToken: m.resumeToken,
            connections: req.eventsSuppressed ? [] : others.map(\.info), streams: room.orderedStreams(),
            muteForced: room.muteAllActive, resumed: false, relayed: room.id.relayed, e2ee: room.id.e2ee,
            reconnectGraceMillis: Int(limits.reconnectGrace.microseconds / 1000), iceServers: iceServers?(cid, nowMillis))))]
        out += deliver(others.filter { !$0.eventsSuppressed }, .connectionCreated(info))
        return out
    }

    /// Sends to live members; queues for dropped ones within grace (up to `maxQueuedWhileDropped` messages and
    /// `maxQueuedBytesWhileDropped` bytes each).
    private func deliver(_ members: [Member], _ msg: ServerMessage) -> [Output] {
        var targets: [Int] = []
        targets.reserveCapacity(members.count)
        var size: Int?
        for m in members {
            if let s = m.socket { targets.append(s); continue }
            guard m.queued.count < limits.maxQueuedWhileDropped else { continue }
            let n = size ?? SignalingCodec.encode(msg).utf8.count
            size = n
            guard m.queuedBytes + n <= limits.maxQueuedBytesWhileDropped else { continue }
            m.queued.append(msg); m.queuedBytes += n
        }
        return targets.isEmpty ? [] : [.send(targets, msg)]
    }

    private func remove(_ room: Room, _ m: Member, reason: String) -> [Output] {
        var out: [Output] = []
        for s in room.orderedStreams() where s.connectionId == m.info.id { out += removeStream(room, s.id, reason: reason) }
        let cid = m.info.id
        for (peerId, p) in peers where p.sessionId == room.idString && (p.offerer == cid || p.answerer == cid) {
            out += closePeer(room, peerId, reason: "connectionGone", notify: p.offerer == cid ? p.answerer : p.offerer)
        }
        if !room.id.relayed { out.append(.routeConnectionGone(connectionId: cid)) }
        room.members[m.info.id] = nil
        room.order.removeAll { $0 == m.info.id }
        if let n = tokenUse[m.tokenKey] { tokenUse[m.tokenKey] = n > 1 ? n - 1 : nil }
        if let s = m.socket { sockets[s] = nil }
        out += deliver(room.orderedMembers().filter { !$0.eventsSuppressed }, .connectionDestroyed(connectionId: m.info.id, reason: reason))
        return out
    }

    private func removeStream(_ room: Room, _ streamId: String, reason: String) -> [Output] {
        guard let s = room.streams.removeValue(forKey: streamId) else { return [] }
        room.streamOrder.removeAll { $0 == streamId }
        var out: [Output] = []
        for (peerId, p) in peers where p.sessionId == room.idString && p.streamId == streamId {
            out += closePeer(room, peerId, reason: "streamDestroyed", notify: p.offerer == s.connectionId ? p.answerer : p.offerer)
        }
        return out + deliver(room.orderedMembers().filter { $0.info.id != s.connectionId }, .streamDestroyed(streamId: streamId, reason: reason))
    }

    private func muteStream(_ room: Room, _ streamId: String) -> [Output] {
        guard var s = room.streams[streamId] else { return [] }
        var out: [Output] = []
        if s.hasAudio {
            s.hasAudio = false
            room.streams[streamId] = s
            out += deliver(room.orderedMembers().filter { $0.info.id != s.connectionId }, .streamChanged(s, property: "hasAudio"))
        }
        out += deliver(room.orderedMembers(), .muteForced(active: true, streamId: streamId, excludedStreamIds: []))
        return out
    }

    private func muteAll(_ room: Room, active: Bool, excluded: [String]) -> [Output] {
        room.muteAllActive = active
        var out: [Output] = []
        if active {
            let skip = Set(excluded)
            for id in room.streamOrder where !skip.contains(id) {
                guard var s = room.streams[id], s.hasAudio else { continue }
                s.hasAudio = false
                room.streams[id] = s
                out += deliver(room.orderedMembers().filter { $0.info.id != s.connectionId }, .streamChanged(s, property: "hasAudio"))
            }
        }
        out += deliver(room.orderedMembers(), .muteForced(active: active, streamId: nil, excludedStreamIds: active ? excluded : []))
        return out
    }

    private func forceDisconnect(_ room: Room, _ victim: Member) -> [Output] {
        var out: [Output] = []
        if let s = victim.socket {
            out.append(.send([s], .disconnected(reason: "forceDisconnected")))
            out.append(.close(s))
        }
        out += remove(room, victim, reason: "forceDisconnected")
        return out
    }

    private func refill(_ m: Member, _ now: Instant) {
        let dt = (now - m.lastRefill).seconds
        if dt > 0 { m.tokens = min(limits.signalBurst, m.tokens + dt * limits.signalsPerSecond); m.lastRefill = now }
    }

    /// The longest prefix of `s` within `utf8Bytes` bytes, cut at a character boundary.
    static func prefix(_ s: String, utf8Bytes: Int) -> String {
        guard s.utf8.count > utf8Bytes else { return s }
        let u = Array(s.utf8.prefix(max(0, utf8Bytes) + 1))
        var n = max(0, utf8Bytes)
        while n > 0 && u[n] & 0xC0 == 0x80 { n -= 1 }
        return String(decoding: u[..<n], as: UTF8.self)
    }

    static func uuid() -> String {
        let c = Array(TokenCrypto.hex(TokenCrypto.randomBytes(16)))
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }
}
