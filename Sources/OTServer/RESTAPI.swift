import FoundationEssentials
import OTBase
import OTWire

/// Errors of the REST API's own checks (authentication, routes, bodies), with the HTTP status to answer.
struct RESTError: Error, Equatable {
    var status: Int
    var message: String
    init(_ status: Int, _ message: String) { self.status = status; self.message = message }
}

/// The OpenTok REST API the server SDKs call (docs/protocol.md, "REST API"): routes, the project JWT in
/// `X-OPENTOK-AUTH`, JSON and form bodies, and the signaling router's `SignalingError`s mapped to HTTP statuses.
/// No sockets: a request and the time in, a response and the router's outputs (for the driver to carry out) out.
enum RESTAPI {
    /// A response, and what the signaling router asked the driver to do (signals, disconnects, mutes).
    struct Answer {
        var response: HTTPResponse
        var outputs: [SignalingRouter.Output] = []
    }

    /// The HTTP status of a signaling-router refusal.
    static func status(for e: SignalingError) -> Int {
        switch e {
        case .sessionNotFound, .connectionNotFound, .streamNotFound: 404
        case .badSignal(let rule): rule.code == .signalDataTooLong ? 413 : 400
        case .invalidArgument: 400
        }
    }

    /// Answers one request (`nowMillis`: wall-clock time, for JWT expiry and session ids). `stats` renders the media
    /// router's statistics of one project (nil: no media router).
    static func answer(_ req: HTTPRequest, router: SignalingRouter, stats: ((_ apiKey: String) -> [UInt8])?, nowMillis: Int64) -> Answer {
        do {
            return try route(req, router, stats, nowMillis)
        } catch let e as RESTError {
            return Answer(response: .jsonError(e.status, e.message))
        } catch let e as SignalingError {
            return Answer(response: .jsonError(status(for: e), e.message))
        } catch {
            return Answer(response: .jsonError(500, "\(error)"))
        }
    }

    private static func authenticate(_ req: HTTPRequest, _ router: SignalingRouter, apiKey: String?, nowMillis: Int64) throws -> Project {
        guard let token = req.headers["X-OPENTOK-AUTH"] else { throw RESTError(403, "missing X-OPENTOK-AUTH") }
        let key = apiKey ?? (try? JWT.unverifiedClaims(token)).flatMap { JWT.string($0["iss"]) }
        guard let key, let project = router.projects[key] else { throw RESTError(403, "unknown project") }
        do { try ProjectAuth.verify(token, apiKey: key, secret: project.secret, now: nowMillis / 1000) } catch {
            throw RESTError(403, "authentication failed: \(error)")
        }
        return project
    }

    private static func jsonBody(_ req: HTTPRequest) throws -> [String: JSONValue] {
        if req.body.isEmpty { return [:] }
        guard let dict = (try? JSONValue.parse(req.body))?.objectValue else { throw RESTError(400, "body is not a JSON object") }
        return dict
    }

    private static func streamJSON(_ s: StreamInfo) -> JSONValue {
        ["id": .string(s.id), "videoType": s.videoType == "screen" ? "screen" : "camera", "name": .string(s.name),
         "layoutClassList": .array(s.layoutClassList.map { .string($0) })]
    }

    private static func route(_ req: HTTPRequest, _ router: SignalingRouter, _ stats: ((String) -> [UInt8])?, _ nowMillis: Int64) throws -> Answer {
        let parts = req.path.split(separator: "/").map(String.init)
        if parts == ["session", "create"] {
            guard req.method == "POST" else { throw RESTError(405, "use POST") }
            let project = try authenticate(req, router, apiKey: nil, nowMillis: nowMillis)
            let form = FormEncoding.decode(String(decoding: req.body, as: UTF8.self))
            let relayed = form["p2p.preference"] == "enabled"
            let e2ee = form["e2ee"]?.lowercased() == "true"
            if e2ee && relayed { throw RESTError(400, "end-to-end encryption needs a routed session") }
            let sid = try router.createSession(apiKey: project.apiKey, relayed: relayed, e2ee: e2ee, location: form["location"] ?? "",
                                               nowMillis: nowMillis)
            let created = Date(timeIntervalSince1970: Double(nowMillis) / 1000).formatted(.iso8601)
            let reply: JSONValue = [["session_id": .string(sid), "project_id": .string(project.apiKey),
                                     "partner_id": .string(project.apiKey), "create_dt": .string(created), "media_server_url": ""]]
            return Answer(response: .json(200, reply.serialized()))
        }
        if parts == ["v2", "stats"] {
            guard req.method == "GET" else { throw RESTError(405, "use GET") }
            let project = try authenticate(req, router, apiKey: nil, nowMillis: nowMillis)
            return Answer(response: .json(200, stats?(project.apiKey) ?? JSONValue.object(["sessions": [:]]).serialized()))
        }
        guard parts.count >= 5, parts[0] == "v2", parts[1] == "project", parts[3] == "session" else {
            if parts.count >= 3, parts[0] == "v2", parts[1] == "project" {
                _ = try authenticate(req, router, apiKey: parts[2], nowMillis: nowMillis)
                throw RESTError(404, "not implemented by this server: \(req.path)")
            }
            throw RESTError(404, "no such resource: \(req.path)")
        }
        let key = parts[2], sid = parts[4], rest = Array(parts[5...])
        _ = try authenticate(req, router, apiKey: key, nowMillis: nowMillis)
        guard router.project(forSession: sid)?.apiKey == key else { throw SignalingError.sessionNotFound(sid) }
        switch (req.method, rest.count, rest.first) {
        case ("POST", 1, "signal"),
             ("POST", 3, "connection") where rest.last == "signal":
            let body = try jsonBody(req)
            let type = body["type"]?.stringValue ?? "", data = body["data"]?.stringValue ?? ""
            return Answer(response: HTTPResponse(status: 204),
                          outputs: try router.signalFromServer(sessionId: sid, connectionId: rest.count == 3 ? rest[1] : nil, type: type, data: data))
        case ("DELETE", 2, "connection"):
            return Answer(response: HTTPResponse(status: 204), outputs: try router.forceDisconnect(sessionId: sid, connectionId: rest[1]))
        case ("POST", 3, "stream") where rest[2] == "mute":
            return Answer(response: .json(200, Array("{}".utf8)), outputs: try router.forceMuteStream(sessionId: sid, streamId: rest[1]))
        case ("POST", 1, "mute"):
            let body = try jsonBody(req)
            guard let active = body["active"]?.boolValue else { throw RESTError(400, "active must be true or false") }
            let excluded = (body["excludedStreamIds"] ?? body["excludedStreams"] ?? body["excudedStreamIds"])?.arrayValue?
                .compactMap(\.stringValue) ?? []
            return Answer(response: .json(200, Array("{}".utf8)), outputs: try router.forceMuteAll(sessionId: sid, active: active, excluded: excluded))
        case ("GET", 1, "stream"):
            let items = try router.listStreams(sessionId: sid).map(streamJSON)
            return Answer(response: .json(200, JSONValue.object(["count": .int(Int64(items.count)), "items": .array(items)]).serialized()))
        case ("GET", 2, "stream"):
            return Answer(response: .json(200, streamJSON(try router.stream(sessionId: sid, streamId: rest[1])).serialized()))
        case ("PUT", 1, "stream"):
            let body = try jsonBody(req)
            guard let items = body["items"]?.arrayValue else { throw RESTError(400, "items must be a list") }
            var pairs: [(String, [String])] = []
            for it in items {
                guard let id = it["id"]?.stringValue, let classes = it["layoutClassList"]?.arrayValue?.compactMap(\.stringValue) else {
                    throw RESTError(400, "each item needs id and layoutClassList")
                }
                pairs.append((id, classes))
            }
            try router.setLayoutClassLists(sessionId: sid, pairs)
            return Answer(response: HTTPResponse(status: 200))
        default:
            throw RESTError(404, "no such resource: \(req.method) \(req.path)")
        }
    }
}
