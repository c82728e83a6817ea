import COTABI
import OTBase
import OTServer
import OTWire
import Synchronization

/// The object behind an `ot_server *`: the session server and, once started, its media router.
final class ServerObject: Sendable {
    let server: SessionServer
    let project: Project
    private let router = Mutex<MediaRouter?>(nil)
    init(server: SessionServer, project: Project) { self.server = server; self.project = project }

    /// Starts signaling and the media router of routed sessions (one UDP port on the server's host).
    func start() throws -> UInt16 {
        let host = server.configuration.host == "0.0.0.0" ? "127.0.0.1" : server.configuration.host
        guard let ip = IPAddress(host) else { throw OTError(.invalidParameter, "the media router needs an IP address, not \(host)") }
        let r = try MediaRouter(bind: TransportAddress(ip: ip, port: 0))
        server.mediaRouting = r
        router.withLock { $0 = r }
        do { return try server.start() } catch { r.stop(); throw error }
    }

    func stop() {
        server.stop()
        router.withLock { $0?.stop(); $0 = nil }
    }
}

private func withServer(_ p: UnsafeMutablePointer<ot_server>?, _ body: (ServerObject) throws -> ot_status) -> ot_status {
    withObject(UnsafePointer(p), as: ServerObject.self, body)
}

private func sessionRole(_ r: Int32) -> SessionRole? {
    switch r {
    case Int32(OT_ROLE_SUBSCRIBER.rawValue): .subscriber
    case Int32(OT_ROLE_PUBLISHER.rawValue): .publisher
    case Int32(OT_ROLE_PUBLISHER_ONLY.rawValue): .publisheronly
    case Int32(OT_ROLE_MODERATOR.rawValue): .moderator
    default: nil
    }
}

/// Creates an embedded session server for one project (REST API, WebSocket signaling, and a media router for
/// routed sessions on a UDP port of the same host), listening on `host` (NULL: 127.0.0.1; an IPv4 address or
/// localhost) and `port` (0: any free port) once started. NULL when an argument is invalid: the api key and secret
/// are checked as `ot-server` checks them (key of 1 to 64 of [A-Za-z0-9_-], secret of 1 to 256 bytes not ending in
/// `.word`). The server's limits are the defaults of docs/protocol.md, "Limits".
@c(ot_server_new) public func ot_server_new(_ host: UnsafePointer<CChar>?, _ port: Int32,
                                            _ api_key: UnsafePointer<CChar>?, _ api_secret: UnsafePointer<CChar>?) -> UnsafeMutablePointer<ot_server>? {
    guard (0...65535).contains(port), let key = CArg.string(api_key), let secret = CArg.string(api_secret),
          let project = try? Project(apiKey: key, validatingSecret: secret) else { return nil }
    let h = host == nil ? "127.0.0.1" : CArg.string(host)
    guard let h else { return nil }
    if h != "localhost" { guard case .v4? = IPAddress(h) else { return nil } }
    let server = SessionServer(SessionServer.Configuration(host: h, port: UInt16(port), projects: [project]))
    return Handle.pointer(HandleRegistry.shared.insert(ServerObject(server: server, project: project)), as: ot_server.self)
}

/// Starts serving (REST API and WebSocket signaling on one port); the bound port goes to `port` (may be NULL).
@c(ot_server_start) public func ot_server_start(_ server: UnsafeMutablePointer<ot_server>?, _ port: UnsafeMutablePointer<Int32>?) -> ot_status {
    withServer(server) { o in
        let p = try o.start()
        port?.pointee = Int32(p)
        return Status.ok
    }
}

/// Copies the server's base URL ("http://host:port", for the REST API and ot_session_settings.server_url) into `buf`.
@c(ot_server_get_url) public func ot_server_get_url(_ server: UnsafeMutablePointer<ot_server>?,
                                                  _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withServer(server) { o in
        guard o.server.port != 0 else { return Status.of(.illegalState) }
        return CArg.copy(o.server.apiURL, to: buf, size: size)
    }
}

/// Creates a session (routed, or relayed for peer-to-peer media) and copies its id into `buf`
/// (OT_ID_BUFFER_SIZE is enough).
@c(ot_server_create_session) public func ot_server_create_session(_ server: UnsafeMutablePointer<ot_server>?, _ relayed: ot_bool,
                                                                _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withServer(server) { o in
        guard buf != nil, size > 0 else { return Status.invalidParam }
        return CArg.copy(try o.server.createSession(apiKey: o.project.apiKey, relayed: relayed != 0), to: buf, size: size)
    }
}

/// Creates a session as ot_server_create_session, end-to-end encrypted when `e2ee` (media through the router, which
/// cannot read it; clients set a secret with ot_session_set_encryption_secret). OT_ERR_INVALID_PARAM for a relayed
/// end-to-end encrypted session.
@c(ot_server_create_session_with_options) public func ot_server_create_session_with_options(
    _ server: UnsafeMutablePointer<ot_server>?, _ relayed: ot_bool, _ e2ee: ot_bool,
    _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withServer(server) { o in
        guard buf != nil, size > 0 else { return Status.invalidParam }
        return CArg.copy(try o.server.createSession(apiKey: o.project.apiKey, relayed: relayed != 0, e2ee: e2ee != 0), to: buf, size: size)
    }
}

/// Mints a client token for a session of this server (role: one of ot_role; data: connection data or NULL;
/// format: OT_TOKEN_JWT or OT_TOKEN_T1) into `buf` (OT_TOKEN_BUFFER_SIZE is always enough).
@c(ot_server_new_token) public func ot_server_new_token(_ server: UnsafeMutablePointer<ot_server>?, _ session_id: UnsafePointer<CChar>?,
                                                      _ role: Int32, _ data: UnsafePointer<CChar>?, _ format: Int32,
                                                      _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withServer(server) { o in
        ot_token_new(o.project.apiKey, o.project.secret, session_id, role, data, format, buf, size)
    }
}

/// Stops the server (connected clients are dropped).
@c(ot_server_stop) public func ot_server_stop(_ server: UnsafeMutablePointer<ot_server>?) -> ot_status {
    withServer(server) { o in o.stop(); return Status.ok }
}

/// Stops and releases the server.
@c(ot_server_delete) public func ot_server_delete(_ server: UnsafeMutablePointer<ot_server>?) -> ot_status {
    deleteObject(server, as: ServerObject.self) { $0.stop() }
}

/// Mints a client token with a project's key and secret, without a server (for tools and tests).
/// Same arguments as ot_server_new_token; OT_ERR_INVALID_PARAM for a bad role, format, session id
/// (it must belong to `api_key`) or connection data over 1000 characters; OT_ERR_BUFFER_TOO_SMALL when `size` is
/// below the token's length plus one (OT_TOKEN_BUFFER_SIZE is always enough).
@c(ot_token_new) public func ot_token_new(_ api_key: UnsafePointer<CChar>?, _ api_secret: UnsafePointer<CChar>?,
                                          _ session_id: UnsafePointer<CChar>?, _ role: Int32, _ data: UnsafePointer<CChar>?,
                                          _ format: Int32, _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    guard let key = CArg.string(api_key), let secret = CArg.string(api_secret), let sid = CArg.string(session_id),
          let r = sessionRole(role), buf != nil, size > 0 else { return Status.invalidParam }
    let fmt: TokenFormat
    switch format {
    case Int32(OT_TOKEN_JWT.rawValue): fmt = .jwt
    case Int32(OT_TOKEN_T1.rawValue): fmt = .t1
    default: return Status.invalidParam
    }
    let connectionData = data == nil ? nil : CArg.string(data)
    if data != nil && connectionData == nil { return Status.invalidParam }
    do {
        guard try SessionID.parse(sid).apiKey == key else { return Status.invalidParam }
        let now = wallClockMillis() / 1000
        let token = try ClientToken(apiKey: key, sessionId: sid, role: r, createTime: now, expireTime: now + ClientToken.defaultLifetime,
                                    connectionData: connectionData, format: fmt).mint(secret: secret)
        return CArg.copy(token, to: buf, size: size)
    } catch let e as OTError {
        return Status.of(e.code)
    } catch {
        return Status.invalidParam
    }
}
