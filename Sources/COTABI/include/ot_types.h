/* Common types of the libotsession C ABI: status codes, booleans, log levels,
 * and the opaque handle types. Part of the generated public header
 * include/otsession.h (see tools/gen-header.py). */
#ifndef OT_TYPES_H
#define OT_TYPES_H

#include <stddef.h>
#include <stdint.h>

/** A boolean: 0 is false, anything else is true. */
typedef int ot_bool;
#define OT_FALSE 0
#define OT_TRUE 1

/** The result of a call: OT_OK or one of the error codes below. */
typedef int ot_status;

/** Status codes. Where OpenTok has a code for the same failure the number is
 * OpenTok's; codes from 9000 up are libotsession's own. */
enum ot_status_code {
    OT_OK = 0,
    OT_ERR_AUTHORIZATION_FAILURE = 1004,
    OT_ERR_INVALID_SESSION = 1005,
    OT_ERR_CONNECTION_FAILED = 1006,
    OT_ERR_NOT_CONNECTED = 1010,
    OT_ERR_INVALID_PARAM = 1011,
    OT_ERR_ILLEGAL_STATE = 1015,
    OT_ERR_CONNECTION_TIMED_OUT = 1021,
    OT_ERR_CONNECTION_DROPPED = 1022,
    OT_ERR_CONNECTION_REFUSED = 1023,
    OT_ERR_CONNECTION_LIMIT_EXCEEDED = 1027,
    /** The encryption secret is not 8 to 256 characters. */
    OT_ERR_INVALID_ENCRYPTION_SECRET = 1030,
    /** The session is end-to-end encrypted and no encryption secret is set. */
    OT_ERR_ENCRYPTION_SECRET_MISSING = 1031,
    OT_ERR_SUBSCRIBER_NOT_FOUND = 1112,
    OT_ERR_PUBLISHER_NOT_FOUND = 1113,
    OT_ERR_SIGNAL_DATA_TOO_LONG = 1413,
    OT_ERR_SIGNAL_TYPE_TOO_LONG = 1414,
    OT_ERR_INVALID_SIGNAL_TYPE = 1461,
    OT_ERR_UNABLE_TO_PUBLISH = 1500,
    /** A force disconnect was refused: not a moderator, or no such connection (OTSessionUnableToForceDisconnect). */
    OT_ERR_UNABLE_TO_FORCE_DISCONNECT = 1520,
    OT_ERR_FORCE_UNPUBLISH_OR_INVALID_STREAM = 1535,
    OT_ERR_PUBLISHER_TIMED_OUT = 1541,
    OT_ERR_SUBSCRIBER_TIMED_OUT = 1542,
    OT_ERR_SUBSCRIBER_WEBRTC = 1600,
    OT_ERR_SERVER_CANNOT_FIND_STREAM = 1604,
    OT_ERR_STREAM_LIMIT_EXCEEDED = 1605,
    OT_ERR_PUBLISHER_WEBRTC = 1610,
    /** A subscriber cannot decrypt the stream: the publisher's encryption secret differs. */
    OT_ERR_ENCRYPTION_SECRET_MISMATCH = 1620,
    OT_ERR_INTERNAL = 2000,
    /** A handle that is NULL's kin: never issued, already deleted, of another type, or borrowed and used after its
     * callback returned; also the `*_delete` of a handle the library lends (a callback's, ot_session_get_connection's). */
    OT_ERR_INVALID_HANDLE = 9001,
    /** A caller's buffer is too small; the function's documentation names a size that is always enough. */
    OT_ERR_BUFFER_TOO_SMALL = 9002,
    /** A capture or playout device could not be opened: no sound server, no such device (docs/devices.md). */
    OT_ERR_DEVICE_UNAVAILABLE = 9100,
    /** A capture or playout device in use vanished (unplugged, removed, the sound server gone). */
    OT_ERR_DEVICE_LOST = 9101,
    /** The server's TLS certificate was not accepted (https:// or wss:// server URL, turns: ICE server): not trusted
     * by the system store or ot_session_settings.tls_ca_file, expired, or for another host name. The message names
     * the reason. The library never falls back to a clear connection. */
    OT_ERR_TLS_CERTIFICATE_REJECTED = 9200
};

/** Log levels for ot_log_set_level. */
enum ot_log_level {
    OT_LOG_DISABLED = 0,
    OT_LOG_ERROR = 1,
    OT_LOG_WARN = 2,
    OT_LOG_INFO = 3,
    OT_LOG_DEBUG = 4,
    OT_LOG_TRACE = 5
};

/** Receives every log line at or above the current level, on the thread that logged it.
 * `message` is borrowed for the duration of the call. */
typedef void (*ot_log_callback)(int level, const char *message, void *user_data);

/* Opaque handles. Each is only ever used through a pointer; the library
 * checks every handle against its registry before use, and never issues the
 * same one twice: a handle that is deleted, or borrowed and used after its
 * callback returned, is refused (OT_ERR_INVALID_HANDLE, or NULL) rather than
 * undefined. A borrowed handle is valid until its callback returns; it cannot
 * be deleted (keep it with its *_copy). The definitions below exist for the
 * Swift importer only (so Swift sees typed pointers). */
#if defined(__swift__)
struct ot_server { char swift_import_only_; };
struct ot_session { char swift_import_only_; };
struct ot_publisher { char swift_import_only_; };
struct ot_subscriber { char swift_import_only_; };
struct ot_stream { char swift_import_only_; };
struct ot_connection { char swift_import_only_; };
struct ot_video_frame { char swift_import_only_; };
#endif
/** An embedded session server. */
typedef struct ot_server ot_server;
/** A session: the client side of one OpenTok session. */
typedef struct ot_session ot_session;
/** Publishes one stream of audio and video into a session. */
typedef struct ot_publisher ot_publisher;
/** Receives one stream of a session. */
typedef struct ot_subscriber ot_subscriber;
/** A stream in a session (borrowed in callbacks; keep with ot_stream_copy). */
typedef struct ot_stream ot_stream;
/** A client's connection to a session (borrowed in callbacks; keep with ot_connection_copy). */
typedef struct ot_connection ot_connection;
/** A video frame (borrowed in callbacks; keep with ot_video_frame_copy). */
typedef struct ot_video_frame ot_video_frame;

#endif /* OT_TYPES_H */
