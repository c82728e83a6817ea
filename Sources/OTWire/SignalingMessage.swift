import Dispatch
import FoundationEssentials
import OTBase

/// A client connection as every participant sees it.
public struct ConnectionInfo: Codable, Sendable, Equatable, Hashable {
    public var id: String
    /// Milliseconds since 1970.
    public var creationTime: Int64
    /// The token's connection data ("" when none).
    public var data: String
    public init(id: String, creationTime: Int64, data: String) { self.id = id; self.creationTime = creationTime; self.data = data }
}

/// A published stream's properties.
public struct StreamInfo: Codable, Sendable, Equatable, Hashable {
    public var id: String
    public var connectionId: String
    public var name: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    /// "camera", "screen" or "custom".
    public var videoType: String
    public var width: Int
    public var height: Int
    /// Milliseconds since 1970.
    public var creationTime: Int64
    public var layoutClassList: [String]
    /// Whether the stream's video may be dropped for quality (the publisher's `audioFallbackEnabled`);
    /// absent on the wire means true.
    public var audioFallbackEnabled: Bool
    /// The publishing connection with its data and creation time (as OTStream's `connection`), so a client reaches a
    /// stream's owner even when connection events are suppressed. Absent on the wire: the id only (no data, time 0).
    public var connection: ConnectionInfo

    public init(id: String, connectionId: String, name: String, hasAudio: Bool, hasVideo: Bool, videoType: String,
                width: Int, height: Int, creationTime: Int64, layoutClassList: [String] = [], audioFallbackEnabled: Bool = true,
                connection: ConnectionInfo? = nil) {
        self.id = id; self.connectionId = connectionId; self.name = name; self.hasAudio = hasAudio; self.hasVideo = hasVideo
        self.videoType = videoType; self.width = width; self.height = height; self.creationTime = creationTime
        self.layoutClassList = layoutClassList; self.audioFallbackEnabled = audioFallbackEnabled
        self.connection = connection ?? ConnectionInfo(id: connectionId, creationTime: 0, data: "")
    }

    private enum CodingKeys: String, CodingKey {
        case id, connectionId, name, hasAudio, hasVideo, videoType, width, height, creationTime, layoutClassList, audioFallbackEnabled
        case connection
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.decode(String.self, forKey: .id), connectionId: try c.decode(String.self, forKey: .connectionId),
                  name: try c.decode(String.self, forKey: .name), hasAudio: try c.decode(Bool.self, forKey: .hasAudio),
                  hasVideo: try c.decode(Bool.self, forKey: .hasVideo), videoType: try c.decode(String.self, forKey: .videoType),
                  width: try c.decode(Int.self, forKey: .width), height: try c.decode(Int.self, forKey: .height),
                  creationTime: try c.decode(Int64.self, forKey: .creationTime),
                  layoutClassList: try c.decode([String].self, forKey: .layoutClassList),
                  audioFallbackEnabled: try c.decodeIfPresent(Bool.self, forKey: .audioFallbackEnabled) ?? true,
                  connection: try c.decodeIfPresent(ConnectionInfo.self, forKey: .connection))
        // A connection that names another id than the stream's is not the stream's connection.
        if connection.id != connectionId { connection = ConnectionInfo(id: connectionId, creationTime: 0, data: "") }
    }
}

/// What a client asks for when publishing (the server fills in id, connection and time).
public struct PublishRequest: Codable, Sendable, Equatable {
    public var name: String
    public var hasAudio: Bool
    public var hasVideo: Bool
    public var videoType: String
    public var width: Int
    public var height: Int
    /// Whether video may be dropped for quality (absent on the wire means true).
    public var audioFallbackEnabled: Bool
    public init(name: String = "", hasAudio: Bool = true, hasVideo: Bool = true, videoType: String = "camera", width: Int = 640, height: Int = 480,
                audioFallbackEnabled: Bool = true) {
        self.name = name; self.hasAudio = hasAudio; self.hasVideo = hasVideo; self.videoType = videoType; self.width = width; self.height = height
        self.audioFallbackEnabled = audioFallbackEnabled
    }

    private enum CodingKeys: String, CodingKey { case name, hasAudio, hasVideo, videoType, width, height, audioFallbackEnabled }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(name: try c.decode(String.self, forKey: .name), hasAudio: try c.decode(Bool.self, forKey: .hasAudio),
                  hasVideo: try c.decode(Bool.self, forKey: .hasVideo), videoType: try c.decode(String.self, forKey: .videoType),
                  width: try c.decode(Int.self, forKey: .width), height: try c.decode(Int.self, forKey: .height),
                  audioFallbackEnabled: try c.decodeIfPresent(Bool.self, forKey: .audioFallbackEnabled) ?? true)
    }
}

/// What the media router tells a subscriber of a routed session about its audio fallback.
public enum MediaQualityEvent: String, Codable, Sendable, Equatable {
    /// The downlink is poor: video may be dropped soon.
    case videoDisableWarning
    /// Conditions recovered before video was dropped.
    case videoDisableWarningLifted
    /// The router stopped forwarding video to this subscriber (audio continues).
    case videoDisabled
    /// The router forwards video again.
    case videoEnabled
}

/// What the server tells a routed subscriber about its stream's publisher: the publisher's media connection to the
/// router dropped (`interrupted`: nothing to forward until it republishes) or is back (`resumed`).
public enum PublisherMediaState: String, Codable, Sendable, Equatable {
    case interrupted
    case resumed
}

/// The `connect` request: first message on a new socket.
public struct ConnectRequest: Codable, Sendable, Equatable {
    public var id: Int
    public var apiKey: String
    public var sessionId: String
    public var token: String
    /// Skip connectionCreated/Destroyed events for this client.
    public var eventsSuppressed: Bool
    /// Resume a connection kept after a dropped socket.
    public var resumeConnectionId: String?
    public var resumeToken: String?
    public init(id: Int, apiKey: String, sessionId: String, token: String, eventsSuppressed: Bool = false,
                resumeConnectionId: String? = nil, resumeToken: String? = nil) {
        self.id = id; self.apiKey = apiKey; self.sessionId = sessionId; self.token = token; self.eventsSuppressed = eventsSuppressed
        self.resumeConnectionId = resumeConnectionId; self.resumeToken = resumeToken
    }
}

/// An ICE server the session server hands its clients in `connected`, shaped as WebRTC's `RTCIceServer`: `stun:`,
/// `turn:` or `turns:` URLs, with time-limited TURN credentials (docs/protocol.md, "ICE servers").
public struct ICEServerInfo: Codable, Sendable, Equatable {
    public var urls: [String]
    public var username: String?
    public var credential: String?
    public init(urls: [String], username: String? = nil, credential: String? = nil) {
        self.urls = urls; self.username = username; self.credential = credential
    }
}

/// The `connected` answer.
public struct ConnectedInfo: Codable, Sendable, Equatable {
    public var id: Int
    public var connection: ConnectionInfo
    public var role: SessionRole
    /// Present this with the connection id to resume after a dropped socket.
    public var resumeToken: String
    /// Other connections already in the session (empty when events are suppressed).
    public var connections: [ConnectionInfo]
    public var streams: [StreamInfo]
    /// Whether a force mute of the whole session is active.
    public var muteForced: Bool
    /// True when this connect resumed an existing connection.
    public var resumed: Bool
    public var relayed: Bool
    public var e2ee: Bool
    /// How long the server keeps this connection resumable after its socket drops (milliseconds).
    public var reconnectGraceMillis: Int?
    /// True when the roster did not fit: the rest follows in `roster` messages, the last one marked `last`.
    public var rosterFollows: Bool?
    /// STUN/TURN servers for this connection's media (absent when the server provides none).
    public var iceServers: [ICEServerInfo]?
    public init(id: Int, connection: ConnectionInfo, role: SessionRole, resumeToken: String, connections: [ConnectionInfo],
                streams: [StreamInfo], muteForced: Bool, resumed: Bool, relayed: Bool, e2ee: Bool, reconnectGraceMillis: Int? = nil,
                rosterFollows: Bool? = nil, iceServers: [ICEServerInfo]? = nil) {
        self.id = id; self.connection = connection; self.role = role; self.resumeToken = resumeToken; self.connections = connections
        self.streams = streams; self.muteForced = muteForced; self.resumed = resumed; self.relayed = relayed; self.e2ee = e2ee
        self.reconnectGraceMillis = reconnectGraceMillis; self.rosterFollows = rosterFollows; self.iceServers = iceServers
    }
}

/// Which way media flows on a peer connection, from the offering client's point of view.
public enum MediaDirection: String, Codable, Sendable, Equatable {
    /// The offerer sends its stream (a publisher's connection to the media router).
    case publish
    /// The offerer receives a stream (a subscriber).
    case subscribe
}

/// Messages a client sends (docs/protocol.md). Requests carry an `id` echoed by the server's `reply`.
public enum ClientMessage: Sendable, Equatable {
    case connect(ConnectRequest)
    case signal(id: Int, type: String, data: String, to: String?)
    case publish(id: Int, PublishRequest)
    case unpublish(id: Int, streamId: String)
    case updateStream(id: Int, streamId: String, hasAudio: Bool?, hasVideo: Bool?, width: Int?, height: Int?)
    /// Asks to subscribe to a stream (role and stream checked; media is negotiated elsewhere).
    case subscribe(id: Int, streamId: String)
    case forceMuteStream(id: Int, streamId: String)
    case forceMuteAll(id: Int, active: Bool, excludedStreams: [String])
    case forceDisconnect(id: Int, connectionId: String)
    case reportIssue(id: Int, issueId: String, description: String)
    case disconnect
    /// Opens a peer connection `peerId` (chosen by the offerer, unique in the session) for `streamId`.
    /// Routed sessions: the media router answers. Relayed sessions: only `subscribe` offers, which go to the
    /// publishing client. Refusals come as a `reply` with a code; success as `reply` then `mediaAnswer`.
    case mediaOffer(id: Int, peerId: String, streamId: String, direction: MediaDirection, sdp: String)
    /// The answer of a relayed publisher to a forwarded `mediaOffer`.
    case mediaAnswer(peerId: String, sdp: String)
    /// A trickled ICE candidate (`candidate:...` attribute value; empty for end of candidates), with the m-section
    /// of its transport as `RTCIceCandidateInit` names it (the BUNDLE tag's mid and m-line index); both may be absent.
    case mediaCandidate(peerId: String, candidate: String, sdpMid: String? = nil, sdpMLineIndex: Int? = nil)
    /// Closes a peer connection. `refusal`: a relayed publisher refusing a subscriber's offer says why (the
    /// subscriber gets it as `mediaClose` with reason `refused`).
    case mediaClose(peerId: String, refusal: String? = nil)
    /// What a subscriber wants to receive on its peer connection.
    case subscriberSettings(peerId: String, audio: Bool, video: Bool)
    /// A liveness check for clients that cannot send WebSocket pings (browsers): answered by a plain `reply`.
    case ping(id: Int)
}

/// Messages the server sends (docs/protocol.md).
public enum ServerMessage: Sendable, Equatable {
    case connected(ConnectedInfo)
    /// The rest of a roster too large for one `connected` message (`SignalingCodec.encodeFrames`); `last` on the
    /// final part.
    case roster(connections: [ConnectionInfo], streams: [StreamInfo], last: Bool)
    /// Answer to a request: `code` nil on success, else an OpenTok error code.
    case reply(id: Int, code: Int32?, message: String?, stream: StreamInfo?, issueId: String?)
    case connectionCreated(ConnectionInfo)
    case connectionDestroyed(connectionId: String, reason: String)
    case streamCreated(StreamInfo)
    case streamDestroyed(streamId: String, reason: String)
    /// `property`: "hasAudio", "hasVideo" or "dimensions".
    case streamChanged(StreamInfo, property: String)
    /// `from` is nil for signals sent through the REST API.
    case signal(type: String, data: String, from: String?)
    /// A moderator's force mute: of one stream (`streamId`), of every stream but `excludedStreamIds` (mute all,
    /// `active` true, no `streamId`), or the end of a mute all (`active` false, no `streamId`).
    case muteForced(active: Bool, streamId: String?, excludedStreamIds: [String])
    /// The server ends this client's connection (e.g. force disconnect); the socket closes next.
    case disconnected(reason: String)
    /// A refused connect or a protocol error; the socket closes next.
    case error(code: Int32, message: String)
    /// A subscriber's offer forwarded to the publishing client of a relayed session; `from` is the
    /// subscriber's connection id.
    case mediaOffer(peerId: String, streamId: String, direction: MediaDirection, sdp: String, from: String)
    /// The answer for an offer this client sent (from the media router or the relayed publisher).
    case mediaAnswer(peerId: String, sdp: String)
    /// A trickled candidate from the other side of a relayed peer connection (see `ClientMessage.mediaCandidate`).
    case mediaCandidate(peerId: String, candidate: String, sdpMid: String? = nil, sdpMLineIndex: Int? = nil)
    /// The other side closed the peer connection (its client left, the stream ended, or the router closed it), or
    /// (reason `refused`) the relayed publisher refused the offer, saying why in `message`.
    case mediaClose(peerId: String, reason: String, message: String? = nil)
    /// A relayed subscriber's wishes, forwarded to the publishing client.
    case subscriberSettings(peerId: String, audio: Bool, video: Bool)
    /// Routed sessions: the media router's audio-fallback decision for a subscriber's peer connection.
    case mediaQuality(peerId: String, event: MediaQualityEvent)
    /// Routed sessions: the stream's publisher lost (or regained) its media connection to the router; sent for each
    /// subscriber's peer connection of that stream.
    case publisherMedia(peerId: String, state: PublisherMediaState)

    /// The media peer connection a media message is about; nil for every other message. Exhaustive, so a new
    /// media message cannot be left out of the routing that relies on it.
    public var mediaPeerId: String? {
        switch self {
        case .mediaOffer(let p, _, _, _, _), .mediaAnswer(let p, _), .mediaCandidate(let p, _, _, _), .mediaClose(let p, _, _),
             .subscriberSettings(let p, _, _), .mediaQuality(let p, _), .publisherMedia(let p, _):
            return p
        case .connected, .roster, .reply, .connectionCreated, .connectionDestroyed, .streamCreated, .streamDestroyed, .streamChanged,
             .signal, .muteForced, .disconnected, .error:
            return nil
        }
    }
}

private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { stringValue = s }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer where K == AnyKey {
    fileprivate func req<T: Decodable>(_ k: String) throws -> T { try decode(T.self, forKey: AnyKey(k)) }
    fileprivate func opt<T: Decodable>(_ k: String) throws -> T? { try decodeIfPresent(T.self, forKey: AnyKey(k)) }
}

extension KeyedEncodingContainer where K == AnyKey {
    fileprivate mutating func put<T: Encodable>(_ k: String, _ v: T?) throws { if let v { try encode(v, forKey: AnyKey(k)) } }
}

extension ClientMessage: Codable {
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        let type: String = try c.req("type")
        switch type {
        case "connect": self = .connect(try ConnectRequest(from: decoder))
        case "signal": self = .signal(id: try c.req("id"), type: try c.req("signalType"), data: try c.req("data"), to: try c.opt("to"))
        case "publish": self = .publish(id: try c.req("id"), try c.req("stream"))
        case "unpublish": self = .unpublish(id: try c.req("id"), streamId: try c.req("streamId"))
        case "updateStream":
            self = .updateStream(id: try c.req("id"), streamId: try c.req("streamId"), hasAudio: try c.opt("hasAudio"),
                                 hasVideo: try c.opt("hasVideo"), width: try c.opt("width"), height: try c.opt("height"))
        case "subscribe": self = .subscribe(id: try c.req("id"), streamId: try c.req("streamId"))
        case "forceMuteStream": self = .forceMuteStream(id: try c.req("id"), streamId: try c.req("streamId"))
        case "forceMuteAll":
            self = .forceMuteAll(id: try c.req("id"), active: try c.req("active"), excludedStreams: try c.opt("excludedStreams") ?? [])
        case "forceDisconnect": self = .forceDisconnect(id: try c.req("id"), connectionId: try c.req("connectionId"))
        case "reportIssue": self = .reportIssue(id: try c.req("id"), issueId: try c.opt("issueId") ?? "", description: try c.req("description"))
        case "disconnect": self = .disconnect
        case "mediaOffer":
            self = .mediaOffer(id: try c.req("id"), peerId: try c.req("peerId"), streamId: try c.req("streamId"),
                               direction: try c.req("direction"), sdp: try c.req("sdp"))
        case "mediaAnswer": self = .mediaAnswer(peerId: try c.req("peerId"), sdp: try c.req("sdp"))
        case "mediaCandidate":
            self = .mediaCandidate(peerId: try c.req("peerId"), candidate: try c.req("candidate"), sdpMid: try c.opt("sdpMid"),
                                   sdpMLineIndex: try c.opt("sdpMLineIndex"))
        case "mediaClose": self = .mediaClose(peerId: try c.req("peerId"), refusal: try c.opt("refusal"))
        case "subscriberSettings": self = .subscriberSettings(peerId: try c.req("peerId"), audio: try c.req("audio"), video: try c.req("video"))
        case "ping": self = .ping(id: try c.req("id"))
        default: throw UnknownMessageType(type: String(type.prefix(64)), id: try? c.opt("id"))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: AnyKey.self)
        switch self {
        case .connect(let r):
            try c.put("type", "connect"); try r.encode(to: encoder)
        case .signal(let id, let type, let data, let to):
            try c.put("type", "signal"); try c.put("id", id); try c.put("signalType", type); try c.put("data", data); try c.put("to", to)
        case .publish(let id, let p):
            try c.put("type", "publish"); try c.put("id", id); try c.put("stream", p)
        case .unpublish(let id, let s):
            try c.put("type", "unpublish"); try c.put("id", id); try c.put("streamId", s)
        case .updateStream(let id, let s, let a, let v, let w, let h):
            try c.put("type", "updateStream"); try c.put("id", id); try c.put("streamId", s)
            try c.put("hasAudio", a); try c.put("hasVideo", v); try c.put("width", w); try c.put("height", h)
        case .subscribe(let id, let s):
            try c.put("type", "subscribe"); try c.put("id", id); try c.put("streamId", s)
        case .forceMuteStream(let id, let s):
            try c.put("type", "forceMuteStream"); try c.put("id", id); try c.put("streamId", s)
        case .forceMuteAll(let id, let active, let ex):
            try c.put("type", "forceMuteAll"); try c.put("id", id); try c.put("active", active); try c.put("excludedStreams", ex)
        case .forceDisconnect(let id, let cid):
            try c.put("type", "forceDisconnect"); try c.put("id", id); try c.put("connectionId", cid)
        case .reportIssue(let id, let issueId, let d):
            try c.put("type", "reportIssue"); try c.put("id", id); try c.put("issueId", issueId); try c.put("description", d)
        case .disconnect:
            try c.put("type", "disconnect")
        case .ping(let id):
            try c.put("type", "ping"); try c.put("id", id)
        case .mediaOffer(let id, let peerId, let streamId, let direction, let sdp):
            try c.put("type", "mediaOffer"); try c.put("id", id); try c.put("peerId", peerId); try c.put("streamId", streamId)
            try c.put("direction", direction); try c.put("sdp", sdp)
        case .mediaAnswer(let peerId, let sdp):
            try c.put("type", "mediaAnswer"); try c.put("peerId", peerId); try c.put("sdp", sdp)
        case .mediaCandidate(let peerId, let candidate, let mid, let index):
            try c.put("type", "mediaCandidate"); try c.put("peerId", peerId); try c.put("candidate", candidate)
            try c.put("sdpMid", mid); try c.put("sdpMLineIndex", index)
        case .mediaClose(let peerId, let refusal):
            try c.put("type", "mediaClose"); try c.put("peerId", peerId); try c.put("refusal", refusal)
        case .subscriberSettings(let peerId, let audio, let video):
            try c.put("type", "subscriberSettings"); try c.put("peerId", peerId); try c.put("audio", audio); try c.put("video", video)
        }
    }
}

extension ServerMessage: Codable {
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        let type: String = try c.req("type")
        switch type {
        case "connected": self = .connected(try ConnectedInfo(from: decoder))
        case "roster": self = .roster(connections: try c.req("connections"), streams: try c.req("streams"), last: try c.req("last"))
        case "reply":
            self = .reply(id: try c.req("id"), code: try c.opt("code"), message: try c.opt("message"), stream: try c.opt("stream"), issueId: try c.opt("issueId"))
        case "connectionCreated": self = .connectionCreated(try c.req("connection"))
        case "connectionDestroyed": self = .connectionDestroyed(connectionId: try c.req("connectionId"), reason: try c.req("reason"))
        case "streamCreated": self = .streamCreated(try c.req("stream"))
        case "streamDestroyed": self = .streamDestroyed(streamId: try c.req("streamId"), reason: try c.req("reason"))
        case "streamChanged": self = .streamChanged(try c.req("stream"), property: try c.req("property"))
        case "signal": self = .signal(type: try c.req("signalType"), data: try c.req("data"), from: try c.opt("from"))
        case "muteForced":
            self = .muteForced(active: try c.req("active"), streamId: try c.opt("streamId"),
                               excludedStreamIds: try c.opt("excludedStreamIds") ?? [])
        case "disconnected": self = .disconnected(reason: try c.req("reason"))
        case "error": self = .error(code: try c.req("code"), message: try c.req("message"))
        case "mediaOffer":
            self = .mediaOffer(peerId: try c.req("peerId"), streamId: try c.req("streamId"), direction: try c.req("direction"),
                               sdp: try c.req("sdp"), from: try c.req("from"))
        case "mediaAnswer": self = .mediaAnswer(peerId: try c.req("peerId"), sdp: try c.req("sdp"))
        case "mediaCandidate":
            self = .mediaCandidate(peerId: try c.req("peerId"), candidate: try c.req("candidate"), sdpMid: try c.opt("sdpMid"),
                                   sdpMLineIndex: try c.opt("sdpMLineIndex"))
        case "mediaClose": self = .mediaClose(peerId: try c.req("peerId"), reason: try c.opt("reason") ?? "", message: try c.opt("message"))
        case "subscriberSettings": self = .subscriberSettings(peerId: try c.req("peerId"), audio: try c.req("audio"), video: try c.req("video"))
        case "mediaQuality": self = .mediaQuality(peerId: try c.req("peerId"), event: try c.req("event"))
        case "publisherMedia": self = .publisherMedia(peerId: try c.req("peerId"), state: try c.req("state"))
        default: throw WireError("unknown server message type \(type.prefix(40))")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: AnyKey.self)
        switch self {
        case .connected(let info):
            try c.put("type", "connected"); try info.encode(to: encoder)
        case .roster(let conns, let streams, let last):
            try c.put("type", "roster"); try c.put("connections", conns); try c.put("streams", streams); try c.put("last", last)
        case .reply(let id, let code, let message, let stream, let issueId):
            try c.put("type", "reply"); try c.put("id", id); try c.put("code", code); try c.put("message", message)
            try c.put("stream", stream); try c.put("issueId", issueId)
        case .connectionCreated(let conn):
            try c.put("type", "connectionCreated"); try c.put("connection", conn)
        case .connectionDestroyed(let id, let reason):
            try c.put("type", "connectionDestroyed"); try c.put("connectionId", id); try c.put("reason", reason)
        case .streamCreated(let s):
            try c.put("type", "streamCreated"); try c.put("stream", s)
        case .streamDestroyed(let id, let reason):
            try c.put("type", "streamDestroyed"); try c.put("streamId", id); try c.put("reason", reason)
        case .streamChanged(let s, let p):
            try c.put("type", "streamChanged"); try c.put("stream", s); try c.put("property", p)
        case .signal(let type, let data, let from):
            try c.put("type", "signal"); try c.put("signalType", type); try c.put("data", data); try c.put("from", from)
        case .muteForced(let active, let streamId, let excluded):
            try c.put("type", "muteForced"); try c.put("active", active); try c.put("streamId", streamId)
            if active && streamId == nil { try c.put("excludedStreamIds", excluded) }
        case .disconnected(let reason):
            try c.put("type", "disconnected"); try c.put("reason", reason)
        case .error(let code, let message):
            try c.put("type", "error"); try c.put("code", code); try c.put("message", message)
        case .mediaOffer(let peerId, let streamId, let direction, let sdp, let from):
            try c.put("type", "mediaOffer"); try c.put("peerId", peerId); try c.put("streamId", streamId)
            try c.put("direction", direction); try c.put("sdp", sdp); try c.put("from", from)
        case .mediaAnswer(let peerId, let sdp):
            try c.put("type", "mediaAnswer"); try c.put("peerId", peerId); try c.put("sdp", sdp)
        case .mediaCandidate(let peerId, let candidate, let mid, let index):
            try c.put("type", "mediaCandidate"); try c.put("peerId", peerId); try c.put("candidate", candidate)
            try c.put("sdpMid", mid); try c.put("sdpMLineIndex", index)
        case .mediaClose(let peerId, let reason, let message):
            try c.put("type", "mediaClose"); try c.put("peerId", peerId); try c.put("reason", reason); try c.put("message", message)
        case .subscriberSettings(let peerId, let audio, let video):
            try c.put("type", "subscriberSettings"); try c.put("peerId", peerId); try c.put("audio", audio); try c.put("video", video)
        case .mediaQuality(let peerId, let event):
            try c.put("type", "mediaQuality"); try c.put("peerId", peerId); try c.put("event", event)
        case .publisherMedia(let peerId, let state):
            try c.put("type", "publisherMedia"); try c.put("peerId", peerId); try c.put("state", state)
        }
    }
}

/// A well-formed client message whose `type` this server does not know (a newer client's). The server answers a
/// request (one with an integer `id`) with an error `reply` and keeps the connection: forward compatibility.
public struct UnknownMessageType: Error, Equatable, Sendable {
    public var type: String
    public var id: Int?
    public init(type: String, id: Int?) { self.type = type; self.id = id }
}

/// JSON text for the wire, and back.
public enum SignalingCodec {
    public static func encode<T: Encodable>(_ m: T) -> String {
        let enc = JSONEncoder()
        enc.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let d = try? enc.encode(m) else { return "{}" }
        return String(decoding: d, as: UTF8.self)
    }
    /// The largest roster message `encodeFrames` makes (clients accept messages up to 1 MiB).
    public static let maxRosterMessageBytes = 256 * 1024

    /// The texts to send for `m`: one, except for a `connected` whose roster is over `maxBytes`, which becomes a
    /// `connected` carrying what fits (`rosterFollows`) and `roster` parts with the rest, each within `maxBytes`
    /// (as long as every entry alone fits, which the server's limits on data and names ensure).
    public static func encodeFrames(_ m: ServerMessage, maxBytes: Int = maxRosterMessageBytes) -> [String] {
        let whole = encode(m)
        guard case .connected(var info) = m, whole.utf8.count > maxBytes else { return [whole] }
        // Entries packed greedily in order: connections first, then streams.
        var parts: [([ConnectionInfo], [StreamInfo])] = [([], [])]
        var size = 0
        let overhead = 128
        func fits(_ n: Int, _ budget: Int) -> Bool { size == 0 || size + n + 1 <= budget }
        var budget = maxBytes - overhead - encode(ServerMessage.connected(ConnectedInfo(id: info.id, connection: info.connection, role: info.role,
            resumeToken: info.resumeToken, connections: [], streams: [], muteForced: info.muteForced, resumed: info.resumed,
            relayed: info.relayed, e2ee: info.e2ee, reconnectGraceMillis: info.reconnectGraceMillis, rosterFollows: true,
            iceServers: info.iceServers))).utf8.count
        for c in info.connections {
            let n = encode(c).utf8.count
            if !fits(n, budget) { parts.append(([], [])); size = 0; budget = maxBytes - overhead }
            parts[parts.count - 1].0.append(c); size += n + 1
        }
        for st in info.streams {
            let n = encode(st).utf8.count
            if !fits(n, budget) { parts.append(([], [])); size = 0; budget = maxBytes - overhead }
            parts[parts.count - 1].1.append(st); size += n + 1
        }
        info.connections = parts[0].0; info.streams = parts[0].1
        info.rosterFollows = parts.count > 1 ? true : nil
        var out = [encode(ServerMessage.connected(info))]
        for (i, p) in parts.enumerated().dropFirst() {
            out.append(encode(ServerMessage.roster(connections: p.0, streams: p.1, last: i == parts.count - 1)))
        }
        return out
    }

    /// Throws `UnknownMessageType` for a message of a type it does not know, `WireError` for anything malformed.
    public static func decodeClient(_ text: String) throws -> ClientMessage {
        do { return try JSONDecoder().decode(ClientMessage.self, from: Data(text.utf8)) } catch let e as WireError { throw e }
        catch let e as UnknownMessageType { throw e } catch {
            throw WireError("bad client message: \(error)")
        }
    }
    public static func decodeServer(_ text: String) throws -> ServerMessage {
        do { return try JSONDecoder().decode(ServerMessage.self, from: Data(text.utf8)) } catch let e as WireError { throw e } catch {
            throw WireError("bad server message: \(error)")
        }
    }
}

/// The signal limits of OpenTok, checked by client and server alike.
public enum SignalRules {
    public static let maxTypeCharacters = 128
    public static let maxDataBytes = 8192

    /// Throws 1414 (type too long), 1461 (bad characters) or 1413 (data too long).
    public static func validate(type: String, data: String) throws {
        guard type.utf8.count <= maxTypeCharacters else { throw OTError(.signalTypeTooLong) }
        for b in type.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "-"): continue
            default: throw OTError(.invalidSignalType)
            }
        }
        guard data.utf8.count <= maxDataBytes else { throw OTError(.signalDataTooLong) }
    }
}
