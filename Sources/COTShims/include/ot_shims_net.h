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
#endif
