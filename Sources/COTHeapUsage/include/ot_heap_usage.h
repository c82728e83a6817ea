/* glibc malloc's live heap, for the leak checks of ot-bench and the cycle tests (malloc.h is not in Swift's Glibc module). */
#ifndef OT_HEAP_USAGE_H
#define OT_HEAP_USAGE_H
/** Bytes malloc has handed out and not had back, all arenas: mallinfo2's uordblks + hblkhd. */
unsigned long long ot_heap_in_use(void);
#endif
