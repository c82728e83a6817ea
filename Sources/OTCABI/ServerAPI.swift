import COTABI
import OTBase
import OTServer
import OTWire

/// The object behind an `ot_server *`: the session server (with its media router, started and stopped with it).
final class ServerObject: Sendable {
    let server: SessionServer
    let project: Project
    init(server: SessionServer, project: Project) { self.server = server; self.project = project }
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
    let server = SessionServer(SessionServer.Configuration(host: h, port: UInt16(port), projects: [project], media: SessionServer.MediaSettings()))
    return Handle.pointer(HandleRegistry.shared.insert(ServerObject(server: server, project: project)), as: ot_server.self)
}

/// Fills `options` with the defaults: 127.0.0.1, any port, no project (set api_key and api_secret), no TLS, no ICE
/// servers, TURN credentials valid for a day, the media router on the server's host at any port with one worker.
@c(ot_server_options_default) public func ot_server_options_default(_ options: UnsafeMutablePointer<ot_server_options>?) -> ot_status {
    guard let options else { return Status.invalidParam }
    options.pointee = ot_server_options(host: nil, port: 0, api_key: nil, api_secret: nil, tls_cert_file: nil, tls_key_file: nil,
                                        ice_server_urls: nil, ice_server_url_count: 0, turn_secret: nil,
                                        turn_credential_ttl_s: ICEServerPolicy().credentialLifetime.components.seconds,
                                        media_host: nil, media_port: 0, media_advertise: nil, media_workers: 1)
    return Status.ok
}

/// The server (and its router's placement) that options describe, or the error naming what is wrong.
private func serverObject(_ o: ot_server_options) -> Result<ServerObject, OTError> {
    func bad(_ m: String) -> Result<ServerObject, OTError> { .failure(OTError(.invalidParameter, m)) }
    func optional(_ p: UnsafePointer<CChar>?, _ name: String) -> Result<String?, OTError> {
        guard let p else { return .success(nil) }
        guard let s = CArg.string(p), !s.isEmpty else { return .failure(OTError(.invalidParameter, "\(name) is empty or not UTF-8")) }
        return .success(s)
    }
    do {
        guard (0...65535).contains(o.port), (0...65535).contains(o.media_port) else { return bad("port and media_port must be 0..65535") }
        guard let key = CArg.string(o.api_key), let secret = CArg.string(o.api_secret) else { return bad("api_key and api_secret are needed") }
        let project = try Project(apiKey: key, validatingSecret: secret)
        let host = try optional(o.host, "host").get() ?? "127.0.0.1"
        guard host == "localhost" || IPAddress(host) != nil else { return bad("host \(host) is not an IP address or localhost") }
        var tls: SessionServer.TLSSettings?
        switch (try optional(o.tls_cert_file, "tls_cert_file").get(), try optional(o.tls_key_file, "tls_key_file").get()) {
        case (let c?, let k?): tls = SessionServer.TLSSettings(certificateFile: c, keyFile: k)
        case (nil, nil): break
        default: return bad("tls_cert_file and tls_key_file go together")
        }
        // size_t arrives as Int: SIZE_MAX is -1 here, and must be refused, not read as a count.
        guard (0...64).contains(o.ice_server_url_count) else { return bad("ice_server_url_count \(UInt(bitPattern: o.ice_server_url_count)) is over 64") }
        guard o.ice_server_url_count == 0 || o.ice_server_urls != nil else { return bad("ice_server_urls is NULL but its count is not 0") }
        var ice = ICEServerPolicy()
        for i in 0..<Int(o.ice_server_url_count) {
            guard let u = CArg.string(o.ice_server_urls?[i]) else { return bad("ice_server_urls[\(i)] is NULL or not UTF-8") }
            ice.urls.append(u)
        }
        ice.turnSecret = try optional(o.turn_secret, "turn_secret").get()
        ice.credentialLifetime = .seconds(o.turn_credential_ttl_s)
        var media = SessionServer.MediaSettings(port: UInt16(o.media_port), workers: Int(o.media_workers))
        if let h = try optional(o.media_host, "media_host").get() {
            guard let ip = IPAddress(h) else { return bad("media_host \(h) is not an IP address") }
            media.host = ip
        }
        if let a = try optional(o.media_advertise, "media_advertise").get() {
            guard let ip = IPAddress(a) else { return bad("media_advertise \(a) is not an IP address") }
            media.advertise = ip
        }
        let configuration = SessionServer.Configuration(host: host, port: UInt16(o.port), projects: [project], tls: tls, iceServers: ice,
                                                        media: media)
        // The ranges (TURN credential lifetime, media workers) are the server's own, checked once, in OTServer.
        try configuration.validate(naming: CMemberNames.of)
        return .success(ServerObject(server: SessionServer(configuration), project: project))
    } catch let e as OTError {
        return .failure(e)
    } catch {
        return bad("\(error)")
    }
}

/// Creates an embedded session server with options (ot_server_options_default, then set at least api_key and
/// api_secret): TLS, the ICE servers its clients get, the media router's placement and workers. NULL when an option is invalid
/// (the reason is logged); files are read at ot_server_start.
@c(ot_server_new_with_options) public func ot_server_new_with_options(_ options: UnsafePointer<ot_server_options>?) -> UnsafeMutablePointer<ot_server>? {
    guard let options else { return nil }
    switch serverObject(options.pointee) {
    case .success(let o): return Handle.pointer(HandleRegistry.shared.insert(o), as: ot_server.self)
    case .failure(let e): Log.warn("capi", "ot_server_new_with_options: \(e.message)"); return nil
    }
}

/// Reads the TLS certificate and key files again (after a renewal): new connections get the new certificate, open
/// sessions carry on. OT_ERR_ILLEGAL_STATE without TLS or before ot_server_start; OT_ERR_INVALID_PARAM (the old
/// certificate stays; the reason is logged) when the files are unusable.
@c(ot_server_reload_tls) public func ot_server_reload_tls(_ server: UnsafeMutablePointer<ot_server>?) -> ot_status {
    withServer(server) { o in
        do { try o.server.reloadTLS() } catch let e as OTError { Log.warn("capi", "ot_server_reload_tls: \(e.message)"); throw e }
        return Status.ok
    }
}

/// Starts serving (REST API and WebSocket signaling on one port); the bound port goes to `port` (may be NULL).
/// OT_ERR_INVALID_PARAM when the TLS files cannot be used (the reason is logged).
@c(ot_server_start) public func ot_server_start(_ server: UnsafeMutablePointer<ot_server>?, _ port: UnsafeMutablePointer<Int32>?) -> ot_status {
    withServer(server) { o in
        let p: UInt16
        do { p = try o.server.start() } catch let e as OTError { Log.warn("capi", "ot_server_start: \(e.message)"); throw e }
        port?.pointee = Int32(p)
        return Status.ok
    }
}

/// Copies the server's base URL ("http://host:port", or "https://host:port" with TLS; for the REST API and
/// ot_session_settings.server_url) into `buf`.
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

/// Where a session of this server has its media (routed sessions): the index of the media worker it is pinned to
/// (0 to media_workers - 1) into `worker` and that worker's UDP port into `port` (either may be NULL). Sessions are
/// spread over the workers by their id, so this holds before the session has media. OT_ERR_INVALID_PARAM for a NULL
/// or foreign session id; OT_ERR_ILLEGAL_STATE before ot_server_start or after ot_server_stop.
@c(ot_server_get_session_placement) public func ot_server_get_session_placement(
    _ server: UnsafeMutablePointer<ot_server>?, _ session_id: UnsafePointer<CChar>?,
    _ worker: UnsafeMutablePointer<Int32>?, _ port: UnsafeMutablePointer<Int32>?) -> ot_status {
    withServer(server) { o in
        guard let sid = CArg.string(session_id) else { return Status.invalidParam }
        let at = try o.server.mediaPlacement(sessionId: sid)
        worker?.pointee = Int32(at.worker)
        port?.pointee = Int32(at.port)
        return Status.ok
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
    withServer(server) { o in o.server.stop(); return Status.ok }
}

/// Stops and releases the server.
@c(ot_server_delete) public func ot_server_delete(_ server: UnsafeMutablePointer<ot_server>?) -> ot_status {
    deleteObject(server, as: ServerObject.self) { $0.server.stop() }
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
