#define _POSIX_C_SOURCE 200809L
/* 100 connect / publish / subscribe / unsubscribe / unpublish / disconnect / delete cycles from C, routed and
 * relayed, against the embedded server: every cycle must complete, and afterwards the process has no more open
 * file descriptors or threads than after a warm-up. The live heap is compared between an early and a late batch of
 * half the cycles each: caches filling up (warm-up) grow it in the early batch only, a leak grows it by the same
 * amount in every batch, so the late batch must not grow by as much as one block every other cycle.
 *
 * The heap is counted exactly by the allocation counter linked into this program (the repository's
 * Sources/COTAllocCounter/alloc_counter.c replaces malloc and friends), once idle threads have exited.
 * Then one cycle in each of two routed sessions of a server with two media workers, one session pinned to each.
 *
 *   ./cycles_test [cycles]
 */
#include <otsession.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long ot_alloc_live_bytes(void);
long long ot_alloc_live_blocks(void);

static int failures = 0;
#define EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

/* What one cycle's callbacks saw; the counters only grow, and waiters are woken on each change. */
typedef struct cycle {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int connected, disconnected, errors;
    int published, unpublished;      /* the publisher's stream created / destroyed */
    int seen, frames, sub_disconnected;
    ot_stream *stream;               /* the subscribing client's copy of the stream */
} cycle;

static void bump(cycle *c, int *field) {
    pthread_mutex_lock(&c->lock);
    (*field)++;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* Waits until *field >= want, or 15 s; returns whether it got there. */
static int wait_for(cycle *c, int *field, int want) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 15;
    pthread_mutex_lock(&c->lock);
    while (*field < want && pthread_cond_timedwait(&c->changed, &c->lock, &deadline) == 0) {}
    int ok = *field >= want;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static void on_connected(ot_session *s, void *ud) { (void)s; cycle *c = ud; bump(c, &c->connected); }
static void on_disconnected(ot_session *s, void *ud) { (void)s; cycle *c = ud; bump(c, &c->disconnected); }
static void on_error(ot_session *s, void *ud, ot_status code, const char *message) {
    (void)s; cycle *c = ud;
    fprintf(stderr, "session error %d: %s\n", code, message);
    bump(c, &c->errors);
}
static void on_stream_created(ot_session *s, void *ud, const ot_stream *stream) {
    (void)s; cycle *c = ud;
    pthread_mutex_lock(&c->lock);
    if (!c->stream) c->stream = ot_stream_copy(stream);
    pthread_mutex_unlock(&c->lock);
    bump(c, &c->seen);
}
static void on_published(ot_publisher *p, void *ud, const ot_stream *stream) { (void)p; (void)stream; cycle *c = ud; bump(c, &c->published); }
static void on_unpublished(ot_publisher *p, void *ud, const ot_stream *stream) { (void)p; (void)stream; cycle *c = ud; bump(c, &c->unpublished); }
static void on_frame(ot_subscriber *s, void *ud, const ot_video_frame *frame) { (void)s; (void)frame; cycle *c = ud; bump(c, &c->frames); }
static void on_sub_disconnected(ot_subscriber *s, void *ud) { (void)s; cycle *c = ud; bump(c, &c->sub_disconnected); }

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

typedef struct live { long long bytes, blocks; } live;

/* The live heap once idle: when the number of threads has not changed for 6 s (at most 30 s), idle worker threads
 * have exited (libdispatch's after 5 s) with their per-thread state and cached work items, some 200 blocks that
 * otherwise come and go with the number of threads; then the smallest of ten samples over half a second, so that
 * work still winding down is not counted. (All blocks are counted: subtracting libdispatch's cached continuations,
 * as counted by their tags, drifted by two blocks less every cycle, which would hide a leak of that size.) */
static live quiet_live(void) {
    int threads = count_entries("/proc/self/task"), stable_ms = 0;
    for (int waited = 0; stable_ms < 6000 && waited < 30000; waited += 250) {
        sleep_ms(250);
        int now = count_entries("/proc/self/task");
        stable_ms = now == threads ? stable_ms + 250 : 0;
        threads = now;
    }
    live best = {-1, -1};
    for (int i = 0; i < 10; i++) {
        live now = {ot_alloc_live_bytes(), ot_alloc_live_blocks()};
        if (best.bytes < 0 || now.bytes < best.bytes) best = now;
        sleep_ms(50);
    }
    return best;
}

/* One whole cycle; returns 0 when every step completed. */
static int run_cycle(ot_server *server, const char *url, const char *key, const char *sid) {
    char tok_a[OT_TOKEN_BUFFER_SIZE], tok_b[OT_TOKEN_BUFFER_SIZE];
    if (ot_server_new_token(server, sid, OT_ROLE_PUBLISHER, "name=a", OT_TOKEN_JWT, tok_a, sizeof tok_a) != OT_OK ||
        ot_server_new_token(server, sid, OT_ROLE_SUBSCRIBER, "name=b", OT_TOKEN_JWT, tok_b, sizeof tok_b) != OT_OK) return 1;
    cycle a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&a.lock, NULL); pthread_cond_init(&a.changed, NULL);
    pthread_mutex_init(&b.lock, NULL); pthread_cond_init(&b.changed, NULL);

    ot_session_settings settings;
    ot_session_settings_default(&settings);
    settings.server_url = url;
    ot_session_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.on_connected = on_connected;
    cb.on_disconnected = on_disconnected;
    cb.on_error = on_error;
    cb.on_stream_created = on_stream_created;
    cb.user_data = &a;
    ot_session *sa = ot_session_new_with_settings(key, sid, &cb, &settings);
    cb.user_data = &b;
    ot_session *sb = ot_session_new_with_settings(key, sid, &cb, &settings);
    int step = 0;
    ot_publisher *publisher = NULL;
    ot_subscriber *subscriber = NULL;
    if (!sa || !sb || ot_session_connect(sa, tok_a) != OT_OK || ot_session_connect(sb, tok_b) != OT_OK) goto done;
    step = 1;
    if (!wait_for(&a, &a.connected, 1) || !wait_for(&b, &b.connected, 1)) goto done;

    ot_publisher_settings ps;
    ot_publisher_settings_default(&ps);
    ps.name = "cycle";
    ps.width = 320;
    ps.height = 240;
    ps.audio_source = OT_AUDIO_SOURCE_TONE;
    ps.tone_hz = 440;
    ot_publisher_callbacks pcb;
    memset(&pcb, 0, sizeof pcb);
    pcb.on_stream_created = on_published;
    pcb.on_stream_destroyed = on_unpublished;
    pcb.user_data = &a;
    step = 2;
    if (!(publisher = ot_publisher_new(&ps, &pcb)) || ot_session_publish(sa, publisher) != OT_OK) goto done;
    step = 3;
    if (!wait_for(&a, &a.published, 1) || !wait_for(&b, &b.seen, 1)) goto done;

    ot_subscriber_callbacks scb;
    memset(&scb, 0, sizeof scb);
    scb.on_render_frame = on_frame;
    scb.on_disconnected = on_sub_disconnected;
    scb.user_data = &b;
    step = 4;
    if (!(subscriber = ot_subscriber_new(b.stream, &scb)) || ot_session_subscribe(sb, subscriber) != OT_OK) goto done;
    step = 5;
    if (!wait_for(&b, &b.frames, 3)) goto done;
    step = 6;
    if (ot_session_unsubscribe(sb, subscriber) != OT_OK) goto done;
    step = 7;
    if (ot_session_unpublish(sa, publisher) != OT_OK || !wait_for(&a, &a.unpublished, 1)) goto done;
    step = 8;
    if (ot_session_disconnect(sb) != OT_OK || ot_session_disconnect(sa) != OT_OK ||
        !wait_for(&a, &a.disconnected, 1) || !wait_for(&b, &b.disconnected, 1)) goto done;
    /* Neither the app's unsubscribe nor the session's end is a subscriber event (B's callbacks are in one order). */
    step = 9;
    if (b.sub_disconnected != 0) goto done;
    step = -1;
done:
    if (step >= 0) fprintf(stderr, "cycle stopped at step %d (frames %d, errors %d/%d)\n", step, b.frames, a.errors, b.errors);
    if (subscriber) ot_subscriber_delete(subscriber);
    if (publisher) ot_publisher_delete(publisher);
    if (sb) ot_session_delete(sb);
    if (sa) ot_session_delete(sa);
    if (b.stream) ot_stream_delete(b.stream);
    pthread_mutex_destroy(&a.lock); pthread_cond_destroy(&a.changed);
    pthread_mutex_destroy(&b.lock); pthread_cond_destroy(&b.changed);
    return step >= 0;
}

static void run_cycles(ot_server *server, const char *url, const char *key, int relayed, int count) {
    const char *kind = relayed ? "relayed" : "routed";
    char sid[OT_ID_BUFFER_SIZE];
    if (ot_server_create_session(server, relayed, sid, sizeof sid) != OT_OK) { EXPECT(0, "create %s session", kind); return; }
    for (int i = 0; i < 5; i++) EXPECT(run_cycle(server, url, key, sid) == 0, "%s warm-up cycle %d", kind, i + 1);
    sleep_ms(300);
    int fds = count_entries("/proc/self/fd"), threads = count_entries("/proc/self/task");
    /* The live heap after the warm-up, after the early batch and after the late batch. */
    const int batch = count / 2;
    live at[3];
    at[0] = quiet_live();
    for (int b = 1; b <= 2; b++) {
        for (int i = 0; i < batch; i++) {
            if (run_cycle(server, url, key, sid) != 0) { EXPECT(0, "%s cycle %d did not complete", kind, (b - 1) * batch + i + 1); return; }
        }
        for (int i = 0; i < 100 && (count_entries("/proc/self/fd") > fds + 2 || count_entries("/proc/self/task") > threads + 4); i++) sleep_ms(50);
        at[b] = quiet_live();
    }
    int fds_after = count_entries("/proc/self/fd"), threads_after = count_entries("/proc/self/task");
    live early = {at[1].bytes - at[0].bytes, at[1].blocks - at[0].blocks}, late = {at[2].bytes - at[1].bytes, at[2].blocks - at[1].blocks};
    printf("[figures] C %s: 2 x %d cycles; fds %d -> %d, threads %d -> %d; live heap growth, early batch %lld bytes %lld blocks, "
           "late batch %lld bytes %lld blocks\n", kind, batch, fds, fds_after, threads, threads_after,
           early.bytes, early.blocks, late.bytes, late.blocks);
    EXPECT(fds_after <= fds + 2, "%s: file descriptors %d -> %d", kind, fds, fds_after);
    EXPECT(threads_after <= threads + 4, "%s: threads %d -> %d", kind, threads, threads_after);
    /* Warm-up may grow the early batch (per-thread state of threads started meanwhile, caches; the Swift CyclesTests'
     * bound); the late batch grows by a leak's share only: one block per cycle would be `batch` blocks. */
    EXPECT(early.bytes <= 64 * 1024, "%s: live heap grew %lld bytes in the early batch", kind, early.bytes);
    EXPECT(late.blocks < batch / 2, "%s: live heap grew %lld blocks in the late batch of %d cycles (%lld in the early one)",
           kind, late.blocks, batch, early.blocks);
}

/* A server with two media workers: one routed session pinned to each carries a whole cycle (frames included). */
static void run_two_workers(const char *key, const char *secret) {
    ot_server_options o;
    ot_server_options_default(&o);
    o.api_key = key;
    o.api_secret = secret;
    o.media_workers = 2;
    ot_server *server = ot_server_new_with_options(&o);
    char url[128];
    if (!server || ot_server_start(server, NULL) != OT_OK || ot_server_get_url(server, url, sizeof url) != OT_OK) {
        EXPECT(0, "start a server with two media workers");
        if (server) ot_server_delete(server);
        return;
    }
    EXPECT(ot_server_get_session_placement(server, NULL, NULL, NULL) == OT_ERR_INVALID_PARAM, "placement of a NULL session id");
    EXPECT(ot_server_get_session_placement(NULL, "x", NULL, NULL) == OT_ERR_INVALID_PARAM, "placement on a NULL server");
    /* The server says which worker (and port) each session is placed on: create sessions until both are used. */
    char sids[2][OT_ID_BUFFER_SIZE] = {"", ""};
    int32_t ports[2] = {0, 0};
    for (int tries = 0; tries < 200 && (!sids[0][0] || !sids[1][0]); tries++) {
        char sid[OT_ID_BUFFER_SIZE];
        int32_t w = -1, port = 0;
        if (ot_server_create_session(server, 0, sid, sizeof sid) != OT_OK ||
            ot_server_get_session_placement(server, sid, &w, &port) != OT_OK || w < 0 || w > 1) {
            EXPECT(0, "the placement of session %s: worker %d", sid, (int)w);
            break;
        }
        if (!sids[w][0]) { strcpy(sids[w], sid); ports[w] = port; }
    }
    EXPECT(ports[0] > 0 && ports[1] > 0 && ports[0] != ports[1], "two workers' ports: %d, %d", (int)ports[0], (int)ports[1]);
    int carried = 0;
    for (int w = 0; w < 2; w++) {
        EXPECT(sids[w][0], "a session on worker %d", w);
        int ok = sids[w][0] && run_cycle(server, url, key, sids[w]) == 0;
        EXPECT(ok, "the session on media worker %d", w);
        carried += ok;
    }
    printf("C two media workers: %d of 2 routed sessions (one per worker) carried frames\n", carried);
    ot_server_delete(server);
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 100;
    const char *key = "4700002", *secret = "00112233445566778899aabbccddeeff";
    ot_server *server = ot_server_new("127.0.0.1", 0, key, secret);
    char url[128];
    if (!server || ot_server_start(server, NULL) != OT_OK || ot_server_get_url(server, url, sizeof url) != OT_OK) {
        fprintf(stderr, "could not start the embedded server\n");
        return 1;
    }
    run_cycles(server, url, key, 0, count);
    run_cycles(server, url, key, 1, count);
    ot_server_delete(server);
    run_two_workers(key, secret);
    printf("%s: cycles_test\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
