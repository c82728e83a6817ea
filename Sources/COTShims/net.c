#define _GNU_SOURCE
#include "ot_shims_net.h"
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <errno.h>
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

int otshim_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -1 : 0;
}

int otshim_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int otshim_set_thread_name(const char *name) {
    char buf[16];
    strncpy(buf, name, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    return pthread_setname_np(pthread_self(), buf);
}

int otshim_block_async_signals(void) {
    sigset_t set;
    sigfillset(&set);
    /* Faults stay deliverable to the faulting thread. */
    sigdelset(&set, SIGSEGV);
    sigdelset(&set, SIGBUS);
    sigdelset(&set, SIGFPE);
    sigdelset(&set, SIGILL);
    sigdelset(&set, SIGABRT);
    sigdelset(&set, SIGTRAP);
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int otshim_recv_batch(int fd, unsigned char *buffer, size_t slot, unsigned count, long *lens, struct sockaddr_storage *addrs) {
    struct mmsghdr msgs[OTSHIM_BATCH_MAX];
    struct iovec iov[OTSHIM_BATCH_MAX];
    if (count > OTSHIM_BATCH_MAX) count = OTSHIM_BATCH_MAX;
    memset(msgs, 0, sizeof(struct mmsghdr) * count);
    for (unsigned i = 0; i < count; i++) {
        iov[i].iov_base = buffer + i * slot;
        iov[i].iov_len = slot;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &addrs[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
    }
    int n;
    do { n = recvmmsg(fd, msgs, count, MSG_DONTWAIT, NULL); } while (n < 0 && errno == EINTR);
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    for (int i = 0; i < n; i++)
        lens[i] = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? -1 : (long)msgs[i].msg_len;
    return n;
}

static int same_address(const struct sockaddr_storage *a, socklen_t alen, const struct sockaddr_storage *b, socklen_t blen) {
    return alen == blen && memcmp(a, b, alen) == 0;
}

/* Sends messages [0, n) of `msgs`, retrying on EINTR; returns how many went (a message the kernel refuses is skipped). */
static int send_messages(int fd, struct mmsghdr *msgs, unsigned n, int *failed_gso) {
    unsigned done = 0;
    while (done < n) {
        int r = sendmmsg(fd, msgs + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) { done += (unsigned)r; continue; }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT) && msgs[done].msg_hdr.msg_controllen > 0) {
            *failed_gso = 1;
            return (int)done;
        }
        done++;  /* EAGAIN (buffer full), unreachable, ...: UDP drops this one */
    }
    return (int)n;
}

int otshim_send_batch(int fd, const unsigned char *buffer, size_t slot, unsigned count, const long *lens,
                      const struct sockaddr_storage *addrs, const socklen_t *addrlens, int *gso) {
    struct mmsghdr msgs[OTSHIM_BATCH_MAX];
    struct iovec iov[OTSHIM_BATCH_MAX];
    union { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; } control[OTSHIM_BATCH_MAX];
    unsigned char taken[OTSHIM_BATCH_MAX];
    unsigned sizes[OTSHIM_BATCH_MAX];  /* datagrams in each message */
    if (count > OTSHIM_BATCH_MAX) count = OTSHIM_BATCH_MAX;
    memset(taken, 0, count);
    memset(msgs, 0, sizeof(struct mmsghdr) * count);
    unsigned m = 0, v = 0;
    for (unsigned i = 0; i < count; i++) {
        if (taken[i] || lens[i] <= 0) continue;
        struct msghdr *h = &msgs[m].msg_hdr;
        h->msg_name = (void *)&addrs[i];
        h->msg_namelen = addrlens[i];
        h->msg_iov = &iov[v];
        iov[v].iov_base = (void *)(buffer + i * slot);
        iov[v].iov_len = (size_t)lens[i];
        v++;
        taken[i] = 1;
        unsigned segments = 1;
        /* The same destination's later datagrams of the same size, in order (a shorter one ends the run, a longer
           one or the 64 KB limit stops it before). */
        size_t total = (size_t)lens[i];
        for (unsigned j = i + 1; *gso && j < count; j++) {
            if (taken[j] || lens[j] <= 0 || !same_address(&addrs[i], addrlens[i], &addrs[j], addrlens[j])) continue;
            if (lens[j] > lens[i] || total + (size_t)lens[j] > 65000) break;
            iov[v].iov_base = (void *)(buffer + j * slot);
            iov[v].iov_len = (size_t)lens[j];
            v++;
            taken[j] = 1;
            segments++;
            total += (size_t)lens[j];
            if (lens[j] < lens[i]) break;
        }
        h->msg_iovlen = segments;
        if (segments > 1) {
            h->msg_control = control[m].buf;
            h->msg_controllen = sizeof control[m].buf;
            struct cmsghdr *c = CMSG_FIRSTHDR(h);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t size = (uint16_t)lens[i];
            memcpy(CMSG_DATA(c), &size, sizeof size);
        }
        sizes[m] = segments;
        m++;
    }
    int failed_gso = 0;
    int sent = send_messages(fd, msgs, m, &failed_gso);
    unsigned datagrams = 0;
    for (int k = 0; k < sent; k++) datagrams += sizes[k];
    if (failed_gso) {
        /* The kernel has no UDP GSO here: the rest go one by one, now and from now on. */
        *gso = 0;
        /* Rebuild single-datagram messages from the remaining messages' iovecs. */
        struct mmsghdr singles[OTSHIM_BATCH_MAX];
        unsigned s = 0;
        for (unsigned k = (unsigned)sent; k < m; k++) {
            for (size_t e = 0; e < msgs[k].msg_hdr.msg_iovlen; e++) {
                memset(&singles[s], 0, sizeof singles[s]);
                singles[s].msg_hdr.msg_name = msgs[k].msg_hdr.msg_name;
                singles[s].msg_hdr.msg_namelen = msgs[k].msg_hdr.msg_namelen;
                singles[s].msg_hdr.msg_iov = &msgs[k].msg_hdr.msg_iov[e];
                singles[s].msg_hdr.msg_iovlen = 1;
                s++;
            }
        }
        int ignored = 0;
        datagrams += (unsigned)send_messages(fd, singles, s, &ignored);
    }
    return (int)datagrams;
}
