import COTABI
import Dispatch
import FoundationEssentials
import OTBase
import OTMedia
import OTSession
import Synchronization

/// The object behind an `ot_session *`: the Swift Session, its C callbacks and where they go (`sink`: the session's
/// library thread, or the poll queue), shared with its publisher and subscribers so that their callbacks keep one order.
final class SessionObject: @unchecked Sendable {
    let session: Session
    let sink: CallbackSink
    let owner = CallbackOwner()
    let callbacks: ot_session_callbacks
    private let adapter: DelegateAdapter
    private let state = Mutex<(bits: UInt, connection: (bits: UInt, id: String)?)>((0, nil))

    /// A session whose delegate messages (its publisher's and subscribers' too) are delivered on its sink's
    /// `deliveryQueue` (`settings.apiQueue` is set so).
    init(apiKey: String, sessionId: String, settings: SessionSettings, callbacks: ot_session_callbacks, poll: Bool) {
        sink = poll ? .poll("session") : .thread("session")
        var s = settings
        s.apiQueue = sink.deliveryQueue
        session = Session(apiKey: apiKey, sessionId: sessionId, delegate: nil, settings: s)
        self.callbacks = callbacks
        adapter = DelegateAdapter()
        adapter.owner = self
        session.delegate = adapter
    }

    var bits: UInt {
        get { state.withLock { $0.bits } }
        set { state.withLock { $0.bits = newValue } }
    }
    var handle: UnsafeMutablePointer<ot_session>? { Handle.pointer(bits, as: ot_session.self) }

    /// This client's connection as a handle owned by the session (kept while the id stays the same).
    func connectionHandle() -> UnsafeMutablePointer<ot_connection>? {
        guard let info = session.connection else { return nil }
        return state.withLock { s in
            if let c = s.connection, c.id == info.id { return Handle.pointer(c.bits, as: ot_connection.self) }
            if let old = s.connection { HandleRegistry.shared.takeBack(old.bits) }
            let bits = HandleRegistry.shared.insert(ConnectionObject(info), lent: true)
            s.connection = (bits, info.id)
            return Handle.pointer(bits, as: ot_connection.self)
        }
    }

    /// A stream handle's object for a stream of this session (flagged when this client published it).
    func streamObject(_ info: StreamInfo) -> StreamObject { StreamObject(info, own: session.isOwn(info)) }

    /// Unhooks from the Swift session and stops callbacks (waiting for the one in flight).
    func close() {
        session.delegate = nil
        try? session.disconnect()
        owner.close()
        if let c = state.withLock({ $0.connection }) { HandleRegistry.shared.takeBack(c.bits) }
    }

    /// Runs a C callback of the session where its callbacks go.
    func post(_ body: @escaping @Sendable (SessionObject) -> Void) {
        sink.post(owner) { [self] in body(self) }
    }
}

/// Receives the Swift delegate messages and forwards them to the C callbacks.
private final class DelegateAdapter: SessionDelegate, @unchecked Sendable {
    weak var owner: SessionObject?

    private func post(_ body: @escaping @Sendable (SessionObject, ot_session_callbacks) -> Void) {
        owner?.post { o in body(o, o.callbacks) }
    }
    private func withStream(_ o: SessionObject, _ stream: StreamInfo, _ body: (UnsafeMutablePointer<ot_stream>?) -> Void) {
        withBorrowedHandle(o.streamObject(stream), as: ot_stream.self, body)
    }

    func sessionDidConnect(_ session: Session) {
        post { o, cb in cb.on_connected?(o.handle, cb.user_data) }
    }
    func sessionDidDisconnect(_ session: Session) {
        post { o, cb in cb.on_disconnected?(o.handle, cb.user_data) }
    }
    func session(_ session: Session, didFailWithError error: OTError) {
        post { o, cb in error.message.withCString { cb.on_error?(o.handle, cb.user_data, ot_status(error.code.rawValue), $0) } }
    }
    func session(_ session: Session, connectionCreated connection: ConnectionInfo) {
        post { o, cb in
            withBorrowedHandle(ConnectionObject(connection), as: ot_connection.self) { cb.on_connection_created?(o.handle, cb.user_data, $0) }
        }
    }
    func session(_ session: Session, connectionDestroyed connection: ConnectionInfo) {
        post { o, cb in
            withBorrowedHandle(ConnectionObject(connection), as: ot_connection.self) { cb.on_connection_destroyed?(o.handle, cb.user_data, $0) }
        }
    }
    func session(_ session: Session, streamCreated stream: StreamInfo) {
        post { [self] o, cb in withStream(o, stream) { cb.on_stream_created?(o.handle, cb.user_data, $0) } }
    }
    func session(_ session: Session, streamDestroyed stream: StreamInfo) {
        post { [self] o, cb in withStream(o, stream) { cb.on_stream_destroyed?(o.handle, cb.user_data, $0) } }
    }
    func session(_ session: Session, stream: StreamInfo, didChange change: StreamPropertyChange) {
        post { [self] o, cb in
            withStream(o, stream) { s in
                switch change {
                case .hasAudio(let v): cb.on_stream_has_audio_changed?(o.handle, cb.user_data, s, CArg.bool(v))
                case .hasVideo(let v): cb.on_stream_has_video_changed?(o.handle, cb.user_data, s, CArg.bool(v))
                case .dimensions(let w, let h):
                    cb.on_stream_video_dimensions_changed?(o.handle, cb.user_data, s, Int32(clamping: w), Int32(clamping: h))
                }
            }
        }
    }
    func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {
        post { o, cb in
            type.withCString { t in
                data.withCString { d in
                    if let connection {
                        withBorrowedHandle(ConnectionObject(connection), as: ot_connection.self) { cb.on_signal_received?(o.handle, cb.user_data, t, d, $0) }
                    } else {
                        cb.on_signal_received?(o.handle, cb.user_data, t, d, nil)
                    }
                }
            }
        }
    }
    func session(_ session: Session, muteForced info: MuteForcedInfo) {
        post { o, cb in
            guard let f = cb.on_mute_forced else { return }
            let excluded = info.excludedStreamIds.map(OwnedCString.init)
            let pointers: [UnsafePointer<CChar>?] = excluded.map { UnsafePointer($0.pointer) }
            let streamId = info.streamId.map(OwnedCString.init)
            pointers.withUnsafeBufferPointer { ex in
                var c = ot_mute_forced_info(active: CArg.bool(info.active), stream_id: streamId.map { UnsafePointer($0.pointer) },
                                            excluded_stream_ids: ex.baseAddress, excluded_stream_count: ex.count)
                f(o.handle, cb.user_data, &c)
            }
        }
    }
    func session(_ session: Session, statusChanged status: SessionStatus) {
        post { o, cb in cb.on_status_changed?(o.handle, cb.user_data, status.rawValue) }
    }
    func sessionDidBeginReconnecting(_ session: Session) {
        post { o, cb in cb.on_reconnecting?(o.handle, cb.user_data) }
    }
    func sessionDidReconnect(_ session: Session) {
        post { o, cb in cb.on_reconnected?(o.handle, cb.user_data) }
    }
    func session(_ session: Session, deviceFailed error: DeviceError) {
        post { o, cb in
            error.error.message.withCString { cb.on_device_error?(o.handle, cb.user_data, error.kind.rawValue, Status.of(error.error.code), $0) }
        }
    }
}

/// Runs `body` with the live session behind `p`, turning thrown OTErrors into their codes.
func withSession(_ p: UnsafeMutablePointer<ot_session>?, _ body: (SessionObject) throws -> ot_status) -> ot_status {
    withObject(UnsafePointer(p), as: SessionObject.self, body)
}

/// Runs `body` with the live session and the live `T` behind `other` (checked in that order), for the calls that
/// put a publisher or subscriber into a session or take it out: OT_OK, or the status of a bad handle or thrown error.
func withSession<P, T: AnyObject & Sendable>(_ session: UnsafeMutablePointer<ot_session>?, and other: UnsafeMutablePointer<P>?,
                                              as: T.Type, _ body: (SessionObject, T) throws -> Void) -> ot_status {
    withSession(session) { s in
        withObject(UnsafePointer(other), as: T.self) { o in try body(s, o); return Status.ok }
    }
}

/// Fills `settings` with the defaults: server ws://127.0.0.1:8080, events not suppressed, no custom ICE servers,
/// every candidate type, LAN candidates signalled, 15 s connect timeout, 10 s keepalive, callbacks on a library thread,
/// the system's CA certificates, no proxy.
@c(ot_session_settings_default) public func ot_session_settings_default(_ settings: UnsafeMutablePointer<ot_session_settings>?) -> ot_status {
    guard let settings else { return Status.invalidParam }
    let d = SessionSettings()
    settings.pointee = ot_session_settings(server_url: nil, connection_events_suppressed: 0, ice_servers: nil, ice_server_count: 0,
                                           ice_transport_policy: Int32(OT_ICE_TRANSPORT_ALL.rawValue),
                                           ice_include_servers: Int32(OT_ICE_INCLUDE_SERVERS_ALL.rawValue), ice_filter_out_lan_candidates: 0,
                                           connect_timeout_ms: d.connectTimeout.microseconds / 1000,
                                           ping_interval_ms: d.pingInterval.microseconds / 1000,
                                           callback_mode: Int32(OT_CALLBACK_THREAD.rawValue), tls_ca_file: nil, proxy_url: nil)
    return Status.ok
}

/// The Swift settings described by C settings and whether callbacks are polled, or the OTError saying which member is
/// wrong: the C layer checks what is C's own (NULL, UTF-8, counts against arrays, enum values), `SessionSettings.validate`
/// the rest.
private func sessionSettings(_ settings: UnsafePointer<ot_session_settings>?) -> Result<(SessionSettings, poll: Bool), OTError> {
    var s = SessionSettings()
    guard let c = settings?.pointee else { return .success((s, false)) }
    if let url = c.server_url {
        guard let u = CArg.string(url), !u.isEmpty else { return .failure(OTError(.invalidParameter, "server_url is empty or not UTF-8")) }
        s.serverURL = u
    }
    s.connectionEventsSuppressed = c.connection_events_suppressed != 0
    var ice = SessionICEConfig(filterOutLanCandidates: c.ice_filter_out_lan_candidates != 0)
    switch c.ice_transport_policy {
    case Int32(OT_ICE_TRANSPORT_ALL.rawValue): ice.transportPolicy = .all
    case Int32(OT_ICE_TRANSPORT_RELAY.rawValue): ice.transportPolicy = .relay
    default: return .failure(OTError(.invalidParameter, "ice_transport_policy \(c.ice_transport_policy) is not an ot_ice_transport_policy"))
    }
    switch c.ice_include_servers {
    case Int32(OT_ICE_INCLUDE_SERVERS_ALL.rawValue): ice.includeServers = .all
    case Int32(OT_ICE_INCLUDE_SERVERS_CUSTOM.rawValue): ice.includeServers = .custom
    default: return .failure(OTError(.invalidParameter, "ice_include_servers \(c.ice_include_servers) is not an ot_ice_include_servers"))
    }
    // size_t arrives as Int: SIZE_MAX is -1 here, and must be refused, not read as no server.
    guard (0...64).contains(c.ice_server_count) else {
        return .failure(OTError(.invalidParameter, "ice_server_count \(UInt(bitPattern: c.ice_server_count)) is over 64"))
    }
    if c.ice_server_count > 0 {
        guard let servers = c.ice_servers else { return .failure(OTError(.invalidParameter, "ice_servers is NULL but ice_server_count is not 0")) }
        for i in 0..<Int(c.ice_server_count) {
            let e = servers[i]
            guard let url = CArg.string(e.url) else { return .failure(OTError(.invalidParameter, "ice_servers[\(i)].url is NULL or not UTF-8")) }
            let user = e.username == nil ? nil : CArg.string(e.username)
            let credential = e.credential == nil ? nil : CArg.string(e.credential)
            if (e.username != nil && user == nil) || (e.credential != nil && credential == nil) {
                return .failure(OTError(.invalidParameter, "ice_servers[\(i)]: username or credential is not UTF-8"))
            }
            do { try ice.addICEServer(url: url, username: user, credential: credential) } catch let err as OTError {
                return .failure(err)
            } catch { return .failure(OTError(.invalidParameter, "ice_servers[\(i)]: \(error)")) }
        }
    }
    s.iceConfig = ice
    s.connectTimeout = .milliseconds(c.connect_timeout_ms)
    s.pingInterval = .milliseconds(c.ping_interval_ms)
    if let f = c.tls_ca_file {
        guard let path = CArg.string(f), !path.isEmpty else { return .failure(OTError(.invalidParameter, "tls_ca_file is empty or not UTF-8")) }
        s.tlsCAFile = path
    }
    if let p = c.proxy_url {
        guard let url = CArg.string(p) else { return .failure(OTError(.invalidParameter, "proxy_url is not UTF-8")) }
        s.proxyURL = url
    }
    let poll: Bool
    switch c.callback_mode {
    case Int32(OT_CALLBACK_THREAD.rawValue): poll = false
    case Int32(OT_CALLBACK_POLL.rawValue): poll = true
    default: return .failure(OTError(.invalidParameter, "callback_mode \(c.callback_mode) is not an ot_callback_mode"))
    }
    do { try s.validate(naming: CMemberNames.of) } catch let e as OTError { return .failure(e) } catch {
        return .failure(OTError(.invalidParameter, "\(error)"))
    }
    return .success((s, poll))
}

/// Checks settings as ot_session_new_with_settings does: OT_OK, or OT_ERR_INVALID_PARAM (1011) for a NULL
/// pointer, an empty server_url, an unknown enum value or an ICE server URL that is not accepted (the reason is logged).
@c(ot_session_settings_validate) public func ot_session_settings_validate(_ settings: UnsafePointer<ot_session_settings>?) -> ot_status {
    guard let settings else { return Status.invalidParam }
    switch sessionSettings(settings) {
    case .success: return Status.ok
    case .failure(let e): Log.warn("capi", "session settings: \(e.message)"); return Status.of(e.code)
    }
}

/// Creates a session with default settings; NULL when an argument is NULL or empty.
/// `callbacks` is copied; it need not outlive the call.
@c(ot_session_new) public func ot_session_new(_ api_key: UnsafePointer<CChar>?, _ session_id: UnsafePointer<CChar>?,
                                              _ callbacks: UnsafePointer<ot_session_callbacks>?) -> UnsafeMutablePointer<ot_session>? {
    ot_session_new_with_settings(api_key, session_id, callbacks, nil)
}

/// Creates a session with settings (NULL settings: the defaults); NULL when a required argument is NULL or empty or
/// the settings are invalid (see ot_session_settings_validate, which returns the status and logs why).
@c(ot_session_new_with_settings) public func ot_session_new_with_settings(
    _ api_key: UnsafePointer<CChar>?, _ session_id: UnsafePointer<CChar>?,
    _ callbacks: UnsafePointer<ot_session_callbacks>?, _ settings: UnsafePointer<ot_session_settings>?
) -> UnsafeMutablePointer<ot_session>? {
    guard let key = CArg.string(api_key), !key.isEmpty, let sid = CArg.string(session_id), !sid.isEmpty, let callbacks else { return nil }
    let s: SessionSettings, poll: Bool
    switch sessionSettings(settings) {
    case .success(let v): (s, poll) = v
    case .failure(let e): Log.warn("capi", "ot_session_new_with_settings: \(e.message)"); return nil
    }
    let object = SessionObject(apiKey: key, sessionId: sid, settings: s, callbacks: callbacks.pointee, poll: poll)
    object.bits = HandleRegistry.shared.insert(object)
    return object.handle
}

/// Deletes a session: disconnects it, waits for its callback in flight (unless called from inside one)
/// and guarantees no callback of it fires after this returns.
@c(ot_session_delete) public func ot_session_delete(_ session: UnsafeMutablePointer<ot_session>?) -> ot_status {
    deleteObject(session, as: SessionObject.self) { $0.close() }
}

/// Starts connecting with a token; on_connected or on_error follows.
/// OT_ERR_ILLEGAL_STATE when already connected or connecting.
@c(ot_session_connect) public func ot_session_connect(_ session: UnsafeMutablePointer<ot_session>?, _ token: UnsafePointer<CChar>?) -> ot_status {
    withSession(session) { o in
        guard let t = CArg.string(token), !t.isEmpty else { return Status.invalidParam }
        try o.session.connect(token: t)
        return Status.ok
    }
}

/// Sets the end-to-end encryption secret (8–256 characters, UTF-8) used by the publishers and subscribers created
/// afterwards in this session; call it before publishing or subscribing (see docs/e2ee.md). Only end-to-end encrypted
/// sessions use it: there, publishing or subscribing without a secret fails with OT_ERR_ENCRYPTION_SECRET_MISSING,
/// and a subscriber whose publisher used another secret gets on_error with OT_ERR_ENCRYPTION_SECRET_MISMATCH.
/// OT_ERR_INVALID_ENCRYPTION_SECRET for a secret of another length (the previous secret stays).
@c(ot_session_set_encryption_secret) public func ot_session_set_encryption_secret(_ session: UnsafeMutablePointer<ot_session>?,
                                                                                _ secret: UnsafePointer<CChar>?) -> ot_status {
    withSession(session) { o in
        guard let s = CArg.string(secret) else { return Status.invalidParam }
        try o.session.setEncryptionSecret(s)
        return Status.ok
    }
}

/// Whether the session is end-to-end encrypted (as the server said on connect) into `encrypted`;
/// OT_ERR_NOT_CONNECTED before on_connected.
@c(ot_session_is_end_to_end_encrypted) public func ot_session_is_end_to_end_encrypted(_ session: UnsafeMutablePointer<ot_session>?,
                                                                                    _ encrypted: UnsafeMutablePointer<ot_bool>?) -> ot_status {
    withSession(session) { o in
        guard let encrypted else { return Status.invalidParam }
        guard o.session.status == .connected else { return Status.of(.notConnected) }
        encrypted.pointee = CArg.bool(o.session.isEndToEndEncrypted)
        return Status.ok
    }
}

/// Starts disconnecting; on_disconnected follows. OT_ERR_NOT_CONNECTED when not connected or connecting.
@c(ot_session_disconnect) public func ot_session_disconnect(_ session: UnsafeMutablePointer<ot_session>?) -> ot_status {
    withSession(session) { o in try o.session.disconnect(); return Status.ok }
}

/// The session's status (one of ot_session_status) into `status`.
@c(ot_session_get_status) public func ot_session_get_status(_ session: UnsafeMutablePointer<ot_session>?,
                                                          _ status: UnsafeMutablePointer<Int32>?) -> ot_status {
    withSession(session) { o in
        guard let status else { return Status.invalidParam }
        status.pointee = o.session.status.rawValue
        return Status.ok
    }
}

/// Whether the session is resuming a dropped connection (between on_reconnecting and on_reconnected or
/// on_disconnected) into `reconnecting`; the status stays OT_SESSION_CONNECTED meanwhile.
@c(ot_session_is_reconnecting) public func ot_session_is_reconnecting(_ session: UnsafeMutablePointer<ot_session>?,
                                                                    _ reconnecting: UnsafeMutablePointer<ot_bool>?) -> ot_status {
    withSession(session) { o in
        guard let reconnecting else { return Status.invalidParam }
        reconnecting.pointee = CArg.bool(o.session.isReconnecting)
        return Status.ok
    }
}

/// Copies the session id into `buf` (OT_ID_BUFFER_SIZE is always enough).
@c(ot_session_get_id) public func ot_session_get_id(_ session: UnsafeMutablePointer<ot_session>?,
                                                  _ buf: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withSession(session) { o in CArg.copy(o.session.sessionId, to: buf, size: size) }
}

/// This client's connection (owned by the session: valid until it is deleted or reconnects as another
/// connection), or NULL when not connected or the handle is bad.
@c(ot_session_get_connection) public func ot_session_get_connection(_ session: UnsafeMutablePointer<ot_session>?) -> UnsafePointer<ot_connection>? {
    guard let o = object(UnsafePointer(session), as: SessionObject.self).object, let h = o.connectionHandle() else { return nil }
    return UnsafePointer(h)
}

/// What the token's role allows; OT_ERR_NOT_CONNECTED before on_connected.
@c(ot_session_get_capabilities) public func ot_session_get_capabilities(_ session: UnsafeMutablePointer<ot_session>?,
                                                                      _ caps: UnsafeMutablePointer<ot_session_capabilities>?) -> ot_status {
    withSession(session) { o in
        guard let caps else { return Status.invalidParam }
        guard let c = o.session.capabilities else { return Status.of(.notConnected) }
        caps.pointee = ot_session_capabilities(can_publish: CArg.bool(c.canPublish), can_subscribe: CArg.bool(c.canSubscribe),
                                               can_force_mute: CArg.bool(c.canForceMute), can_force_disconnect: CArg.bool(c.canForceDisconnect))
        return Status.ok
    }
}

/// Sends a signal to every connection in the session (the sender included).
/// Checked before sending: OT_ERR_SIGNAL_TYPE_TOO_LONG (over 128), OT_ERR_INVALID_SIGNAL_TYPE (outside
/// [A-Za-z0-9_~-]), OT_ERR_SIGNAL_DATA_TOO_LONG (over 8192 bytes), OT_ERR_NOT_CONNECTED,
/// OT_ERR_FORCE_UNPUBLISH_OR_INVALID_STREAM when the role may not signal. NULL data means "".
@c(ot_session_send_signal) public func ot_session_send_signal(_ session: UnsafeMutablePointer<ot_session>?,
                                                            _ type: UnsafePointer<CChar>?, _ data: UnsafePointer<CChar>?) -> ot_status {
    ot_session_send_signal_to_connection(session, type, data, nil)
}

/// Sends a signal to one connection (NULL `to`: everyone); same checks as ot_session_send_signal. While the
/// session is reconnecting the signal is queued and sent once reconnected.
@c(ot_session_send_signal_to_connection) public func ot_session_send_signal_to_connection(
    _ session: UnsafeMutablePointer<ot_session>?, _ type: UnsafePointer<CChar>?, _ data: UnsafePointer<CChar>?,
    _ to: UnsafePointer<ot_connection>?
) -> ot_status {
    ot_session_send_signal_with_options(session, type, data, to, nil)
}

/// Fills `options` with the defaults: retry_after_reconnect true, no completion.
@c(ot_signal_options_default) public func ot_signal_options_default(_ options: UnsafeMutablePointer<ot_signal_options>?) -> ot_status {
    guard let options else { return Status.invalidParam }
    options.pointee = ot_signal_options(retry_after_reconnect: 1, on_complete: nil, user_data: nil)
    return Status.ok
}

/// Sends a signal to one connection (NULL `to`: everyone) with options (NULL: the defaults); same checks as
/// ot_session_send_signal. With `retry_after_reconnect` false, a signal made while the session is reconnecting
/// is refused with OT_ERR_NOT_CONNECTED instead of being queued. When OT_OK is returned and `on_complete` is set, it is
/// called once, in order with the session's callbacks, with the server's verdict: OT_OK, OT_ERR_ILLEGAL_STATE (rate
/// limit), OT_ERR_INVALID_PARAM (no such connection), OT_ERR_CONNECTION_DROPPED (lost with the connection) or
/// OT_ERR_NOT_CONNECTED (the session ended first).
@c(ot_session_send_signal_with_options) public func ot_session_send_signal_with_options(
    _ session: UnsafeMutablePointer<ot_session>?, _ type: UnsafePointer<CChar>?, _ data: UnsafePointer<CChar>?,
    _ to: UnsafePointer<ot_connection>?, _ options: UnsafePointer<ot_signal_options>?
) -> ot_status {
    withSession(session) { o in
        guard let t = CArg.string(type) else { return Status.invalidParam }
        let d = data == nil ? "" : CArg.string(data)
        guard let d else { return Status.invalidParam }
        var target: String? = nil
        if let to {
            guard let c = connectionObject(to) else { return Status.invalidHandle }
            target = c.info.id
        }
        let retry = options.map { $0.pointee.retry_after_reconnect != 0 } ?? true
        var completion: Session.Completion?
        if let opts = options?.pointee, let done = opts.on_complete {
            let ud = UnsafeSendable(opts.user_data)
            completion = { [weak o] err in
                o?.post { o in
                    (err?.message ?? "").withCString { m in done(o.handle, ud.value, err.map { ot_status($0.code.rawValue) } ?? Status.ok, m) }
                }
            }
        }
        try o.session.signal(type: t, data: d, to: target, retryAfterReconnect: retry, completion: completion)
        return Status.ok
    }
}

/// Mutes the audio of every stream but `excluded_stream_ids` (moderators only; this client's own stream included):
/// their publishers stop sending audio and get on_mute_forced; streams published while it is active start muted until
/// ot_session_disable_force_mute. Every client's session gets on_mute_forced (no stream id).
@c(ot_session_force_mute_all) public func ot_session_force_mute_all(_ session: UnsafeMutablePointer<ot_session>?,
                                                                  _ excluded_stream_ids: UnsafePointer<UnsafePointer<CChar>?>?,
                                                                  _ count: UInt) -> ot_status {
    withSession(session) { o in
        guard count == 0 || excluded_stream_ids != nil, count <= 100_000 else { return Status.invalidParam }
        var ids: [String] = []
        if let excluded_stream_ids {
            for i in 0..<Int(count) {
                guard let id = CArg.string(excluded_stream_ids[i]) else { return Status.invalidParam }
                ids.append(id)
            }
        }
        try o.session.forceMuteAll(excluding: ids)
        return Status.ok
    }
}

/// ot_session_force_mute_all with the excluded streams given as stream handles (borrowed or copies).
@c(ot_session_force_mute_all_streams) public func ot_session_force_mute_all_streams(_ session: UnsafeMutablePointer<ot_session>?,
                                                                                  _ excluded_streams: UnsafePointer<UnsafePointer<ot_stream>?>?,
                                                                                  _ count: UInt) -> ot_status {
    withSession(session) { o in
        guard count == 0 || excluded_streams != nil, count <= 100_000 else { return Status.invalidParam }
        var ids: [String] = []
        if let excluded_streams {
            for i in 0..<Int(count) {
                guard excluded_streams[i] != nil else { return Status.invalidParam }
                guard let st = streamObject(excluded_streams[i]) else { return Status.invalidHandle }
                ids.append(st.info.id)
            }
        }
        try o.session.forceMuteAll(excluding: ids)
        return Status.ok
    }
}

/// Mutes one stream's audio (moderators only): its publisher stops sending audio and gets on_mute_forced.
@c(ot_session_force_mute_stream) public func ot_session_force_mute_stream(_ session: UnsafeMutablePointer<ot_session>?,
                                                                        _ stream_id: UnsafePointer<CChar>?) -> ot_status {
    withSession(session) { o in
        guard let id = CArg.string(stream_id), !id.isEmpty else { return Status.invalidParam }
        try o.session.forceMuteStream(id)
        return Status.ok
    }
}

/// Ends a force mute of the whole session (moderators only).
@c(ot_session_disable_force_mute) public func ot_session_disable_force_mute(_ session: UnsafeMutablePointer<ot_session>?) -> ot_status {
    withSession(session) { o in try o.session.disableForceMute(); return Status.ok }
}

/// Disconnects another client (moderators only, else OT_ERR_UNABLE_TO_FORCE_DISCONNECT, 1520): it gets on_disconnected,
/// the others on_connection_destroyed. `connection` may be a stream's (ot_stream_get_connection), so a stream's owner is
/// reachable with connection events suppressed.
@c(ot_session_force_disconnect) public func ot_session_force_disconnect(_ session: UnsafeMutablePointer<ot_session>?,
                                                                      _ connection: UnsafePointer<ot_connection>?) -> ot_status {
    withSession(session) { o in
        guard let connection else { return Status.invalidParam }
        guard let c = connectionObject(connection) else { return Status.invalidHandle }
        try o.session.forceDisconnect(c.info.id)
        return Status.ok
    }
}

/// Reports an issue; copies into `issue_id` (OT_ID_BUFFER_SIZE is enough) the id the server logs it under.
@c(ot_session_report_issue) public func ot_session_report_issue(_ session: UnsafeMutablePointer<ot_session>?,
                                                              _ description: UnsafePointer<CChar>?,
                                                              _ issue_id: UnsafeMutablePointer<CChar>?, _ size: UInt) -> ot_status {
    withSession(session) { o in
        guard let d = CArg.string(description), issue_id != nil, size > 0 else { return Status.invalidParam }
        let id = try o.session.reportIssue(d)
        return CArg.copy(id, to: issue_id, size: size)
    }
}

// MARK: navigation

/// Copies handles of `infos` into `out` (up to `capacity`), the count into `count`: OT_ERR_BUFFER_TOO_SMALL (nothing
/// copied) when `capacity` is short; `out` may be NULL with capacity 0 to ask for the count.
private func copyHandles<T: AnyObject & Sendable, P>(_ objects: [T], as: P.Type, _ out: UnsafeMutablePointer<UnsafeMutablePointer<P>?>?,
                                                     _ capacity: UInt, _ count: UnsafeMutablePointer<UInt>?) -> ot_status {
    guard let count, capacity == 0 || out != nil else { return Status.invalidParam }
    count.pointee = UInt(objects.count)
    guard UInt(objects.count) <= capacity else { return Status.bufferTooSmall }
    for (i, o) in objects.enumerated() { out?[i] = Handle.pointer(HandleRegistry.shared.insert(o), as: P.self) }
    return Status.ok
}

/// The session's streams (as OTSession's `streams`): other clients' and this client's own (`ot_stream_info.own`), as
/// copies the caller releases with ot_stream_delete. `count` gets how many there are; with `capacity` short (or
/// `streams` NULL and capacity 0) nothing is copied and OT_ERR_BUFFER_TOO_SMALL (OT_OK when there are none) says so.
@c(ot_session_get_streams) public func ot_session_get_streams(_ session: UnsafeMutablePointer<ot_session>?,
                                                            _ streams: UnsafeMutablePointer<UnsafeMutablePointer<ot_stream>?>?,
                                                            _ capacity: UInt, _ count: UnsafeMutablePointer<UInt>?) -> ot_status {
    withSession(session) { o in
        let all = o.session.streams.values.sorted { ($0.creationTime, $0.id) < ($1.creationTime, $1.id) }
        return copyHandles(all.map(o.streamObject), as: ot_stream.self, streams, capacity, count)
    }
}

/// Other clients' connections (empty when connection events are suppressed: reach a stream's owner with
/// ot_stream_get_connection), as copies released with ot_connection_delete; counted and copied as ot_session_get_streams.
@c(ot_session_get_connections) public func ot_session_get_connections(_ session: UnsafeMutablePointer<ot_session>?,
                                                                    _ connections: UnsafeMutablePointer<UnsafeMutablePointer<ot_connection>?>?,
                                                                    _ capacity: UInt, _ count: UnsafeMutablePointer<UInt>?) -> ot_status {
    withSession(session) { o in
        let all = o.session.connections.values.sorted { ($0.creationTime, $0.id) < ($1.creationTime, $1.id) }
        return copyHandles(all.map(ConnectionObject.init), as: ot_connection.self, connections, capacity, count)
    }
}

/// Whether the session is relayed (media peer to peer) rather than routed (through the media router) into `relayed`;
/// OT_ERR_NOT_CONNECTED before on_connected.
@c(ot_session_is_relayed) public func ot_session_is_relayed(_ session: UnsafeMutablePointer<ot_session>?,
                                                          _ relayed: UnsafeMutablePointer<ot_bool>?) -> ot_status {
    withSession(session) { o in
        guard let relayed else { return Status.invalidParam }
        guard o.session.status == .connected else { return Status.of(.notConnected) }
        relayed.pointee = CArg.bool(o.session.isRelayed)
        return Status.ok
    }
}
