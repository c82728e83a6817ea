#define _POSIX_C_SOURCE 200809L
/* One session's callbacks (its own, its publisher's, its subscribers') come in one order, one at a time: on a
 * library thread (OT_CALLBACK_THREAD) or, in poll mode, on this program's only thread inside ot_poll, woken by
 * ot_poll_get_fd. The poll-mode run creates no thread and takes no lock: every callback runs inside ot_poll.
 *
 * The scenario, in a routed session on the embedded server: a moderator M and a client A connect and publish a tone
 * (publishing from inside on_connected); M subscribes to A's stream from inside on_stream_created; M mutes all: both
 * publishers get on_mute_forced after their session's, stop sending audio (M's subscriber receives no more audio
 * packets), and read publish_audio false; a publisher L that joins meanwhile starts muted; after the mute is disabled
 * a new publisher keeps its audio. Session navigation is checked on the way (streams with the own one flagged, a
 * subscriber's stream, a stream's connection with its data, relayed or routed). */
#include <otsession.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures = 0;
#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static int poll_mode;
static pthread_t main_thread;
static int inside_poll;                 /* poll mode: set while ot_poll runs */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;   /* thread mode only */

#define MAX_LOG 4096
/* One client's callbacks in the order they came, with the thread each came on. */
typedef struct client {
    const char *name;
    ot_session *session;
    ot_publisher *publisher;
    ot_subscriber *subscriber;
    const char *token;
    int in_callback;                    /* >1 would mean two callbacks of one session at once */
    int overlaps, off_thread;
    char log[MAX_LOG];
    int connected, stream_created, published, unpublished, sub_connected, session_muted, publisher_muted, disabled;
    int publish_on_connect, subscribe_on_stream;
    ot_stream *seen_stream;             /* a copy of the first other stream seen */
    char muted_stream[OT_ID_BUFFER_SIZE];   /* the stream id of the last session on_mute_forced ("" for a mute all) */
} client;

static void enter(client *c, const char *what) {
    if (!poll_mode) pthread_mutex_lock(&lock);
    if (poll_mode) {
        if (!inside_poll || !pthread_equal(pthread_self(), main_thread)) c->off_thread++;
    } else {
        if (pthread_equal(pthread_self(), main_thread)) c->off_thread++;
    }
    if (++c->in_callback > 1) c->overlaps++;
    if (strlen(c->log) + strlen(what) + 2 < MAX_LOG) { strcat(c->log, what); strcat(c->log, " "); }
    if (!poll_mode) pthread_mutex_unlock(&lock);
}
static void leave(client *c) {
    if (!poll_mode) pthread_mutex_lock(&lock);
    c->in_callback--;
    if (!poll_mode) pthread_mutex_unlock(&lock);
}
/* Reads an int field written by callbacks. */
static int get(int *field) {
    if (!poll_mode) pthread_mutex_lock(&lock);
    int v = *field;
    if (!poll_mode) pthread_mutex_unlock(&lock);
    return v;
}
/* Position of `what` in a client's log (-1 if absent). */
static int pos(client *c, const char *what) {
    if (!poll_mode) pthread_mutex_lock(&lock);
    const char *p = strstr(c->log, what);
    int r = p ? (int)(p - c->log) : -1;
    if (!poll_mode) pthread_mutex_unlock(&lock);
    return r;
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Lets callbacks run for up to `ms`: poll mode waits on the library's fd and runs them here. */
static void pump(int ms) {
    if (poll_mode) {
        int fd = -1;
        EXPECT(ot_poll_get_fd(&fd) == OT_OK && fd >= 0);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, ms) > 0) {
            size_t ran = 0;
            inside_poll = 1;
            EXPECT(ot_poll(0, &ran) == OT_OK);
            inside_poll = 0;
        }
    } else {
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
}

/* Pumps until *field >= want (20 s at most). */
static int wait_for(int *field, int want) {
    long long end = now_ms() + 20000;
    while (get(field) < want && now_ms() < end) pump(20);
    return get(field) >= want;
}

static ot_publisher_callbacks publisher_callbacks(client *c);
static ot_subscriber_callbacks subscriber_callbacks;
static ot_subscriber_settings subscriber_settings;

/* Session callbacks. */
static void on_connected(ot_session *s, void *ud) {
    client *c = ud;
    enter(c, "session.connected");
    c->connected++;
    if (c->publish_on_connect) EXPECT(ot_session_publish(s, c->publisher) == OT_OK);   /* the API from a callback */
    leave(c);
}
static void on_stream_created(ot_session *s, void *ud, const ot_stream *stream) {
    client *c = ud;
    enter(c, "session.streamCreated");
    ot_stream_info info;
    EXPECT(ot_stream_get_info(stream, &info) == OT_OK && !info.own);
    if (!c->seen_stream) {
        c->seen_stream = ot_stream_copy(stream);
        if (c->subscribe_on_stream) {   /* subscribing from inside a callback */
            c->subscriber = ot_subscriber_new_with_settings(stream, &subscriber_settings, &subscriber_callbacks);
            EXPECT(c->subscriber != NULL && ot_session_subscribe(s, c->subscriber) == OT_OK);
        }
    }
    c->stream_created++;
    leave(c);
}
static void on_session_mute(ot_session *s, void *ud, const ot_mute_forced_info *info) {
    (void)s; client *c = ud;
    enter(c, info->active ? "session.muteForced" : "session.muteDisabled");
    snprintf(c->muted_stream, sizeof c->muted_stream, "%s", info->stream_id ? info->stream_id : "");
    if (info->active) c->session_muted++; else c->disabled++;
    leave(c);
}
static void on_status(ot_session *s, void *ud, int status) {
    (void)s; client *c = ud;
    char what[32];
    snprintf(what, sizeof what, "status.%d", status);
    enter(c, what);
    leave(c);
}
static void on_disconnected(ot_session *s, void *ud) { (void)s; client *c = ud; enter(c, "session.disconnected"); leave(c); }

/* Publisher callbacks. */
static void on_published(ot_publisher *p, void *ud, const ot_stream *stream) {
    (void)p; client *c = ud;
    enter(c, "publisher.streamCreated");
    ot_stream_info info;
    EXPECT(ot_stream_get_info(stream, &info) == OT_OK && info.own);
    c->published++;
    leave(c);
}
static void on_unpublished(ot_publisher *p, void *ud, const ot_stream *stream) {
    (void)p; (void)stream; client *c = ud; enter(c, "publisher.streamDestroyed"); c->unpublished++; leave(c);
}
static void on_publisher_mute(ot_publisher *p, void *ud, ot_bool active) {
    client *c = ud;
    enter(c, "publisher.muteForced");
    EXPECT(active);
    ot_bool on = 1;
    EXPECT(ot_publisher_get_publish_audio(p, &on) == OT_OK && !on);   /* publish_audio tells what is sent */
    c->publisher_muted++;
    leave(c);
}
static ot_publisher_callbacks publisher_callbacks(client *c) {
    ot_publisher_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.on_stream_created = on_published;
    cb.on_stream_destroyed = on_unpublished;
    cb.on_mute_forced = on_publisher_mute;
    cb.user_data = c;
    return cb;
}

/* Subscriber callbacks. */
static void on_sub_connected(ot_subscriber *s, void *ud, const ot_stream *stream) {
    (void)s; (void)stream; client *c = ud; enter(c, "subscriber.connected"); c->sub_connected++; leave(c);
}
static void on_sub_disconnected(ot_subscriber *s, void *ud) { (void)s; client *c = ud; enter(c, "subscriber.disconnected"); leave(c); }

static ot_publisher *tone_publisher(client *c, const char *name) {
    ot_publisher_settings ps;
    EXPECT(ot_publisher_settings_default(&ps) == OT_OK);
    ps.name = name;
    ps.width = 160; ps.height = 120; ps.fps = 10;
    ps.start_bitrate_kbps = 150;
    ps.audio_source = OT_AUDIO_SOURCE_TONE;
    ot_publisher_callbacks pcb = publisher_callbacks(c);
    ot_publisher *p = ot_publisher_new(&ps, &pcb);
    EXPECT(p != NULL);
    return p;
}

static void make_client(client *c, const char *name, const char *key, const char *sid, const char *url, const char *token) {
    memset(c, 0, sizeof *c);
    c->name = name;
    c->token = token;
    ot_session_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.on_connected = on_connected;
    cb.on_disconnected = on_disconnected;
    cb.on_stream_created = on_stream_created;
    cb.on_mute_forced = on_session_mute;
    cb.on_status_changed = on_status;
    cb.user_data = c;
    ot_session_settings settings;
    EXPECT(ot_session_settings_default(&settings) == OT_OK);
    settings.server_url = url;
    settings.callback_mode = poll_mode ? OT_CALLBACK_POLL : OT_CALLBACK_THREAD;
    c->session = ot_session_new_with_settings(key, sid, &cb, &settings);
    EXPECT(c->session != NULL);
}

/* Audio packets M's subscriber received. */
static long long audio_packets(ot_subscriber *s) {
    ot_subscriber_stats st;
    return ot_subscriber_get_stats(s, &st) == OT_OK ? st.audio_packets_received : -1;
}

/* Pumps until the subscriber's audio packets stay still for 600 ms (10 s at most). */
static int audio_stops(ot_subscriber *s) {
    long long end = now_ms() + 10000, last = audio_packets(s), since = now_ms();
    while (now_ms() < end) {
        pump(50);
        long long n = audio_packets(s);
        if (n != last) { last = n; since = now_ms(); } else if (now_ms() - since >= 600) return 1;
    }
    return 0;
}

static int grows(long long (*f)(ot_subscriber *), ot_subscriber *s, long long by) {
    long long start = f(s), end = now_ms() + 10000;
    while (f(s) < start + by && now_ms() < end) pump(50);
    return f(s) >= start + by;
}

static long long video_packets(ot_subscriber *s) {
    ot_subscriber_stats st;
    return ot_subscriber_get_stats(s, &st) == OT_OK ? st.video_packets_received : -1;
}

static void run(ot_server *server, const char *key, const char *url) {
    char sid[OT_ID_BUFFER_SIZE], tok_m[OT_TOKEN_BUFFER_SIZE], tok_a[OT_TOKEN_BUFFER_SIZE], tok_l[OT_TOKEN_BUFFER_SIZE];
    EXPECT(ot_server_create_session(server, OT_FALSE, sid, sizeof sid) == OT_OK);
    EXPECT(ot_server_new_token(server, sid, OT_ROLE_MODERATOR, "name=m", OT_TOKEN_JWT, tok_m, sizeof tok_m) == OT_OK);
    EXPECT(ot_server_new_token(server, sid, OT_ROLE_PUBLISHER, "name=a", OT_TOKEN_JWT, tok_a, sizeof tok_a) == OT_OK);
    EXPECT(ot_server_new_token(server, sid, OT_ROLE_PUBLISHER, "name=l", OT_TOKEN_JWT, tok_l, sizeof tok_l) == OT_OK);
    static client m, a, l;
    make_client(&m, "M", key, sid, url, tok_m);
    make_client(&a, "A", key, sid, url, tok_a);
    m.publisher = tone_publisher(&m, "m");
    a.publisher = tone_publisher(&a, "a");
    m.publish_on_connect = a.publish_on_connect = 1;
    m.subscribe_on_stream = 1;
    memset(&subscriber_callbacks, 0, sizeof subscriber_callbacks);
    subscriber_callbacks.on_connected = on_sub_connected;
    subscriber_callbacks.on_disconnected = on_sub_disconnected;
    subscriber_callbacks.user_data = &m;
    EXPECT(ot_subscriber_settings_default(&subscriber_settings) == OT_OK);
    subscriber_settings.play_audio = OT_FALSE;
    EXPECT(ot_session_connect(m.session, tok_m) == OT_OK);
    EXPECT(wait_for(&m.published, 1));
    EXPECT(ot_session_connect(a.session, tok_a) == OT_OK);
    EXPECT(wait_for(&a.published, 1));
    EXPECT(wait_for(&m.stream_created, 1));

    /* Navigation: M's streams are A's and its own (flagged); A's stream names A's connection with its data. */
    ot_bool relayed = OT_TRUE;
    EXPECT(ot_session_is_relayed(m.session, &relayed) == OT_OK && !relayed);
    size_t n = 0;
    EXPECT(ot_session_get_streams(m.session, NULL, 0, &n) == OT_ERR_BUFFER_TOO_SMALL && n == 2);
    ot_stream *streams[4] = {0};
    EXPECT(ot_session_get_streams(m.session, streams, 4, &n) == OT_OK && n == 2);
    int own = 0, others = 0;
    for (size_t i = 0; i < n && i < 4; i++) {
        ot_stream_info info;
        EXPECT(ot_stream_get_info(streams[i], &info) == OT_OK);
        if (info.own) own++; else others++;
        ot_connection *conn = NULL;
        EXPECT(ot_stream_get_connection(streams[i], &conn) == OT_OK && conn != NULL);
        ot_connection_info ci;
        EXPECT(ot_connection_get_info(conn, &ci) == OT_OK);
        EXPECT(strcmp(ci.data, info.own ? "name=m" : "name=a") == 0);
        EXPECT(strcmp(ci.id, info.connection_id) == 0);
        EXPECT(ot_connection_delete(conn) == OT_OK);
        EXPECT(ot_stream_delete(streams[i]) == OT_OK);
    }
    EXPECT(own == 1 && others == 1);
    size_t nconn = 0;
    ot_connection *conns[4];
    EXPECT(ot_session_get_connections(m.session, conns, 4, &nconn) == OT_OK && nconn == 1);
    if (nconn == 1) EXPECT(ot_connection_delete(conns[0]) == OT_OK);

    /* M subscribed to A's stream from inside on_stream_created. */
    ot_subscriber_settings bad = subscriber_settings;
    bad.quality_loss_threshold = 2;
    EXPECT(ot_subscriber_new_with_settings(m.seen_stream, &bad, &subscriber_callbacks) == NULL);   /* out of range */
    EXPECT(wait_for(&m.sub_connected, 1));
    ot_stream *sub_stream = NULL;
    EXPECT(ot_subscriber_get_stream(m.subscriber, &sub_stream) == OT_OK && sub_stream != NULL);
    if (sub_stream) {
        ot_stream_info info;
        EXPECT(ot_stream_get_info(sub_stream, &info) == OT_OK && !info.own && strcmp(info.name, "a") == 0);
        EXPECT(ot_stream_delete(sub_stream) == OT_OK);
    }
    EXPECT(grows(audio_packets, m.subscriber, 20));

    /* Mute all: the session's message, then its publisher's; audio stops at the subscriber, video goes on. */
    EXPECT(ot_session_force_mute_all_streams(m.session, NULL, 0) == OT_OK);
    EXPECT(wait_for(&m.publisher_muted, 1));
    EXPECT(wait_for(&a.publisher_muted, 1));
    EXPECT(pos(&m, "session.muteForced") >= 0 && pos(&m, "session.muteForced") < pos(&m, "publisher.muteForced"));
    EXPECT(pos(&a, "session.muteForced") >= 0 && pos(&a, "session.muteForced") < pos(&a, "publisher.muteForced"));
    if (!poll_mode) pthread_mutex_lock(&lock);
    EXPECT(a.muted_stream[0] == 0);   /* a mute all names no stream */
    if (!poll_mode) pthread_mutex_unlock(&lock);
    EXPECT(audio_stops(m.subscriber));
    EXPECT(grows(video_packets, m.subscriber, 20));
    ot_bool on = 1;
    EXPECT(ot_publisher_get_publish_audio(a.publisher, &on) == OT_OK && !on);
    EXPECT(ot_publisher_get_publish_video(a.publisher, &on) == OT_OK && on);

    /* A publisher that joins during the mute starts muted. */
    make_client(&l, "L", key, sid, url, tok_l);
    l.publisher = tone_publisher(&l, "l");
    l.publish_on_connect = 1;
    EXPECT(ot_session_connect(l.session, tok_l) == OT_OK);
    EXPECT(wait_for(&l.published, 1));
    EXPECT(wait_for(&l.publisher_muted, 1));
    EXPECT(ot_publisher_get_publish_audio(l.publisher, &on) == OT_OK && !on);

    /* Disabled: a new publisher keeps its audio; the muted one unmutes itself. */
    EXPECT(ot_session_disable_force_mute(m.session) == OT_OK);
    EXPECT(wait_for(&l.disabled, 1));
    EXPECT(ot_session_unpublish(l.session, l.publisher) == OT_OK);
    EXPECT(wait_for(&l.unpublished, 1));
    ot_publisher *fresh = tone_publisher(&l, "fresh");
    EXPECT(ot_session_publish(l.session, fresh) == OT_OK);
    EXPECT(wait_for(&l.published, 2));
    EXPECT(ot_publisher_get_publish_audio(fresh, &on) == OT_OK && on);
    EXPECT(get(&l.publisher_muted) == 1);
    EXPECT(ot_publisher_set_publish_audio(a.publisher, OT_TRUE) == OT_OK);
    EXPECT(grows(audio_packets, m.subscriber, 20));

    /* One stream's mute names it, and mutes its publisher only. */
    EXPECT(ot_session_force_mute_stream(m.session, ot_stream_get_id(m.seen_stream)) == OT_OK);
    EXPECT(wait_for(&a.publisher_muted, 2));
    if (!poll_mode) pthread_mutex_lock(&lock);
    EXPECT(strcmp(a.muted_stream, ot_stream_get_id(m.seen_stream)) == 0);
    if (!poll_mode) pthread_mutex_unlock(&lock);
    EXPECT(ot_publisher_get_publish_audio(a.publisher, &on) == OT_OK && !on);
    EXPECT(ot_publisher_get_publish_audio(fresh, &on) == OT_OK && on);
    EXPECT(audio_stops(m.subscriber));

    /* The end: the publisher's stream ends before its session's last message; no subscriber callback. */
    EXPECT(ot_session_disconnect(m.session) == OT_OK);
    long long end = now_ms() + 15000;
    while (pos(&m, "session.disconnected") < 0 && now_ms() < end) pump(20);
    EXPECT(pos(&m, "publisher.streamDestroyed") >= 0 && pos(&m, "publisher.streamDestroyed") < pos(&m, "session.disconnected"));
    EXPECT(pos(&m, "subscriber.disconnected") < 0);
    EXPECT(pos(&m, "status.1") < pos(&m, "session.connected"));   /* CONNECTED before on_connected */

    client *all[] = {&m, &a, &l};
    for (int i = 0; i < 3; i++) {
        if (all[i]->overlaps) fprintf(stderr, "%s: %d callbacks overlapped\n", all[i]->name, all[i]->overlaps);
        EXPECT(all[i]->overlaps == 0);         /* one at a time */
        EXPECT(all[i]->off_thread == 0);       /* poll: all inside ot_poll here; thread: none on this thread */
    }
    if (m.subscriber) EXPECT(ot_subscriber_delete(m.subscriber) == OT_OK);
    EXPECT(ot_publisher_delete(fresh) == OT_OK);
    for (int i = 0; i < 3; i++) {
        EXPECT(ot_publisher_delete(all[i]->publisher) == OT_OK);
        EXPECT(ot_session_delete(all[i]->session) == OT_OK);
        if (all[i]->seen_stream) EXPECT(ot_stream_delete(all[i]->seen_stream) == OT_OK);
    }
    pump(50);   /* anything queued for deleted objects is skipped */
}

int main(void) {
    const char *key = "4700003", *secret = "0123456789abcdef0123456789abcdef";
    main_thread = pthread_self();
    ot_server *server = ot_server_new("127.0.0.1", 0, key, secret);
    int32_t port = 0;
    EXPECT(ot_server_start(server, &port) == OT_OK && port > 0);
    char url[128];
    EXPECT(ot_server_get_url(server, url, sizeof url) == OT_OK);
    EXPECT(ot_poll(-2, NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_poll_get_fd(NULL) == OT_ERR_INVALID_PARAM);
    poll_mode = 1;
    run(server, key, url);
    poll_mode = 0;
    run(server, key, url);
    EXPECT(ot_server_delete(server) == OT_OK);
    if (failures) { fprintf(stderr, "ordering_test: %d failed\n", failures); return 1; }
    printf("ordering_test: all passed (poll and thread modes)\n");
    return 0;
}
