/* Types of the publisher, subscriber and video frame API. */
#ifndef OT_MEDIA_TYPES_H
#define OT_MEDIA_TYPES_H

#include "ot_types.h"

/** Where a publisher's video comes from. */
enum ot_video_source {
    /** The built-in moving test pattern; each frame carries its number and capture time. */
    OT_VIDEO_SOURCE_TEST_PATTERN = 0,
    /** Frames pushed with ot_publisher_provide_video_frame (a custom capturer). */
    OT_VIDEO_SOURCE_CUSTOM = 1,
    /** No video track. */
    OT_VIDEO_SOURCE_NONE = 2,
    /** A V4L2 camera: ot_publisher_settings.camera (a path such as /dev/video0, a camera's name, or NULL for the
     * first camera; see ot_device_list_new), in the mode closest to width, height and fps. Its failures come to
     * on_device_error; the stream then carries black frames. */
    OT_VIDEO_SOURCE_CAMERA = 3
};

/** Where a publisher's audio comes from. None needs a sound server. */
enum ot_audio_source {
    OT_AUDIO_SOURCE_SILENCE = 0,
    /** A sine tone at ot_publisher_settings.tone_hz. */
    OT_AUDIO_SOURCE_TONE = 1,
    /** 48 kHz mono int16 PCM written with ot_publisher_write_audio (a custom audio device). */
    OT_AUDIO_SOURCE_CUSTOM = 2,
    /** No audio track. */
    OT_AUDIO_SOURCE_NONE = 3,
    /** A PulseAudio source: ot_publisher_settings.microphone (a source name, or NULL for the system default, which is
     * followed when it changes). Without a sound server, or when the source is lost, on_device_error reports it and
     * silence is sent. */
    OT_AUDIO_SOURCE_MICROPHONE = 4
};

/** Pixel formats a custom capturer may push. */
enum ot_pixel_format {
    OT_PIXEL_FORMAT_I420 = 1,
    OT_PIXEL_FORMAT_NV12 = 2,
    OT_PIXEL_FORMAT_NV21 = 3,
    OT_PIXEL_FORMAT_YUY2 = 4,
    OT_PIXEL_FORMAT_UYVY = 5,
    /** 32-bit pixels, bytes in memory B G R A (libyuv naming). */
    OT_PIXEL_FORMAT_ARGB = 6,
    /** 32-bit pixels, bytes in memory A R G B. */
    OT_PIXEL_FORMAT_BGRA = 7,
    /** 24-bit pixels, bytes in memory B G R. */
    OT_PIXEL_FORMAT_RGB24 = 8,
    /** 32-bit pixels, bytes in memory R G B A. */
    OT_PIXEL_FORMAT_ABGR = 9,
    /** One JPEG picture per frame: one plane, whose stride is the JPEG's length in bytes. */
    OT_PIXEL_FORMAT_MJPEG = 10,
    /** 32-bit pixels, bytes in memory A B G R. */
    OT_PIXEL_FORMAT_RGBA = 11
};

/** Why a subscriber's video was disabled or enabled (OTSubscriberVideoEventReason). */
enum ot_video_reason {
    OT_VIDEO_REASON_PUBLISH_VIDEO = 1,
    OT_VIDEO_REASON_SUBSCRIBE_TO_VIDEO = 2,
    OT_VIDEO_REASON_QUALITY = 3
};

/** Options for ot_publisher_new; start from ot_publisher_settings_default(). */
typedef struct ot_publisher_settings {
    /** The stream's name (NULL: ""). */
    const char *name;
    /** One of ot_video_source. */
    int video_source;
    /** One of ot_video_type. */
    int video_type;
    /** Picture size and rate of the test pattern, and what a custom capturer announces. */
    int width;
    int height;
    int fps;
    /** Upper bound of the adaptive video bitrate, kbit/s (default 2000; at most 100000). */
    int max_bitrate_kbps;
    /** One of ot_audio_source. */
    int audio_source;
    /** The tone's frequency for OT_AUDIO_SOURCE_TONE. */
    double tone_hz;
    ot_bool publish_audio;
    ot_bool publish_video;
    /** Whether subscribers' video may be dropped under sustained poor quality, audio continuing (default true).
     * False: neither the media router nor a relayed subscriber disables it for quality. */
    ot_bool audio_fallback_enabled;
    /** Lower bound and start of the adaptive video bitrate, kbit/s (defaults 100 and 600; min <= start <= max). */
    int min_bitrate_kbps;
    int start_bitrate_kbps;
    /** Opus bitrate, bit/s (default 32000; 6000..510000). */
    int audio_bitrate_bps;
    /** OT_VIDEO_SOURCE_CAMERA: the camera's path or name; NULL: the first camera. Read during ot_publisher_new. */
    const char *camera;
    /** OT_AUDIO_SOURCE_MICROPHONE: the PulseAudio source's name; NULL: the system default. */
    const char *microphone;
    /** The video codecs to send, most preferred first, comma-separated ("VP9,VP8"; names are case-insensitive, "VP8"
     * and "VP9" are known); NULL or "": VP8. The stream is encoded in one codec, the first of these its first media
     * connection agrees (docs/media-pipelines.md). Read during ot_publisher_new; an unknown name fails it. */
    const char *preferred_video_codecs;
} ot_publisher_settings;

/** A publisher's sending counters. */
typedef struct ot_publisher_stats {
    /** Milliseconds since 1970 when taken. */
    int64_t timestamp_ms;
    /** Media connections up: subscribers (relayed) or the router (routed). */
    int connections;
    int64_t video_packets_sent;
    int64_t video_bytes_sent;
    int64_t audio_packets_sent;
    int64_t audio_bytes_sent;
    int64_t frames_encoded;
    double video_bitrate_bps;
    int target_bitrate_kbps;
    /** Round-trip time in ms, or -1 while unknown. */
    double round_trip_time_ms;
    double fraction_lost;
} ot_publisher_stats;

/** A subscriber's receiving counters. */
typedef struct ot_subscriber_stats {
    int64_t timestamp_ms;
    int64_t video_packets_received;
    int64_t video_bytes_received;
    int64_t video_packets_lost;
    int64_t audio_packets_received;
    int64_t audio_bytes_received;
    int64_t audio_packets_lost;
    int64_t frames_decoded;
    int64_t frames_dropped;
    int64_t freeze_count;
    double frames_per_second;
    double video_bitrate_bps;
    int frame_width;
    int frame_height;
    /** Round-trip time in ms, or -1 while unknown. */
    double round_trip_time_ms;
} ot_subscriber_stats;

/** An I420 picture. The pointers belong to the ot_video_frame they were read from. */
typedef struct ot_video_frame_info {
    const uint8_t *y;
    const uint8_t *u;
    const uint8_t *v;
    int stride_y;
    int stride_u;
    int stride_v;
    int width;
    int height;
    /** Capture time in microseconds (the sender's clock for received frames). */
    int64_t timestamp_us;
    /** 0, 90, 180 or 270. */
    int rotation;
} ot_video_frame_info;

/** The publisher's delegate messages (OTPublisherKitDelegate). */
typedef struct ot_publisher_callbacks {
    /** The stream was created: others see it. */
    void (*on_stream_created)(ot_publisher *publisher, void *user_data, const ot_stream *stream);
    /** The stream ended (unpublish, disconnect). */
    void (*on_stream_destroyed)(ot_publisher *publisher, void *user_data, const ot_stream *stream);
    void (*on_error)(ot_publisher *publisher, void *user_data, ot_status code, const char *message);
    /** Sending counters, about once a second while published. */
    void (*on_stats)(ot_publisher *publisher, void *user_data, const ot_publisher_stats *stats);
    /** A moderator muted this stream's audio (one stream, a mute all not excluding it, or published during a mute
     * all): no audio is sent and ot_publisher_get_publish_audio reads false until ot_publisher_set_publish_audio(1).
     * `active` is always true. */
    void (*on_mute_forced)(ot_publisher *publisher, void *user_data, ot_bool active);
    /** OT_VIDEO_SOURCE_CUSTOM: start pushing frames now. */
    void (*on_capture_start)(ot_publisher *publisher, void *user_data);
    /** OT_VIDEO_SOURCE_CUSTOM: stop pushing frames. */
    void (*on_capture_stop)(ot_publisher *publisher, void *user_data);
    /** The microphone or camera (`device_kind`, an ot_device_kind) failed: OT_ERR_DEVICE_UNAVAILABLE (could not be
     * opened) or OT_ERR_DEVICE_LOST (vanished while publishing). The stream continues with silence or black frames. */
    void (*on_device_error)(ot_publisher *publisher, void *user_data, int device_kind, ot_status code, const char *message);
    void *user_data;
} ot_publisher_callbacks;

/** Options for ot_subscriber_new_with_settings; start from ot_subscriber_settings_default(). */
typedef struct ot_subscriber_settings {
    /** Initial subscribe-to-audio / -video (default true). */
    ot_bool subscribe_to_audio;
    ot_bool subscribe_to_video;
    /** Mix this subscriber's audio into the session's playout device (default true). */
    ot_bool play_audio;
    /** Relayed sessions: drop video under sustained loss (over quality_loss_threshold, 0..1, for
     * quality_window_seconds, 1..60) and restore it on recovery (defaults true, 0.15, 3). Routed sessions: the media
     * router decides. */
    ot_bool audio_fallback_enabled;
    double quality_loss_threshold;
    int quality_window_seconds;
    /** How long media may take to connect (or to come back after a failure), ms (1..86400000; default 15000). */
    int64_t connect_timeout_ms;
} ot_subscriber_settings;

/** The subscriber's delegate messages (OTSubscriberKitDelegate). As the seeds define them, on_disconnected and
 * on_reconnected frame a temporary interruption only; the subscription's end is the app's own
 * ot_session_unsubscribe, the session's on_stream_destroyed or its on_disconnected (no subscriber callback). */
typedef struct ot_subscriber_callbacks {
    /** Media flows. */
    void (*on_connected)(ot_subscriber *subscriber, void *user_data, const ot_stream *stream);
    /** Media stopped for a while (subscriberDidDisconnectFromStream): this subscriber's connection failed and is being
     * re-established, or (routed sessions) the publisher's connection to the media router dropped. on_reconnected
     * follows when media flows again; if it cannot within connect_timeout_ms, the session gets on_stream_destroyed. */
    void (*on_disconnected)(ot_subscriber *subscriber, void *user_data);
    /** The first connection failed (OT_ERR_SUBSCRIBER_WEBRTC; OT_ERR_SUBSCRIBER_TIMED_OUT; OT_ERR_SERVER_CANNOT_FIND_STREAM),
     * or the stream cannot be decrypted (OT_ERR_ENCRYPTION_SECRET_MISMATCH). */
    void (*on_error)(ot_subscriber *subscriber, void *user_data, ot_status code, const char *message);
    /** A decoded frame (borrowed: keep it with ot_video_frame_copy). */
    void (*on_render_frame)(ot_subscriber *subscriber, void *user_data, const ot_video_frame *frame);
    /** 20 ms of decoded interleaved int16 PCM (borrowed). */
    void (*on_audio_data)(ot_subscriber *subscriber, void *user_data, const int16_t *samples, size_t frames_per_channel,
                          int sample_rate, int channels);
    /** Video stopped, with an ot_video_reason. */
    void (*on_video_disabled)(ot_subscriber *subscriber, void *user_data, int reason);
    /** Video resumed, with an ot_video_reason. */
    void (*on_video_enabled)(ot_subscriber *subscriber, void *user_data, int reason);
    /** Quality is poor: video may be dropped soon (the audio fallback's warning). */
    void (*on_video_disable_warning)(ot_subscriber *subscriber, void *user_data);
    /** Quality recovered before video was dropped. */
    void (*on_video_disable_warning_lifted)(ot_subscriber *subscriber, void *user_data);
    /** Receiving counters, about once a second. */
    void (*on_stats)(ot_subscriber *subscriber, void *user_data, const ot_subscriber_stats *stats);
    /** Media flows again after on_disconnected (subscriberDidReconnectToStream). */
    void (*on_reconnected)(ot_subscriber *subscriber, void *user_data);
    void *user_data;
} ot_subscriber_callbacks;

#endif /* OT_MEDIA_TYPES_H */
