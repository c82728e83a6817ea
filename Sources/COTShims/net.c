#define _GNU_SOURCE
#include "ot_shims_net.h"
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

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
