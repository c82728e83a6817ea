/* Umbrella header of the C ABI types (for the Swift importer). */
#include "ot_types.h"
#include "ot_session_types.h"
#include "ot_server_types.h"
#include "ot_media_types.h"
#include "ot_device_types.h"
