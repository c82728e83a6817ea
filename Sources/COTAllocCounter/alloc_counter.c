#define _GNU_SOURCE
#include "ot_alloc_counter.h"
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* glibc's own entry points, exported for exactly this kind of wrapper. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic unsigned long long count;
/* Allocation calls of the calling thread (initial-exec: no allocation on first use, also when preloaded). */
static __thread unsigned long long threadCount __attribute__((tls_model("initial-exec")));
static _Atomic long long liveBytes, liveBlocks, continuationBytes, continuationBlocks;

/* Where libdispatch's code is: a 64-byte allocation whose caller is in it is a continuation
   (sizeof(struct dispatch_continuation_s), one cache line). libdispatch.so's code range is found at start-up
   (the Swift tests' libdispatch; libotsession.so links its own statically, and the tests that preload this counter
   into a C or Python process count every block). */
enum { CONTINUATION_SIZE = 64 };
static _Atomic uintptr_t dispatchRange[2];

static int findObject(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (!(info->dlpi_name && strstr(info->dlpi_name, "libdispatch.so"))) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            /* Low end first: until the high end is set, the range is empty. */
            atomic_store(&dispatchRange[0], info->dlpi_addr + ph->p_vaddr);
            atomic_store(&dispatchRange[1], info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
        }
    }
    return 1;
}

__attribute__((constructor)) static void findDispatchAtStart(void) {
    dl_iterate_phdr(findObject, NULL);
}

/* A continuation gets 8 more bytes, and the last 8 of its usable size hold a tag made from its address; free
   checks and clears the tag (clearing it, so that a later block at the same address is not mistaken for one). */
static const uint64_t TAG = 0x6f7464697370746bULL;
static inline uint64_t *tagSlot(void *p, size_t usable) { return (uint64_t *)((char *)p + usable - sizeof(uint64_t)); }
static inline int isContinuationRequest(size_t n, const void *caller) {
    if (n != CONTINUATION_SIZE) return 0;
    uintptr_t c = (uintptr_t)caller;
    return c >= atomic_load_explicit(&dispatchRange[0], memory_order_relaxed)
        && c < atomic_load_explicit(&dispatchRange[1], memory_order_relaxed);
}

static inline void *track(void *p, int continuation) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    threadCount++;
    if (!p) return p;
    size_t usable = malloc_usable_size(p);
    atomic_fetch_add_explicit(&liveBytes, (long long)usable, memory_order_relaxed);
    atomic_fetch_add_explicit(&liveBlocks, 1, memory_order_relaxed);
    if (continuation) {
        *tagSlot(p, usable) = TAG ^ (uint64_t)(uintptr_t)p;
        atomic_fetch_add_explicit(&continuationBytes, (long long)usable, memory_order_relaxed);
        atomic_fetch_add_explicit(&continuationBlocks, 1, memory_order_relaxed);
    }
    return p;
}

static inline void untrack(void *p) {
    if (!p) return;
    size_t usable = malloc_usable_size(p);
    atomic_fetch_sub_explicit(&liveBytes, (long long)usable, memory_order_relaxed);
    atomic_fetch_sub_explicit(&liveBlocks, 1, memory_order_relaxed);
    if (usable >= CONTINUATION_SIZE + sizeof(uint64_t) && *tagSlot(p, usable) == (TAG ^ (uint64_t)(uintptr_t)p)) {
        *tagSlot(p, usable) = 0;
        atomic_fetch_sub_explicit(&continuationBytes, (long long)usable, memory_order_relaxed);
        atomic_fetch_sub_explicit(&continuationBlocks, 1, memory_order_relaxed);
    }
}

unsigned long long ot_alloc_count(void) { return atomic_load_explicit(&count, memory_order_relaxed); }
unsigned long long ot_alloc_thread_count(void) { return threadCount; }
long long ot_alloc_live_bytes(void) { return atomic_load_explicit(&liveBytes, memory_order_relaxed); }
long long ot_alloc_live_blocks(void) { return atomic_load_explicit(&liveBlocks, memory_order_relaxed); }
long long ot_alloc_dispatch_continuation_bytes(void) { return atomic_load_explicit(&continuationBytes, memory_order_relaxed); }
long long ot_alloc_dispatch_continuation_blocks(void) { return atomic_load_explicit(&continuationBlocks, memory_order_relaxed); }

void *malloc(size_t n) {
    int continuation = isContinuationRequest(n, __builtin_return_address(0));
    return track(__libc_malloc(continuation ? n + sizeof(uint64_t) : n), continuation);
}
void *calloc(size_t a, size_t b) {
    int continuation = a == 1 && isContinuationRequest(b, __builtin_return_address(0));
    return track(__libc_calloc(a, continuation ? b + sizeof(uint64_t) : b), continuation);
}
void *realloc(void *p, size_t n) {
    if (!p) return track(__libc_realloc(NULL, n), 0);
    /* The old block is gone only when realloc succeeds or frees it (n == 0); on failure it stays as it was. */
    untrack(p);
    void *q = __libc_realloc(p, n);
    if (q) return track(q, 0);
    if (n != 0) track(p, 0);
    return q;
}
void free(void *p) { untrack(p); __libc_free(p); }
void *memalign(size_t a, size_t n) { return track(__libc_memalign(a, n), 0); }
void *aligned_alloc(size_t a, size_t n) { return track(__libc_memalign(a, n), 0); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = track(__libc_memalign(a, n), 0);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void *reallocarray(void *p, size_t a, size_t b) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) { errno = ENOMEM; return NULL; }
    return realloc(p, n);
}
