/* Counts heap allocations in the process that links this target (ot-bench only): malloc, calloc,
   realloc, posix_memalign, aligned_alloc and memalign are interposed and forwarded to glibc. */
#ifndef OT_ALLOC_COUNTER_H
#define OT_ALLOC_COUNTER_H
/** Allocation calls since process start (all threads). */
unsigned long long ot_alloc_count(void);
#endif
