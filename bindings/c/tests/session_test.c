#define _POSIX_C_SOURCE 200809L
/* Sessions from C against the embedded server on loopback: connect, events,
 * capabilities, signals, validation codes, force disconnect, report issue,
 * and the callback rules (user_data, delete waits, delete from a callback). */
#include <otsession.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures = 0;
#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

typedef struct client {
    const char *name;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int connected, disconnected, errors, last_error;
    int connections_created, connections_destroyed;
    int signals;
    char last_signal[256];
    char last_from[OT_ID_BUFFER_SIZE];
    ot_connection *peer;   /* a kept copy of another client's connection */
    int delete_self_on_signal;
    ot_session *session;
    char statuses[64];     /* on_status_changed values in order, e.g. "21" */
    int completions, last_completion;
} client;

static void bump(client *c, int *field) {
    pthread_mutex_lock(&c->lock);
    (*field)++;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* Waits until *field >= want (or 10 s pass); returns whether it got there. */
static int wait_for(client *c, int *field, int want) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&c->lock);
    while (*field < want) {
        if (pthread_cond_timedwait(&c->changed, &c->lock, &deadline) != 0) break;
    }
    int ok = *field >= want;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static void on_connected(ot_session *s, void *ud) { client *c = ud; EXPECT(s == c->session); bump(c, &c->connected); }
static void on_disconnected(ot_session *s, void *ud) { (void)s; client *c = ud; bump(c, &c->disconnected); }
static void on_error(ot_session *s, void *ud, ot_status code, const char *message) {
    (void)s; client *c = ud;
    EXPECT(message != NULL && message[0] != 0);
    c->last_error = code;
    bump(c, &c->errors);
}
static void on_connection_created(ot_session *s, void *ud, const ot_connection *conn) {
    (void)s; client *c = ud;
    ot_connection_info info;
    EXPECT(ot_connection_get_info(conn, &info) == OT_OK);
    EXPECT(info.creation_time > 1700000000000LL);
    pthread_mutex_lock(&c->lock);
    if (!c->peer) c->peer = ot_connection_copy(conn);  /* kept beyond the callback */
    pthread_mutex_unlock(&c->lock);
    bump(c, &c->connections_created);
}
static void on_connection_destroyed(ot_session *s, void *ud, const ot_connection *conn) {
    (void)s; (void)conn; client *c = ud; bump(c, &c->connections_destroyed);
}
static void on_signal(ot_session *s, void *ud, const char *type, const char *data, const ot_connection *from) {
    client *c = ud;
    pthread_mutex_lock(&c->lock);
    snprintf(c->last_signal, sizeof c->last_signal, "%s:%s", type, data);
    const char *id = from ? ot_connection_get_id(from) : "";
    snprintf(c->last_from, sizeof c->last_from, "%s", id ? id : "?");
    pthread_mutex_unlock(&c->lock);
    if (c->delete_self_on_signal) {
        EXPECT(ot_session_delete(s) == OT_OK);    /* deleting from inside its own callback is safe */
        c->session = NULL;
    }
    bump(c, &c->signals);
}

static void on_status(ot_session *s, void *ud, int status) {
    (void)s; client *c = ud;
    pthread_mutex_lock(&c->lock);
    size_t n = strlen(c->statuses);
    if (n + 1 < sizeof c->statuses) { c->statuses[n] = (char)('0' + status); c->statuses[n + 1] = 0; }
    pthread_mutex_unlock(&c->lock);
}
static void on_signal_done(ot_session *s, void *ud, ot_status status, const char *message) {
    client *c = ud;
    EXPECT(s == c->session && message != NULL);
    c->last_completion = status;
    bump(c, &c->completions);
}

static ot_session *make_session(client *c, const char *api_key, const char *sid, const char *url) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    ot_session_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.on_connected = on_connected;
    cb.on_disconnected = on_disconnected;
    cb.on_error = on_error;
    cb.on_connection_created = on_connection_created;
    cb.on_connection_destroyed = on_connection_destroyed;
    cb.on_signal_received = on_signal;
    cb.on_status_changed = on_status;
    cb.user_data = c;
    ot_session_settings settings;
    EXPECT(ot_session_settings_default(&settings) == OT_OK);
    settings.server_url = url;
    c->session = ot_session_new_with_settings(api_key, sid, &cb, &settings);
    return c->session;
}

int main(void) {
    const char *key = "4700001", *secret = "0123456789abcdef0123456789abcdef";
    ot_server *server = ot_server_new("127.0.0.1", 0, key, secret);
    int32_t port = 0;
    EXPECT(ot_server_start(server, &port) == OT_OK && port > 0);
    char url[128], sid[OT_ID_BUFFER_SIZE], tok_mod[OT_TOKEN_BUFFER_SIZE], tok_pub[OT_TOKEN_BUFFER_SIZE], tok_sub[OT_TOKEN_BUFFER_SIZE];
    EXPECT(ot_server_get_url(server, url, sizeof url) == OT_OK);
    EXPECT(ot_server_create_session(server, OT_FALSE, sid, sizeof sid) == OT_OK);
    EXPECT(ot_server_new_token(server, sid, OT_ROLE_MODERATOR, "name=mod", OT_TOKEN_JWT, tok_mod, sizeof tok_mod) == OT_OK);
    EXPECT(ot_server_new_token(server, sid, OT_ROLE_PUBLISHER, "name=pub", OT_TOKEN_T1, tok_pub, sizeof tok_pub) == OT_OK);
    EXPECT(ot_server_new_token(server, sid, OT_ROLE_SUBSCRIBER, NULL, OT_TOKEN_JWT, tok_sub, sizeof tok_sub) == OT_OK);
    EXPECT(strncmp(tok_pub, "T1==", 4) == 0 && strncmp(tok_mod, "eyJ", 3) == 0);
    char tiny[4];
    EXPECT(ot_server_create_session(server, OT_FALSE, tiny, sizeof tiny) == OT_ERR_BUFFER_TOO_SMALL);

    static client mod, pub, sub, bad;
    make_session(&mod, key, sid, url);
    make_session(&pub, key, sid, url);
    make_session(&sub, key, sid, url);
    int32_t st = -1;
    EXPECT(ot_session_get_status(mod.session, &st) == OT_OK && st == OT_SESSION_NOT_CONNECTED);
    ot_session_capabilities caps;
    EXPECT(ot_session_get_capabilities(mod.session, &caps) == OT_ERR_NOT_CONNECTED);
    EXPECT(ot_session_send_signal(mod.session, "chat", "early") == OT_ERR_NOT_CONNECTED);

    EXPECT(ot_session_connect(mod.session, tok_mod) == OT_OK);
    EXPECT(ot_session_connect(mod.session, tok_mod) == OT_ERR_ILLEGAL_STATE);
    EXPECT(wait_for(&mod, &mod.connected, 1));
    EXPECT(ot_session_get_status(mod.session, &st) == OT_OK && st == OT_SESSION_CONNECTED);
    EXPECT(ot_session_get_capabilities(mod.session, &caps) == OT_OK && caps.can_force_disconnect && caps.can_force_mute && caps.can_publish);
    const ot_connection *me = ot_session_get_connection(mod.session);
    ot_connection_info info;
    EXPECT(me != NULL && ot_connection_get_info(me, &info) == OT_OK && strcmp(info.data, "name=mod") == 0);

    EXPECT(ot_session_connect(pub.session, tok_pub) == OT_OK);
    EXPECT(wait_for(&pub, &pub.connected, 1));
    EXPECT(wait_for(&mod, &mod.connections_created, 1));   /* mod sees pub join */
    EXPECT(wait_for(&pub, &pub.connections_created, 1));   /* pub sees mod, present at connect */
    EXPECT(ot_session_get_capabilities(pub.session, &caps) == OT_OK && caps.can_publish && !caps.can_force_disconnect);
    /* OTSessionUnableToForceDisconnect: not a moderator. */
    EXPECT(pub.peer != NULL && ot_session_force_disconnect(pub.session, pub.peer) == OT_ERR_UNABLE_TO_FORCE_DISCONNECT);

    EXPECT(ot_session_connect(sub.session, tok_sub) == OT_OK);
    EXPECT(wait_for(&sub, &sub.connected, 1));
    EXPECT(ot_session_get_capabilities(sub.session, &caps) == OT_OK && !caps.can_publish && caps.can_subscribe);
    EXPECT(ot_session_send_signal(sub.session, "chat", "x") == OT_ERR_FORCE_UNPUBLISH_OR_INVALID_STREAM);
    EXPECT(ot_session_force_mute_all(pub.session, NULL, 0) == OT_ERR_FORCE_UNPUBLISH_OR_INVALID_STREAM);

    /* Signal validation happens before anything is sent. */
    char long_type[200], big_data[9000];
    memset(long_type, 'a', sizeof long_type - 1); long_type[sizeof long_type - 1] = 0;
    memset(big_data, 'd', sizeof big_data - 1); big_data[sizeof big_data - 1] = 0;
    EXPECT(ot_session_send_signal(pub.session, long_type, "x") == OT_ERR_SIGNAL_TYPE_TOO_LONG);
    EXPECT(ot_session_send_signal(pub.session, "bad type!", "x") == OT_ERR_INVALID_SIGNAL_TYPE);
    EXPECT(ot_session_send_signal(pub.session, "chat", big_data) == OT_ERR_SIGNAL_DATA_TOO_LONG);
    EXPECT(ot_session_send_signal(pub.session, NULL, "x") == OT_ERR_INVALID_PARAM);
    ot_signal_options no_retry;
    EXPECT(ot_signal_options_default(&no_retry) == OT_OK);
    no_retry.retry_after_reconnect = OT_FALSE;
    ot_bool reconnecting = OT_TRUE;
    EXPECT(ot_session_is_reconnecting(pub.session, &reconnecting) == OT_OK && !reconnecting);
    EXPECT(ot_session_is_reconnecting(pub.session, NULL) == OT_ERR_INVALID_PARAM);
    /* Not reconnecting: the option changes nothing, the signal goes out (checked with the others below). */
    EXPECT(ot_session_send_signal_with_options(pub.session, "bad type!", "x", NULL, &no_retry) == OT_ERR_INVALID_SIGNAL_TYPE);
    EXPECT(ot_signal_options_default(NULL) == OT_ERR_INVALID_PARAM);

    /* A signal to everyone reaches the others with the sender's connection. */
    EXPECT(ot_session_send_signal(pub.session, "chat", "hello from C") == OT_OK);
    EXPECT(wait_for(&mod, &mod.signals, 1));
    EXPECT(wait_for(&sub, &sub.signals, 1));
    EXPECT(strcmp(mod.last_signal, "chat:hello from C") == 0);
    const ot_connection *pub_conn = ot_session_get_connection(pub.session);
    EXPECT(pub_conn && strcmp(mod.last_from, ot_connection_get_id(pub_conn)) == 0);

    /* A signal to one connection, then the receiver deletes its session from inside the callback. */
    ot_connection *sub_conn = ot_connection_copy(ot_session_get_connection(sub.session));
    EXPECT(sub_conn != NULL);
    int before_mod = mod.signals;
    sub.delete_self_on_signal = 1;
    EXPECT(ot_session_send_signal_to_connection(pub.session, "direct", "only sub", sub_conn) == OT_OK);
    EXPECT(wait_for(&sub, &sub.signals, 2));
    EXPECT(strcmp(sub.last_signal, "direct:only sub") == 0);
    EXPECT(sub.session == NULL);
    EXPECT(wait_for(&mod, &mod.connections_destroyed, 1));   /* sub's delete disconnected it */
    EXPECT(mod.signals == before_mod);                       /* the direct signal went to sub only */

    /* A signal's completion reports the server's verdict, in order with the session's callbacks: a refusal (sub's
     * connection is gone), then a success. */
    ot_signal_options done;
    EXPECT(ot_signal_options_default(&done) == OT_OK && done.on_complete == NULL);
    done.on_complete = on_signal_done;
    done.user_data = &pub;
    EXPECT(ot_session_send_signal_with_options(pub.session, "direct", "nobody", sub_conn, &done) == OT_OK);
    EXPECT(wait_for(&pub, &pub.completions, 1) && pub.last_completion == OT_ERR_INVALID_PARAM);
    EXPECT(ot_session_send_signal_with_options(pub.session, "chat", "all", NULL, &done) == OT_OK);
    EXPECT(wait_for(&pub, &pub.completions, 2) && pub.last_completion == OT_OK);
    EXPECT(ot_connection_delete(sub_conn) == OT_OK);

    /* Report issue gives an id. */
    char issue[OT_ID_BUFFER_SIZE];
    EXPECT(ot_session_report_issue(pub.session, "audio crackles", issue, sizeof issue) == OT_OK && strlen(issue) > 8);

    /* The moderator force-disconnects pub (using the connection copy kept from a callback). */
    EXPECT(mod.peer != NULL);
    EXPECT(ot_session_force_disconnect(mod.session, mod.peer) == OT_OK);
    EXPECT(wait_for(&pub, &pub.disconnected, 1));
    EXPECT(ot_session_get_status(pub.session, &st) == OT_OK && st == OT_SESSION_NOT_CONNECTED);
    EXPECT(ot_connection_delete(mod.peer) == OT_OK);
    EXPECT(ot_connection_delete(pub.peer) == OT_OK);
    /* Status changes, before the callbacks of each change: CONNECTING, CONNECTED, then NOT_CONNECTED. */
    pthread_mutex_lock(&pub.lock);
    EXPECT(strcmp(pub.statuses, "210") == 0);
    pthread_mutex_unlock(&pub.lock);

    /* A bad token is refused with the authorization failure code. */
    make_session(&bad, key, sid, url);
    EXPECT(ot_session_connect(bad.session, "T1==bogus") == OT_OK);
    EXPECT(wait_for(&bad, &bad.errors, 1) && bad.last_error == OT_ERR_AUTHORIZATION_FAILURE);

    /* Delete waits: after it returns no callback runs (the counters stay still). */
    EXPECT(ot_session_delete(mod.session) == OT_OK);
    int frozen = mod.connections_destroyed + mod.signals + mod.disconnected;
    EXPECT(ot_session_delete(pub.session) == OT_OK);
    EXPECT(ot_session_delete(bad.session) == OT_OK);
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    EXPECT(mod.connections_destroyed + mod.signals + mod.disconnected == frozen);
    EXPECT(ot_server_delete(server) == OT_OK);

    if (failures) { fprintf(stderr, "session_test: %d failed\n", failures); return 1; }
    printf("session_test: all passed\n");
    return 0;
}
