#define _GNU_SOURCE
#include "ot_shims_net.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

int otshim_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -1 : 0;
}

int otshim_set_thread_name(const char *name) {
    char buf[16];
    strncpy(buf, name, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    return pthread_setname_np(pthread_self(), buf);
}
