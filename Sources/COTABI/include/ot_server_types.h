/* Types of the embedded session server API. */
#ifndef OT_SERVER_TYPES_H
#define OT_SERVER_TYPES_H

#include "ot_types.h"

/** Token formats for ot_token_new / ot_server_new_token. */
enum ot_token_format {
    OT_TOKEN_JWT = 0,
    OT_TOKEN_T1 = 1
};

/** Options of an embedded server (ot_server_new_with_options); start from ot_server_options_default().
 * Strings and the URL array are read during the call only. */
typedef struct ot_server_options {
    /** The address to listen on: IPv4, IPv6 ("::" for every interface) or "localhost"; NULL: 127.0.0.1. */
    const char *host;
    /** The port (0: any free port). */
    int32_t port;
    /** The project: key of 1 to 64 of [A-Za-z0-9_-], secret of 1 to 256 bytes. Required. */
    const char *api_key;
    const char *api_secret;
    /** TLS (HTTPS and WSS on the port, TLS 1.2 and 1.3): a PEM certificate chain (leaf first) and its key; both or
     * neither. ot_server_reload_tls reads them again. */
    const char *tls_cert_file;
    const char *tls_key_file;
    /** STUN/TURN URLs every client gets when it connects (stun:, turn:, turns:; ice_server_url_count of them). */
    const char *const *ice_server_urls;
    size_t ice_server_url_count;
    /** coturn's use-auth-secret secret: TURN credentials are minted per connection with it. Needed for turn: URLs. */
    const char *turn_secret;
    /** How long a connection's TURN credentials are valid, in seconds (60..2592000; default 86400). */
    int64_t turn_credential_ttl_s;
    /** The media router's address (NULL: host, or 127.0.0.1 for 0.0.0.0/::) and UDP port (0: any). */
    const char *media_host;
    int32_t media_port;
    /** 1:1 NAT: the IP clients are told for the media router (NULL: media_host). */
    const char *media_advertise;
    /** Media router workers: UDP sockets, each with its own IO thread (one per core); each session's media goes
     * through one of them, so a second worker helps only with more than one session (1..64; default 1; with
     * media_port P, worker i binds P + i). */
    int32_t media_workers;
} ot_server_options;

#endif /* OT_SERVER_TYPES_H */
