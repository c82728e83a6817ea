/* Types of the device API: enumeration of cameras, microphones and speakers (docs/devices.md). */
#ifndef OT_DEVICE_TYPES_H
#define OT_DEVICE_TYPES_H

#include "ot_types.h"

/** The kinds of capture and playout device. */
enum ot_device_kind {
    /** An audio capture device: a PulseAudio source. */
    OT_DEVICE_MICROPHONE = 1,
    /** An audio playout device: a PulseAudio sink. */
    OT_DEVICE_SPEAKER = 2,
    /** A video capture device: a V4L2 node (/dev/video*). */
    OT_DEVICE_CAMERA = 3
};

#if defined(__swift__)
struct ot_device_list { char swift_import_only_; };
#endif
/** The devices of one kind at the time ot_device_list_new was called. */
typedef struct ot_device_list ot_device_list;

/** One device of an ot_device_list. The strings belong to the list and live as long as it does. */
typedef struct ot_device_info {
    /** What selects it: the PulseAudio source or sink name, or the camera's device node (/dev/video0). */
    const char *id;
    /** Its human-readable name: the PulseAudio description, or the camera's name. */
    const char *name;
    /** One of ot_device_kind. */
    int kind;
    /** Whether it is the system's default source or sink (cameras: the first one, which NULL selects). */
    ot_bool is_default;
    /** Microphones: whether the source is the monitor of a sink (what that sink plays). */
    ot_bool is_monitor;
    /** Cameras: how many modes ot_device_list_get_camera_mode gives (0 for audio devices). */
    size_t mode_count;
} ot_device_info;

/** A camera's capture mode. */
typedef struct ot_camera_mode {
    /** One of ot_pixel_format. */
    int pixel_format;
    int width;
    int height;
    /** The highest frame rate offered at this size (frames per second). */
    double max_fps;
} ot_camera_mode;

#endif /* OT_DEVICE_TYPES_H */
