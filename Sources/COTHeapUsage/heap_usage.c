#include "ot_heap_usage.h"
#include <malloc.h>

unsigned long long ot_heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return (unsigned long long)(m.uordblks + m.hblkhd);
}


unsigned long long ot_heap_free_held(void) {
    struct mallinfo2 m = mallinfo2();
    return (unsigned long long)m.fordblks;
}

int ot_heap_trim(void) { return malloc_trim(0); }
