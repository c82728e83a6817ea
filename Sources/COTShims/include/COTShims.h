/* C helpers for what Swift cannot call directly. */
#include "ot_shims_codec.h"
#include "ot_shims_ssl.h"
#include "ot_shims_srtp.h"
#include "ot_shims_net.h"
#include "ot_shims_v4l2.h"
