/* Types of the embedded session server API. */
#ifndef OT_SERVER_TYPES_H
#define OT_SERVER_TYPES_H

#include "ot_types.h"

/** Token formats for ot_token_new / ot_server_new_token. */
enum ot_token_format {
    OT_TOKEN_JWT = 0,
    OT_TOKEN_T1 = 1
};

#endif /* OT_SERVER_TYPES_H */
