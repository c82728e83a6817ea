/* Compile-time checks of the C ABI's fixed sizes. */
#include "ot_types.h"

_Static_assert(sizeof(ot_status) == 4, "ot_status is a 32-bit int");
_Static_assert(sizeof(ot_bool) == 4, "ot_bool is a 32-bit int");
_Static_assert(OT_OK == 0, "OT_OK is zero");
