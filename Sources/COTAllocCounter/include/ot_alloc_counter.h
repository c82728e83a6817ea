/* Counts heap allocations in the executable that links this target (ot-bench, the test bundle, the C cycles test, or
   a process it is preloaded into): malloc,
   calloc, realloc, posix_memalign, aligned_alloc and memalign are interposed and forwarded to glibc. */
#ifndef OT_ALLOC_COUNTER_H
#define OT_ALLOC_COUNTER_H
/** Allocation calls since process start (all threads). */
unsigned long long ot_alloc_count(void);
/** Allocation calls the calling thread made since it started (for "nothing allocated per packet" tests). */
unsigned long long ot_alloc_thread_count(void);
/** Bytes in live allocations (malloc_usable_size of every block not yet freed), exact: unlike mallinfo's
    figure it leaves out what malloc keeps in its per-thread caches and free lists. */
long long ot_alloc_live_bytes(void);
/** Allocations not yet freed. */
long long ot_alloc_live_blocks(void);
/** Of those, libdispatch's work-item continuations (64-byte blocks allocated by the loaded libdispatch.so). A thread keeps up
    to 1024 freed continuations in its own cache (DISPATCH_CONTINUATION_CACHE_LIMIT) until it ends, so these
    stay live after the work they carried is done; this figure tells them apart from the rest. */
long long ot_alloc_dispatch_continuation_bytes(void);
long long ot_alloc_dispatch_continuation_blocks(void);
#endif
