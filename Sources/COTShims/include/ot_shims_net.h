/* Socket helpers for the IO driver. */
#ifndef OT_SHIMS_NET_H
#define OT_SHIMS_NET_H
#include <sys/types.h>
#include <sys/socket.h>

/** fcntl(fd, F_SETFL, flags | O_NONBLOCK) (fcntl is variadic). Returns 0 or -1. */
int otshim_set_nonblocking(int fd);
/** accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC (Glibc's Swift module does not export accept4). Returns the socket or -1 (errno set). */
int otshim_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len);
/** Names the calling thread for the kernel (top -H, /proc/self/task/N/comm); cut to 15 bytes. Returns 0 or an errno. */
int otshim_set_thread_name(const char *name);
/** Blocks asynchronous signals (SIGINT, SIGTERM, ...) in the calling thread, so a library IO thread never takes the
    application's signals (libdispatch signal sources miss signals a foreign thread consumed). Returns 0 or an errno. */
int otshim_block_async_signals(void);

/** Most datagrams one batch call moves (recvmmsg/sendmmsg vector length; also UDP GSO's segment limit). */
#define OTSHIM_BATCH_MAX 64

/** Receives up to `count` (at most OTSHIM_BATCH_MAX) datagrams with one recvmmsg(2): datagram i goes to
    `buffer + i * slot`, its length to lens[i] (-1 when it was longer than `slot`: truncated, to be dropped) and its
    source to addrs[i]. Returns how many were received (0 when none was waiting) or -1 (errno set). */
int otshim_recv_batch(int fd, unsigned char *buffer, size_t slot, unsigned count, long *lens, struct sockaddr_storage *addrs);

/** Sends `count` (at most OTSHIM_BATCH_MAX) datagrams with sendmmsg(2): datagram i is `lens[i]` bytes at
    `buffer + i * slot`, to addrs[i] (addrlens[i] bytes). With `*gso` set, runs of datagrams to one destination of
    one size (the run's last may be shorter) go as one UDP GSO buffer (UDP_SEGMENT); when the kernel refuses GSO,
    `*gso` is cleared and they go one by one. Datagrams to one destination keep their order. Returns how many
    datagrams were handed to the kernel (the rest were dropped: buffer full or an error). */
int otshim_send_batch(int fd, const unsigned char *buffer, size_t slot, unsigned count, const long *lens,
                      const struct sockaddr_storage *addrs, const socklen_t *addrlens, int *gso);
#endif
