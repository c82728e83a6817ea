import COTABI
import OTSession

/// The object behind an `ot_stream *`: a stream's properties with C strings that live as long as it.
final class StreamObject: Sendable {
    let info: StreamInfo
    /// Published by this client.
    let own: Bool
    let id: OwnedCString, name: OwnedCString, connectionId: OwnedCString
    init(_ info: StreamInfo, own: Bool) {
        self.info = info
        self.own = own
        id = OwnedCString(info.id); name = OwnedCString(info.name); connectionId = OwnedCString(info.connectionId)
    }

    var videoType: Int32 {
        switch info.videoType {
        case "screen": Int32(OT_VIDEO_TYPE_SCREEN.rawValue)
        case "custom": Int32(OT_VIDEO_TYPE_CUSTOM.rawValue)
        default: Int32(OT_VIDEO_TYPE_CAMERA.rawValue)
        }
    }
}

/// The object behind an `ot_connection *`.
final class ConnectionObject: Sendable {
    let info: ConnectionInfo
    let id: OwnedCString, data: OwnedCString
    init(_ info: ConnectionInfo) { self.info = info; id = OwnedCString(info.id); data = OwnedCString(info.data) }
}

/// Registers an object for the duration of a callback (a borrowed handle: its `*_delete` is refused) and removes it
/// after, so that a use after the callback returned fails with OT_ERR_INVALID_HANDLE.
func withBorrowedHandle<T: AnyObject & Sendable, P>(_ object: T, as: P.Type, _ body: (UnsafeMutablePointer<P>?) -> Void) {
    let bits = HandleRegistry.shared.insert(object, lent: true)
    body(Handle.pointer(bits, as: P.self))
    HandleRegistry.shared.takeBack(bits)
}

func streamObject(_ p: UnsafePointer<ot_stream>?) -> StreamObject? { object(p, as: StreamObject.self).object }

func connectionObject(_ p: UnsafePointer<ot_connection>?) -> ConnectionObject? { object(p, as: ConnectionObject.self).object }

/// Fills `info` with the stream's properties (strings owned by the stream handle).
/// OT_ERR_INVALID_PARAM for NULL arguments, OT_ERR_INVALID_HANDLE for a stale or foreign handle.
@c(ot_stream_get_info) public func ot_stream_get_info(_ stream: UnsafePointer<ot_stream>?, _ info: UnsafeMutablePointer<ot_stream_info>?) -> ot_status {
    guard let stream, let info else { return Status.invalidParam }
    guard let s = streamObject(stream) else { return Status.invalidHandle }
    info.pointee = ot_stream_info(id: s.id.pointer, name: s.name.pointer, connection_id: s.connectionId.pointer,
                                  has_audio: CArg.bool(s.info.hasAudio), has_video: CArg.bool(s.info.hasVideo),
                                  video_type: s.videoType, width: Int32(clamping: s.info.width), height: Int32(clamping: s.info.height),
                                  creation_time: s.info.creationTime, audio_fallback_enabled: CArg.bool(s.info.audioFallbackEnabled),
                                  own: CArg.bool(s.own))
    return Status.ok
}

/// The stream's id (owned by the stream handle), or NULL for a bad handle.
@c(ot_stream_get_id) public func ot_stream_get_id(_ stream: UnsafePointer<ot_stream>?) -> UnsafePointer<CChar>? {
    streamObject(stream).map { UnsafePointer($0.id.pointer) }
}

/// A copy of a (borrowed) stream handle that stays valid until ot_stream_delete; NULL for a bad handle.
@c(ot_stream_copy) public func ot_stream_copy(_ stream: UnsafePointer<ot_stream>?) -> UnsafeMutablePointer<ot_stream>? {
    guard let s = streamObject(stream) else { return nil }
    return Handle.pointer(HandleRegistry.shared.insert(StreamObject(s.info, own: s.own)), as: ot_stream.self)
}

/// The connection that published the stream, with its data, into `connection`: a copy the caller releases with
/// ot_connection_delete. Known from the stream itself, so it works with connection events suppressed (signal or force
/// disconnect a stream's owner).
@c(ot_stream_get_connection) public func ot_stream_get_connection(_ stream: UnsafePointer<ot_stream>?,
                                                                _ connection: UnsafeMutablePointer<UnsafeMutablePointer<ot_connection>?>?) -> ot_status {
    guard let stream, let connection else { return Status.invalidParam }
    guard let s = streamObject(stream) else { return Status.invalidHandle }
    connection.pointee = Handle.pointer(HandleRegistry.shared.insert(ConnectionObject(s.info.connection)), as: ot_connection.self)
    return Status.ok
}

/// Releases a stream handle the caller was given to keep (ot_stream_copy, ot_session_get_streams, *_get_stream);
/// OT_ERR_INVALID_HANDLE for a borrowed one (it cannot be released: the library takes it back when its callback returns).
@c(ot_stream_delete) public func ot_stream_delete(_ stream: UnsafeMutablePointer<ot_stream>?) -> ot_status {
    removeObject(stream, as: StreamObject.self).status
}

/// Fills `info` with the connection's properties (strings owned by the connection handle).
@c(ot_connection_get_info) public func ot_connection_get_info(_ connection: UnsafePointer<ot_connection>?,
                                                            _ info: UnsafeMutablePointer<ot_connection_info>?) -> ot_status {
    guard let connection, let info else { return Status.invalidParam }
    guard let c = connectionObject(connection) else { return Status.invalidHandle }
    info.pointee = ot_connection_info(id: c.id.pointer, data: c.data.pointer, creation_time: c.info.creationTime)
    return Status.ok
}

/// The connection's id (owned by the connection handle), or NULL for a bad handle.
@c(ot_connection_get_id) public func ot_connection_get_id(_ connection: UnsafePointer<ot_connection>?) -> UnsafePointer<CChar>? {
    connectionObject(connection).map { UnsafePointer($0.id.pointer) }
}

/// A copy of a (borrowed) connection handle that stays valid until ot_connection_delete; NULL for a bad handle.
@c(ot_connection_copy) public func ot_connection_copy(_ connection: UnsafePointer<ot_connection>?) -> UnsafeMutablePointer<ot_connection>? {
    guard let c = connectionObject(connection) else { return nil }
    return Handle.pointer(HandleRegistry.shared.insert(ConnectionObject(c.info)), as: ot_connection.self)
}

/// Releases a connection handle the caller was given to keep (ot_connection_copy, ot_session_get_connections,
/// ot_stream_get_connection); OT_ERR_INVALID_HANDLE for a borrowed one or the session's own (ot_session_get_connection).
@c(ot_connection_delete) public func ot_connection_delete(_ connection: UnsafeMutablePointer<ot_connection>?) -> ot_status {
    removeObject(connection, as: ConnectionObject.self).status
}
