#include "ot_alloc_counter.h"
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

/* glibc's own entry points, exported for exactly this kind of wrapper. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic unsigned long long count;

static inline void bump(void) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); }

unsigned long long ot_alloc_count(void) { return atomic_load_explicit(&count, memory_order_relaxed); }

void *malloc(size_t n) { bump(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { bump(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { bump(); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { bump(); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { bump(); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    bump();
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
