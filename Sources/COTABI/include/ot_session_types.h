/* Types of the session API: status values, settings, capabilities and the
 * callback struct that mirrors the session delegate's messages. */
#ifndef OT_SESSION_TYPES_H
#define OT_SESSION_TYPES_H

#include "ot_types.h"

/** A session's connection status (OTSessionConnectionStatus). */
enum ot_session_status {
    OT_SESSION_NOT_CONNECTED = 0,
    OT_SESSION_CONNECTED = 1,
    OT_SESSION_CONNECTING = 2,
    OT_SESSION_DISCONNECTING = 3,
    OT_SESSION_FAILED = 4
};

/** A connection's role, from the token it connected with. */
enum ot_role {
    OT_ROLE_SUBSCRIBER = 0,
    OT_ROLE_PUBLISHER = 1,
    OT_ROLE_PUBLISHER_ONLY = 2,
    OT_ROLE_MODERATOR = 3
};

/** A stream's video type. */
enum ot_video_type {
    OT_VIDEO_TYPE_CAMERA = 0,
    OT_VIDEO_TYPE_SCREEN = 1,
    OT_VIDEO_TYPE_CUSTOM = 2
};

/** Sizes of the buffers that ids and tokens are copied into: always enough. The longest token ot_token_new makes
 * (1000 characters of connection data, each up to 4 UTF-8 bytes, percent-encoded in a T1 token) is about 17 KB. */
#define OT_ID_BUFFER_SIZE 256
#define OT_TOKEN_BUFFER_SIZE 32768

/** A stream's properties. The strings belong to the ot_stream they were read
 * from and live as long as it does. */
typedef struct ot_stream_info {
    const char *id;
    const char *name;
    const char *connection_id;
    ot_bool has_audio;
    ot_bool has_video;
    /** One of ot_video_type. */
    int video_type;
    int width;
    int height;
    /** Milliseconds since 1970. */
    int64_t creation_time;
    /** Whether the publisher lets the stream's video be dropped for quality (audio fallback). */
    ot_bool audio_fallback_enabled;
    /** Published by this client (a stream of ot_session_get_streams, a publisher's, or a subscriber's own). */
    ot_bool own;
} ot_stream_info;

/** A connection's properties. The strings belong to the ot_connection they
 * were read from and live as long as it does. */
typedef struct ot_connection_info {
    const char *id;
    /** The token's connection data ("" when none). */
    const char *data;
    /** Milliseconds since 1970. */
    int64_t creation_time;
} ot_connection_info;

/** ICE transport policy (OTSessionICETransportPolicy). */
enum ot_ice_transport_policy {
    /** Host, server-reflexive and relayed candidates. */
    OT_ICE_TRANSPORT_ALL = 0,
    /** Relayed (TURN) candidates only; needs a turn: server. */
    OT_ICE_TRANSPORT_RELAY = 1
};

/** Which ICE servers are used (OTSessionICEIncludeServers). */
enum ot_ice_include_servers {
    /** The session server's (ot-server --ice-server, with per-connection TURN credentials) and the custom ones. */
    OT_ICE_INCLUDE_SERVERS_ALL = 0,
    /** Only the custom servers: the session server's are ignored. */
    OT_ICE_INCLUDE_SERVERS_CUSTOM = 1
};

/** A custom ICE server. `url`: "stun:HOST[:PORT]", "turn:HOST[:PORT][?transport=udp|tcp]" or
 * "turns:HOST[:PORT][?transport=tcp]" (TURN over TLS), HOST a DNS name (resolved off the IO threads), an IPv4
 * address or a bracketed IPv6 address; port 3478 by default, 5349 for turns:. username/credential (TURN) may be NULL. */
typedef struct ot_ice_server {
    const char *url;
    const char *username;
    const char *credential;
} ot_ice_server;

/** Where a session's callbacks (and its publisher's and subscribers') run, in one order. */
enum ot_callback_mode {
    /** On a library thread of the session's own. */
    OT_CALLBACK_THREAD = 0,
    /** On the thread that calls ot_poll (ot_poll_get_fd gives a file descriptor to watch). */
    OT_CALLBACK_POLL = 1
};

/** Options for ot_session_new_with_settings; start from ot_session_settings_default().
 * Strings and the ice_servers array are read during the call only. */
typedef struct ot_session_settings {
    /** The session server: "ws://", "wss://", "http://" or "https://" host[:port] (host: a name, IPv4, or [IPv6]).
     * NULL means ws://127.0.0.1:8080. With TLS the certificate is verified (see tls_ca_file). */
    const char *server_url;
    /** When true, no connection created/destroyed callbacks are made for other clients. */
    ot_bool connection_events_suppressed;
    /** Custom ICE servers (OTSessionICEConfig): `ice_server_count` entries, NULL when the count is 0. */
    const ot_ice_server *ice_servers;
    size_t ice_server_count;
    /** One of ot_ice_transport_policy. */
    int ice_transport_policy;
    /** One of ot_ice_include_servers. */
    int ice_include_servers;
    /** When true, host candidates with private/link-local addresses are not signalled. */
    ot_bool ice_filter_out_lan_candidates;
    /** How long connecting may take before on_error with OT_ERR_CONNECTION_TIMED_OUT (ms, 1..86400000; default 15000). */
    int64_t connect_timeout_ms;
    /** WebSocket keepalive interval (ms, 100..3600000; default 10000). */
    int64_t ping_interval_ms;
    /** One of ot_callback_mode (default OT_CALLBACK_THREAD). */
    int callback_mode;
    /** A PEM file of the CA certificates to trust for wss:// / https:// servers and turns: TURN servers, instead of
     * the system store (NULL). A certificate they do not vouch for, or for another host name, fails connecting with
     * OT_ERR_TLS_CERTIFICATE_REJECTED. */
    const char *tls_ca_file;
    /** An HTTP proxy, "http://[user:password@]host:port" (OTSessionSettings.proxyURL): signaling and TURN over
     * TCP/TLS go through its CONNECT tunnels. NULL: direct. */
    const char *proxy_url;
} ot_session_settings;

/** What the token's role allows (OTSessionCapabilities). */
typedef struct ot_session_capabilities {
    ot_bool can_publish;
    ot_bool can_subscribe;
    ot_bool can_force_mute;
    ot_bool can_force_disconnect;
} ot_session_capabilities;

/** What a force mute changed (OTMuteForcedInfo, with the stream concerned). Strings are borrowed for the callback. */
typedef struct ot_mute_forced_info {
    /** True when muting started (one stream or all), false when a mute all was disabled. */
    ot_bool active;
    /** The one stream muted (ot_session_force_mute_stream), or NULL for the whole session (mute all, or its end). */
    const char *stream_id;
    /** A mute all's excluded streams (they keep their audio): excluded_stream_count ids, NULL when none. */
    const char *const *excluded_stream_ids;
    size_t excluded_stream_count;
} ot_mute_forced_info;

/** The session's delegate messages. Every callback gets the session and the
 * struct's user_data; pointers it receives are borrowed until it returns.
 * Members left NULL are not called. */
typedef struct ot_session_callbacks {
    /** sessionDidConnect: the session is connected; ot_session_get_connection is available. */
    void (*on_connected)(ot_session *session, void *user_data);
    /** sessionDidDisconnect: the session is no longer connected. */
    void (*on_disconnected)(ot_session *session, void *user_data);
    /** session:didFailWithError: comes before on_disconnected when a connected session fails. */
    void (*on_error)(ot_session *session, void *user_data, ot_status code, const char *message);
    /** Another client joined (also for those present at connect, unless suppressed). */
    void (*on_connection_created)(ot_session *session, void *user_data, const ot_connection *connection);
    /** Another client left. */
    void (*on_connection_destroyed)(ot_session *session, void *user_data, const ot_connection *connection);
    /** A stream was published into the session. */
    void (*on_stream_created)(ot_session *session, void *user_data, const ot_stream *stream);
    /** A stream left the session. */
    void (*on_stream_destroyed)(ot_session *session, void *user_data, const ot_stream *stream);
    /** A stream started or stopped carrying audio. */
    void (*on_stream_has_audio_changed)(ot_session *session, void *user_data, const ot_stream *stream, ot_bool has_audio);
    /** A stream started or stopped carrying video. */
    void (*on_stream_has_video_changed)(ot_session *session, void *user_data, const ot_stream *stream, ot_bool has_video);
    /** A stream's video dimensions changed. */
    void (*on_stream_video_dimensions_changed)(ot_session *session, void *user_data, const ot_stream *stream, int width, int height);
    /** A signal arrived; `from` is NULL for a signal sent by the server (REST). */
    void (*on_signal_received)(ot_session *session, void *user_data, const char *type, const char *data, const ot_connection *from);
    /** A moderator muted one stream (info->stream_id), every stream but the excluded ones (stream_id NULL, active), or
     * ended a mute all (not active). The publishers concerned get their own on_mute_forced. */
    void (*on_mute_forced)(ot_session *session, void *user_data, const ot_mute_forced_info *info);
    /** sessionDidBeginReconnecting: the connection to the server dropped and is being resumed (the status stays
     * OT_SESSION_CONNECTED; ot_session_is_reconnecting is true). on_reconnected, or on_error (1022) then
     * on_disconnected, follows. */
    void (*on_reconnecting)(ot_session *session, void *user_data);
    /** sessionDidReconnect: resumed with the same connection; streams and connections that came or went meanwhile
     * follow as created/destroyed callbacks, and queued signals are sent. */
    void (*on_reconnected)(ot_session *session, void *user_data);
    /** The status (one of ot_session_status) changed; comes before the callbacks of the change (e.g. OT_SESSION_CONNECTED
     * before on_connected). */
    void (*on_status_changed)(ot_session *session, void *user_data, int status);
    /** The speaker (ot_session_set_speaker; `device_kind` OT_DEVICE_SPEAKER) failed: OT_ERR_DEVICE_UNAVAILABLE or
     * OT_ERR_DEVICE_LOST. Playout goes on, discarded, on the headless device. */
    void (*on_device_error)(ot_session *session, void *user_data, int device_kind, ot_status code, const char *message);
    void *user_data;
} ot_session_callbacks;

/** The server's verdict on a signal: OT_OK, or why it was refused. `message` is borrowed. */
typedef void (*ot_signal_completion)(ot_session *session, void *user_data, ot_status status, const char *message);

/** Options of ot_session_send_signal_with_options; start from ot_signal_options_default(). */
typedef struct ot_signal_options {
    /** Send a signal made while the session is reconnecting once it has reconnected (default true); when false,
     * such a signal is refused with OT_ERR_NOT_CONNECTED (retryAfterReconnect). */
    ot_bool retry_after_reconnect;
    /** Called once with the server's verdict, in order with the session's callbacks (NULL: not told). */
    ot_signal_completion on_complete;
    /** Passed to on_complete. */
    void *user_data;
} ot_signal_options;

#endif /* OT_SESSION_TYPES_H */
