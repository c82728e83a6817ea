/* Publishes the built-in test pattern and a tone from one client and
 * subscribes to it from another, through an embedded server on loopback.
 * Prints what the subscriber receives and exits 0 when frames arrived in order.
 *
 *   ./publish_subscribe [seconds] [routed|relayed]
 */
#define _POSIX_C_SOURCE 200809L
#include <otsession.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct app {
    pthread_mutex_t lock;
    ot_session *sub_session;
    ot_subscriber *subscriber;
    int connected_clients;
    long frames, audio_chunks, in_order, stamped;
    uint32_t last_number;
    int64_t latency_sum_us;
    int width, height;
} app;

static void on_sub_connected(ot_subscriber *s, void *ud, const ot_stream *stream) {
    (void)s; (void)ud;
    ot_stream_info info;
    if (ot_stream_get_info(stream, &info) == OT_OK) printf("subscriber: connected to stream %s (\"%s\")\n", info.id, info.name);
}

static void on_frame(ot_subscriber *s, void *ud, const ot_video_frame *frame) {
    (void)s;
    app *a = ud;
    ot_video_frame_info info;
    uint32_t number;
    int64_t captured;
    if (ot_video_frame_get_info(frame, &info) != OT_OK) return;
    pthread_mutex_lock(&a->lock);
    a->frames++;
    a->width = info.width;
    a->height = info.height;
    if (ot_video_frame_read_test_pattern(frame, &number, &captured) == OT_OK) {
        if (a->stamped == 0 || number > a->last_number) a->in_order++;
        a->last_number = number;
        a->stamped++;
        a->latency_sum_us += ot_monotonic_time_us() - captured;
    }
    pthread_mutex_unlock(&a->lock);
}

static void on_audio(ot_subscriber *s, void *ud, const int16_t *samples, size_t frames, int rate, int channels) {
    (void)s; (void)samples; (void)frames; (void)rate; (void)channels;
    app *a = ud;
    pthread_mutex_lock(&a->lock);
    a->audio_chunks++;
    pthread_mutex_unlock(&a->lock);
}

static void on_stream_created(ot_session *session, void *ud, const ot_stream *stream) {
    app *a = ud;
    ot_subscriber_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.on_connected = on_sub_connected;
    cb.on_render_frame = on_frame;
    cb.on_audio_data = on_audio;
    cb.user_data = a;
    a->subscriber = ot_subscriber_new(stream, &cb);      /* subscribe from the callback, as OpenTok samples do */
    ot_status st = ot_session_subscribe(session, a->subscriber);
    if (st != OT_OK) fprintf(stderr, "subscribe: %s\n", ot_status_message(st));
}

static void on_connected(ot_session *session, void *ud) {
    (void)session;
    app *a = ud;
    pthread_mutex_lock(&a->lock);
    a->connected_clients++;
    pthread_mutex_unlock(&a->lock);
}

static void on_error(ot_session *session, void *ud, ot_status code, const char *message) {
    (void)session; (void)ud;
    fprintf(stderr, "session error %d: %s\n", code, message);
}

static void on_stream_published(ot_publisher *p, void *ud, const ot_stream *stream) {
    (void)p; (void)ud;
    printf("publisher: stream %s created\n", ot_stream_get_id(stream));
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 3;
    int relayed = argc > 2 && strcmp(argv[2], "relayed") == 0;
    static app a;
    pthread_mutex_init(&a.lock, NULL);

    const char *key = "4700002", *secret = "00112233445566778899aabbccddeeff";
    ot_server *server = ot_server_new("127.0.0.1", 0, key, secret);
    char url[128], sid[OT_ID_BUFFER_SIZE], tok_pub[OT_TOKEN_BUFFER_SIZE], tok_sub[OT_TOKEN_BUFFER_SIZE];
    if (!server || ot_server_start(server, NULL) != OT_OK || ot_server_get_url(server, url, sizeof url) != OT_OK ||
        ot_server_create_session(server, relayed, sid, sizeof sid) != OT_OK ||
        ot_server_new_token(server, sid, OT_ROLE_PUBLISHER, "name=publisher", OT_TOKEN_JWT, tok_pub, sizeof tok_pub) != OT_OK ||
        ot_server_new_token(server, sid, OT_ROLE_SUBSCRIBER, "name=viewer", OT_TOKEN_JWT, tok_sub, sizeof tok_sub) != OT_OK) {
        fprintf(stderr, "could not start the embedded server\n");
        return 1;
    }
    printf("server %s, %s session %.24s...\n", url, relayed ? "relayed" : "routed", sid);

    ot_session_settings settings;
    ot_session_settings_default(&settings);
    settings.server_url = url;
    ot_session_callbacks pub_cb, sub_cb;
    memset(&pub_cb, 0, sizeof pub_cb);
    pub_cb.on_connected = on_connected;
    pub_cb.on_error = on_error;
    pub_cb.user_data = &a;
    sub_cb = pub_cb;
    sub_cb.on_stream_created = on_stream_created;
    ot_session *pub_session = ot_session_new_with_settings(key, sid, &pub_cb, &settings);
    a.sub_session = ot_session_new_with_settings(key, sid, &sub_cb, &settings);
    ot_session_connect(pub_session, tok_pub);
    ot_session_connect(a.sub_session, tok_sub);
    for (int i = 0; i < 100 && a.connected_clients < 2; i++) sleep_ms(50);

    ot_publisher_settings ps;
    ot_publisher_settings_default(&ps);
    ps.name = "C test pattern";
    ps.width = 320;
    ps.height = 240;
    ps.audio_source = OT_AUDIO_SOURCE_TONE;
    ps.tone_hz = 440;
    ot_publisher_callbacks pcb;
    memset(&pcb, 0, sizeof pcb);
    pcb.on_stream_created = on_stream_published;
    ot_publisher *publisher = ot_publisher_new(&ps, &pcb);
    ot_status st = ot_session_publish(pub_session, publisher);
    if (st != OT_OK) { fprintf(stderr, "publish: %s\n", ot_status_message(st)); return 1; }

    for (int s = 0; s < seconds; s++) {
        sleep_ms(1000);
        pthread_mutex_lock(&a.lock);
        printf("t=%ds frames=%ld (%dx%d) in-order=%ld audio-chunks=%ld latency=%.1f ms\n", s + 1, a.frames, a.width, a.height,
               a.in_order, a.audio_chunks, a.stamped ? a.latency_sum_us / 1000.0 / a.stamped : 0.0);
        pthread_mutex_unlock(&a.lock);
    }

    /* Unsubscribe first: once the stream is unpublished, the subscription ends by itself. */
    if (a.subscriber) { ot_session_unsubscribe(a.sub_session, a.subscriber); ot_subscriber_delete(a.subscriber); }
    ot_session_unpublish(pub_session, publisher);
    ot_publisher_delete(publisher);
    ot_session_delete(a.sub_session);
    ot_session_delete(pub_session);
    ot_server_delete(server);
    int ok = a.frames > 0 && a.stamped > 0 && a.in_order == a.stamped && a.audio_chunks > 0;
    printf("%s: %ld frames, %ld audio chunks\n", ok ? "ok" : "FAILED", a.frames, a.audio_chunks);
    return ok ? 0 : 1;
}
