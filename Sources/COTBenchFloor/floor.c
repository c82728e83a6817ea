/* The floor forwarder of `ot-bench router --floor`: see ot_bench_floor.h. */
#define _GNU_SOURCE
#include "ot_bench_floor.h"
#include "ot_shims_net.h"
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <srtp2/srtp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum { SLOT = 2048, MAX_SUBSCRIBERS = 64 };

typedef struct {
    srtp_t session;
    uint32_t ssrc;
    uint16_t seq_offset;
    uint8_t payload_type;
} floor_subscriber;

struct otbench_floor {
    int fd, stop_fd;
    uint32_t publisher_ssrc;
    srtp_t publisher;
    floor_subscriber subscribers[MAX_SUBSCRIBERS];
    struct sockaddr_storage addrs[MAX_SUBSCRIBERS];
    unsigned count;
    pthread_t thread;
    char thread_name[16];
    unsigned char *in, *out;  /* OTSHIM_BATCH_MAX slots each */
    _Atomic uint64_t wakeups, received, unprotect_failed, forwarded, sent;
};

/* An SRTP session for one SSRC with `key` (master key then salt), its stream's rollover counter set to `roc`. */
static srtp_t session(srtp_profile_t profile, uint32_t ssrc, uint32_t roc, const unsigned char *key) {
    srtp_policy_t p;
    memset(&p, 0, sizeof p);
    if (srtp_crypto_policy_set_from_profile_for_rtp(&p.rtp, profile) != srtp_err_status_ok ||
        srtp_crypto_policy_set_from_profile_for_rtcp(&p.rtcp, profile) != srtp_err_status_ok)
        return NULL;
    p.ssrc.type = ssrc_specific;
    p.ssrc.value = ssrc;
    p.key = (unsigned char *)key;
    p.window_size = 1024;
    srtp_t s = NULL;
    if (srtp_create(&s, &p) != srtp_err_status_ok) return NULL;
    if (srtp_set_stream_roc(s, ssrc, roc) != srtp_err_status_ok) {
        srtp_dealloc(s);
        return NULL;
    }
    return s;
}

static uint32_t read32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* RTP by RFC 7983's first octet and RFC 5761's payload-type ranges (RTCP is 192-223 with the marker bit). */
static int is_rtp(const unsigned char *p, long len) {
    return len >= 12 && p[0] >= 128 && p[0] <= 191 && !((p[1] & 0x7F) >= 64 && (p[1] & 0x7F) <= 95);
}

static void flush(otbench_floor *f, unsigned n, const long *lens, const struct sockaddr_storage *addrs,
                  const socklen_t *addrlens, int *gso) {
    if (n == 0) return;
    int sent = otshim_send_batch(f->fd, f->out, SLOT, n, lens, addrs, addrlens, gso);
    atomic_fetch_add_explicit(&f->forwarded, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&f->sent, (uint64_t)(sent > 0 ? sent : 0), memory_order_relaxed);
}

static void *run(void *arg) {
    otbench_floor *f = arg;
    otshim_set_thread_name(f->thread_name);
    otshim_block_async_signals();
    long in_lens[OTSHIM_BATCH_MAX], out_lens[OTSHIM_BATCH_MAX];
    struct sockaddr_storage from[OTSHIM_BATCH_MAX], to[OTSHIM_BATCH_MAX];
    socklen_t to_lens[OTSHIM_BATCH_MAX];
    int gso = 1;
    struct pollfd fds[2] = {{.fd = f->stop_fd, .events = POLLIN}, {.fd = f->fd, .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return NULL;  /* the socket is gone: stop serving (the counters stop moving) */
        }
        atomic_fetch_add_explicit(&f->wakeups, 1, memory_order_relaxed);
        if (fds[0].revents) return NULL;
        int n;
        do {
            n = otshim_recv_batch(f->fd, f->in, SLOT, OTSHIM_BATCH_MAX, in_lens, from);
            if (n <= 0) break;
            atomic_fetch_add_explicit(&f->received, (uint64_t)n, memory_order_relaxed);
            unsigned out = 0;
            for (int i = 0; i < n; i++) {
                unsigned char *p = f->in + (size_t)i * SLOT;
                int len = (int)in_lens[i];
                if (!is_rtp(p, in_lens[i]) || read32(p + 8) != f->publisher_ssrc) continue;
                if (srtp_unprotect(f->publisher, p, &len) != srtp_err_status_ok) {
                    atomic_fetch_add_explicit(&f->unprotect_failed, 1, memory_order_relaxed);
                    continue;
                }
                uint16_t seq = (uint16_t)(p[2] << 8 | p[3]);
                for (unsigned s = 0; s < f->count; s++) {
                    if (out == OTSHIM_BATCH_MAX) {
                        flush(f, out, out_lens, to, to_lens, &gso);
                        out = 0;
                    }
                    const floor_subscriber *sub = &f->subscribers[s];
                    unsigned char *q = f->out + (size_t)out * SLOT;
                    memcpy(q, p, (size_t)len);
                    q[1] = (unsigned char)((p[1] & 0x80) | sub->payload_type);
                    uint16_t mapped = (uint16_t)(seq + sub->seq_offset);
                    q[2] = (unsigned char)(mapped >> 8);
                    q[3] = (unsigned char)mapped;
                    q[8] = (unsigned char)(sub->ssrc >> 24);
                    q[9] = (unsigned char)(sub->ssrc >> 16);
                    q[10] = (unsigned char)(sub->ssrc >> 8);
                    q[11] = (unsigned char)sub->ssrc;
                    int qlen = len;
                    if (srtp_protect(sub->session, q, &qlen) != srtp_err_status_ok) continue;
                    out_lens[out] = qlen;
                    to[out] = f->addrs[s];
                    to_lens[out] = sizeof(struct sockaddr_in);
                    out++;
                }
            }
            flush(f, out, out_lens, to, to_lens, &gso);
        } while (n == OTSHIM_BATCH_MAX);
    }
}

static void release(otbench_floor *f) {
    if (f->publisher) srtp_dealloc(f->publisher);
    for (unsigned s = 0; s < f->count; s++)
        if (f->subscribers[s].session) srtp_dealloc(f->subscribers[s].session);
    if (f->stop_fd >= 0) close(f->stop_fd);
    free(f->in);
    free(f->out);
    free(f);
}

otbench_floor *otbench_floor_start(int fd, unsigned profile, uint32_t publisher_ssrc, uint32_t publisher_roc,
                                   const unsigned char *publisher_key, size_t publisher_key_len,
                                   const otbench_floor_subscriber *subscribers, unsigned count,
                                   const char *thread_name, int *error) {
    int ignored;
    if (!error) error = &ignored;
    *error = -1;
    if (fd < 0 || !publisher_key || !thread_name || (count > 0 && !subscribers) || count > MAX_SUBSCRIBERS) return NULL;
    srtp_profile_t p = (srtp_profile_t)profile;
    size_t key_len = srtp_profile_get_master_key_length(p) + srtp_profile_get_master_salt_length(p);
    *error = -2;
    if (key_len == 0 || publisher_key_len != key_len) return NULL;
    for (unsigned s = 0; s < count; s++)
        if (!subscribers[s].key || subscribers[s].key_len != key_len) return NULL;
    *error = -4;
    otbench_floor *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = fd;
    f->publisher_ssrc = publisher_ssrc;
    f->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    f->in = malloc((size_t)OTSHIM_BATCH_MAX * SLOT);
    f->out = malloc((size_t)OTSHIM_BATCH_MAX * SLOT);
    strncpy(f->thread_name, thread_name, sizeof f->thread_name - 1);
    if (f->stop_fd < 0 || !f->in || !f->out) {
        release(f);
        return NULL;
    }
    *error = -3;
    f->publisher = session(p, publisher_ssrc, publisher_roc, publisher_key);
    if (!f->publisher) {
        release(f);
        return NULL;
    }
    for (unsigned s = 0; s < count; s++) {
        const otbench_floor_subscriber *in = &subscribers[s];
        floor_subscriber *sub = &f->subscribers[s];
        sub->ssrc = in->ssrc;
        sub->seq_offset = in->seq_offset;
        sub->payload_type = in->payload_type & 0x7F;
        sub->session = session(p, in->ssrc, in->roc, in->key);
        f->count = s + 1;
        if (!sub->session) {
            release(f);
            return NULL;
        }
        struct sockaddr_in *a = (struct sockaddr_in *)&f->addrs[s];
        a->sin_family = AF_INET;
        a->sin_port = htons(in->port);
        a->sin_addr.s_addr = htonl(in->ipv4);
    }
    *error = -4;
    if (pthread_create(&f->thread, NULL, run, f) != 0) {
        release(f);
        return NULL;
    }
    *error = 0;
    return f;
}

void otbench_floor_read(const otbench_floor *f, otbench_floor_counters *out) {
    if (!f || !out) return;
    otbench_floor *m = (otbench_floor *)f;
    out->wakeups = atomic_load_explicit(&m->wakeups, memory_order_relaxed);
    out->received = atomic_load_explicit(&m->received, memory_order_relaxed);
    out->unprotect_failed = atomic_load_explicit(&m->unprotect_failed, memory_order_relaxed);
    out->forwarded = atomic_load_explicit(&m->forwarded, memory_order_relaxed);
    out->sent = atomic_load_explicit(&m->sent, memory_order_relaxed);
}

void otbench_floor_stop(otbench_floor *f) {
    if (!f) return;
    uint64_t one = 1;
    /* An eventfd's counter cannot overflow from one write; poll sees it readable until the thread ends. */
    if (write(f->stop_fd, &one, sizeof one) != (ssize_t)sizeof one) return;  /* the thread cannot be told: leak it */
    pthread_join(f->thread, NULL);
    release(f);
}
