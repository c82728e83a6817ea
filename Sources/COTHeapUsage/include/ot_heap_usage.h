/* glibc malloc's live heap, for the leak checks of ot-bench and the cycle tests (malloc.h is not in Swift's Glibc module). */
#ifndef OT_HEAP_USAGE_H
#define OT_HEAP_USAGE_H
/** Bytes malloc has handed out and not had back, all arenas: mallinfo2's uordblks + hblkhd. */
unsigned long long ot_heap_in_use(void);
/** Bytes free in malloc's arenas but kept by it (mallinfo2's fordblks): part of RSS once touched. */
unsigned long long ot_heap_free_held(void);
/** malloc_trim(0): gives free memory of every arena back to the kernel; 1 when some was released. */
int ot_heap_trim(void);
#endif
