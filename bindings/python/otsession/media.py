"""Publishers, subscribers and video frames."""
from __future__ import annotations

import ctypes
import enum
import traceback
import weakref
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ._errors import OTError, check
from ._lib import lib
from .devices import DeviceKind
from .session import Session, Stream, VideoType


class VideoSource(enum.IntEnum):
    TEST_PATTERN = 0
    CUSTOM = 1
    NONE = 2
    CAMERA = 3
    """A V4L2 camera: Publisher(camera=...)."""


class AudioSource(enum.IntEnum):
    SILENCE = 0
    TONE = 1
    CUSTOM = 2
    NONE = 3
    MICROPHONE = 4
    """A PulseAudio source: Publisher(microphone=...)."""


class PixelFormat(enum.IntEnum):
    I420 = 1
    NV12 = 2
    NV21 = 3
    YUY2 = 4
    UYVY = 5
    ARGB = 6
    BGRA = 7
    RGB24 = 8
    ABGR = 9
    MJPEG = 10
    RGBA = 11


class VideoReason(enum.IntEnum):
    PUBLISH_VIDEO = 1
    SUBSCRIBE_TO_VIDEO = 2
    QUALITY = 3


def monotonic_us() -> int:
    """The clock the test pattern stamps capture times with (microseconds)."""
    return lib().fn.ot_monotonic_time_us()


@dataclass(frozen=True)
class VideoFrame:
    """A decoded I420 frame, copied out of the library (planes as bytes, rows `stride_*` apart)."""
    width: int
    height: int
    y: bytes
    u: bytes
    v: bytes
    stride_y: int
    stride_u: int
    stride_v: int
    timestamp_us: int
    rotation: int
    test_pattern: Optional[tuple[int, int]]
    """(frame number, capture time in µs) when the frame is the built-in test pattern, else None."""

    @staticmethod
    def _from_borrowed(ptr) -> "VideoFrame":
        l = lib()
        i = l.decl.structs["ot_video_frame_info"]()
        check(l.fn.ot_video_frame_get_info(ptr, ctypes.byref(i)), "frame info")
        ch = (i.height + 1) // 2
        number, captured = ctypes.c_uint32(), ctypes.c_int64()
        stamp = None
        if l.fn.ot_video_frame_read_test_pattern(ptr, ctypes.byref(number), ctypes.byref(captured)) == 0:
            stamp = (number.value, captured.value)
        return VideoFrame(i.width, i.height, ctypes.string_at(i.y, i.stride_y * i.height), ctypes.string_at(i.u, i.stride_u * ch),
                          ctypes.string_at(i.v, i.stride_v * ch), i.stride_y, i.stride_u, i.stride_v, i.timestamp_us,
                          i.rotation, stamp)


def _callback_struct(name: str, owner, convert: dict):
    """Builds a callbacks struct whose members call owner.on_<event> (and registered listeners)."""
    l = lib()
    struct = l.decl.structs[name]()
    refs = []
    this = weakref.ref(owner)
    for field, ctype in struct._fields_:
        if not field.startswith("on_"):
            continue
        event = field[3:]
        conv = convert.get(event, lambda *a: a)

        def trampoline(_handle, _user_data, *args, event=event, conv=conv):
            o = this()
            if o is None:
                return
            try:
                values = conv(*args)
                getattr(o, "on_" + event)(*values)
                for fn in list(o._listeners.get(event, ())):
                    fn(*values)
            except Exception:  # never let an exception unwind into C
                traceback.print_exc()
        ref = ctype(trampoline)
        refs.append(ref)
        setattr(struct, field, ref)
    return struct, refs


class Publisher:
    """Publishes one stream (as OTPublisher). Override on_* methods or use `on(event, fn)`."""

    def __init__(self, name: str = "", video_source: VideoSource = VideoSource.TEST_PATTERN,
                 video_type: VideoType = VideoType.CAMERA, width: int = 640, height: int = 480, fps: int = 30,
                 max_bitrate_kbps: int = 2000, audio_source: AudioSource = AudioSource.SILENCE, tone_hz: float = 440.0,
                 publish_audio: bool = True, publish_video: bool = True, audio_fallback_enabled: bool = True,
                 min_bitrate_kbps: int = 100, start_bitrate_kbps: int = 600, audio_bitrate_bps: int = 32000,
                 camera: Optional[str] = None, microphone: Optional[str] = None,
                 preferred_video_codecs: Optional[Sequence[str]] = None):
        """`camera` (VideoSource.CAMERA): a path such as /dev/video0 or a camera's name; None: the first camera.
        `microphone` (AudioSource.MICROPHONE): a PulseAudio source name; None: the system default. Device failures
        come to on_device_error; the stream goes on with black frames or silence. `preferred_video_codecs`: the video
        codecs to send, most preferred first (e.g. ["VP9", "VP8"]); None: VP8. The stream is sent in the first of them
        its first media connection agrees; an unknown name raises OTError 1011."""
        l = lib()
        self._listeners: dict[str, list[Callable]] = {}
        stats_type = l.decl.structs["ot_publisher_stats"]
        self._cb, self._refs = _callback_struct("ot_publisher_callbacks", self, {
            "stream_created": lambda s: (Stream._from_borrowed(s),),
            "stream_destroyed": lambda s: (Stream._from_borrowed(s),),
            "error": lambda code, msg: (int(code), msg.decode(errors="replace")),
            "stats": lambda p: (_struct_dict(ctypes.cast(p, ctypes.POINTER(stats_type)).contents),),
            "mute_forced": lambda a: (bool(a),),
            "device_error": lambda kind, code, msg: (DeviceKind(kind), int(code), msg.decode(errors="replace")),
        })
        s = l.decl.structs["ot_publisher_settings"]()
        check(l.fn.ot_publisher_settings_default(ctypes.byref(s)))
        self._name = name.encode()
        s.name, s.video_source, s.video_type = self._name, int(video_source), int(video_type)
        s.width, s.height, s.fps, s.max_bitrate_kbps = width, height, fps, max_bitrate_kbps
        s.audio_source, s.tone_hz = int(audio_source), float(tone_hz)
        s.publish_audio, s.publish_video = int(publish_audio), int(publish_video)
        s.audio_fallback_enabled = int(audio_fallback_enabled)
        s.min_bitrate_kbps, s.start_bitrate_kbps, s.audio_bitrate_bps = min_bitrate_kbps, start_bitrate_kbps, audio_bitrate_bps
        self._camera = None if camera is None else camera.encode()
        self._microphone = None if microphone is None else microphone.encode()
        s.camera, s.microphone = self._camera, self._microphone
        self._codecs = None if preferred_video_codecs is None else ",".join(preferred_video_codecs).encode()
        s.preferred_video_codecs = self._codecs
        self._h = l.fn.ot_publisher_new(ctypes.byref(s), ctypes.byref(self._cb))
        if not self._h:
            raise OTError(1011, "Publisher: a setting is out of range" + (" or there is no such camera" if video_source == VideoSource.CAMERA else ""))

    def on(self, event: str, fn: Callable) -> None:
        if not hasattr(self, "on_" + event):
            raise ValueError(f"unknown publisher event {event!r}")
        self._listeners.setdefault(event, []).append(fn)

    def on_stream_created(self, stream: Stream) -> None: ...
    def on_stream_destroyed(self, stream: Stream) -> None: ...
    def on_error(self, code: int, message: str) -> None: ...
    def on_stats(self, stats: dict) -> None: ...
    def on_mute_forced(self, active: bool) -> None:
        """A moderator muted this stream (one stream, a mute all not excluding it, or it was published during a mute
        all): no audio is sent and publish_audio reads False until set again."""
    def on_capture_start(self) -> None: ...
    def on_capture_stop(self) -> None: ...
    def on_device_error(self, kind: DeviceKind, code: int, message: str) -> None:
        """The microphone or camera could not be opened (9100) or was lost (9101); the stream goes on."""

    def _handle(self):
        if not self._h:
            raise OTError(9001, "the publisher is closed")
        return self._h

    @property
    def stream(self) -> Optional[Stream]:
        """The published stream as it is now (as OTPublisherKit.stream), or None while not publishing."""
        out = ctypes.c_void_p()
        status = lib().fn.ot_publisher_get_stream(self._handle(), ctypes.byref(out))
        if status == 1015:
            return None
        check(status, "stream")
        return Stream._from_copy(out.value)

    @property
    def publish_audio(self) -> bool:
        """Whether audio is sent now (others see the stream's has_audio change when it is set); False after a
        moderator's force mute until set again."""
        v = ctypes.c_int()
        check(lib().fn.ot_publisher_get_publish_audio(self._handle(), ctypes.byref(v)), "publish_audio")
        return bool(v.value)

    @publish_audio.setter
    def publish_audio(self, on: bool) -> None:
        check(lib().fn.ot_publisher_set_publish_audio(self._handle(), int(on)), "publish_audio")

    @property
    def publish_video(self) -> bool:
        """Whether video is sent (subscribers get video disabled/enabled with VideoReason.PUBLISH_VIDEO)."""
        v = ctypes.c_int()
        check(lib().fn.ot_publisher_get_publish_video(self._handle(), ctypes.byref(v)), "publish_video")
        return bool(v.value)

    @publish_video.setter
    def publish_video(self, on: bool) -> None:
        check(lib().fn.ot_publisher_set_publish_video(self._handle(), int(on)), "publish_video")

    def provide_video_frame(self, fmt: PixelFormat, width: int, height: int, planes: Sequence[bytes],
                            strides: Sequence[int], timestamp_us: int) -> None:
        """Pushes one frame (VideoSource.CUSTOM); the planes are copied."""
        n = len(planes)
        bufs = [ctypes.create_string_buffer(p, len(p)) for p in planes]
        arr = (ctypes.POINTER(ctypes.c_uint8) * n)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8)) for b in bufs])
        st = (ctypes.c_int32 * n)(*strides)
        check(lib().fn.ot_publisher_provide_video_frame(self._handle(), int(fmt), width, height, arr, st, n, timestamp_us),
              "provide_video_frame")

    def write_audio(self, samples: Sequence[int]) -> None:
        """Writes 48 kHz mono int16 PCM (AudioSource.CUSTOM)."""
        arr = (ctypes.c_int16 * len(samples))(*samples)
        check(lib().fn.ot_publisher_write_audio(self._handle(), arr, len(samples)), "write_audio")

    @property
    def stats(self) -> dict:
        s = lib().decl.structs["ot_publisher_stats"]()
        check(lib().fn.ot_publisher_get_stats(self._handle(), ctypes.byref(s)), "stats")
        return _struct_dict(s)

    def rtc_stats_report(self) -> str:
        buf = ctypes.create_string_buffer(1 << 16)
        check(lib().fn.ot_publisher_get_rtc_stats_report(self._handle(), buf, len(buf)), "rtc_stats_report")
        return buf.value.decode()

    def close(self) -> None:
        if self._h:
            h, self._h = self._h, None
            check(lib().fn.ot_publisher_delete(h), "Publisher.close")

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Subscriber:
    """Receives one stream (as OTSubscriber). Override on_* methods or use `on(event, fn)`.

    As the seeds define them, on_disconnected and on_reconnected frame a temporary interruption only; the
    subscription's end (the app's unsubscribe, the session's on_stream_destroyed or on_disconnected) is not a subscriber
    callback."""

    def __init__(self, stream: Stream | object, subscribe_to_audio: bool = True, subscribe_to_video: bool = True,
                 play_audio: bool = True, audio_fallback_enabled: bool = True, quality_loss_threshold: float = 0.15,
                 quality_window_seconds: int = 3, connect_timeout: float = 15.0):
        l = lib()
        self._listeners: dict[str, list[Callable]] = {}
        stats_type = l.decl.structs["ot_subscriber_stats"]
        self._cb, self._refs = _callback_struct("ot_subscriber_callbacks", self, {
            "connected": lambda s: (Stream._from_borrowed(s),),
            "error": lambda code, msg: (int(code), msg.decode(errors="replace")),
            "render_frame": lambda f: (VideoFrame._from_borrowed(f),),
            "audio_data": lambda samples, n, rate, ch: (ctypes.string_at(samples, 2 * n * ch), rate, ch),
            "video_disabled": lambda r: (VideoReason(r),),
            "video_enabled": lambda r: (VideoReason(r),),
            "stats": lambda p: (_struct_dict(ctypes.cast(p, ctypes.POINTER(stats_type)).contents),),
        })
        handle = getattr(stream, "_handle", None)
        if not handle:
            raise OTError(1011, "Subscriber: pass the Stream given to Session.on_stream_created")
        st = l.decl.structs["ot_subscriber_settings"]()
        check(l.fn.ot_subscriber_settings_default(ctypes.byref(st)))
        st.subscribe_to_audio, st.subscribe_to_video = int(subscribe_to_audio), int(subscribe_to_video)
        st.play_audio, st.audio_fallback_enabled = int(play_audio), int(audio_fallback_enabled)
        st.quality_loss_threshold, st.quality_window_seconds = float(quality_loss_threshold), int(quality_window_seconds)
        st.connect_timeout_ms = int(connect_timeout * 1000)
        if not l.fn.ot_stream_get_id(handle):
            raise OTError(9001, "Subscriber: the stream handle is no longer valid")
        self._h = l.fn.ot_subscriber_new_with_settings(handle, ctypes.byref(st), ctypes.byref(self._cb))
        if not self._h:
            raise OTError(1011, "Subscriber: a setting is out of range")
        self._subscribe_to_audio, self._subscribe_to_video = bool(subscribe_to_audio), bool(subscribe_to_video)

    def on(self, event: str, fn: Callable) -> None:
        if not hasattr(self, "on_" + event):
            raise ValueError(f"unknown subscriber event {event!r}")
        self._listeners.setdefault(event, []).append(fn)

    def on_connected(self, stream: Stream) -> None: ...
    def on_disconnected(self) -> None:
        """Media stopped for a while: this subscriber's connection failed and is being re-established, or (routed) the
        publisher's connection to the media router dropped. on_reconnected follows when media flows again; if it
        cannot, the session gets on_stream_destroyed."""
    def on_reconnected(self) -> None:
        """Media flows again after an interruption."""
    def on_error(self, code: int, message: str) -> None: ...
    def on_render_frame(self, frame: VideoFrame) -> None: ...
    def on_audio_data(self, pcm: bytes, sample_rate: int, channels: int) -> None: ...
    def on_video_disabled(self, reason: VideoReason) -> None: ...
    def on_video_enabled(self, reason: VideoReason) -> None: ...
    def on_video_disable_warning(self) -> None: ...
    def on_video_disable_warning_lifted(self) -> None: ...
    def on_stats(self, stats: dict) -> None: ...

    def _handle(self):
        if not self._h:
            raise OTError(9001, "the subscriber is closed")
        return self._h

    @property
    def stream(self) -> Stream:
        """The subscribed stream as it is now (its property changes included)."""
        out = ctypes.c_void_p()
        check(lib().fn.ot_subscriber_get_stream(self._handle(), ctypes.byref(out)), "stream")
        return Stream._from_copy(out.value)

    @property
    def subscribe_to_audio(self) -> bool:
        """Whether audio is received."""
        return self._subscribe_to_audio

    @subscribe_to_audio.setter
    def subscribe_to_audio(self, on: bool) -> None:
        check(lib().fn.ot_subscriber_set_subscribe_to_audio(self._handle(), int(on)), "subscribe_to_audio")
        self._subscribe_to_audio = bool(on)

    @property
    def subscribe_to_video(self) -> bool:
        """Whether video is received (on_video_disabled/enabled with VideoReason.SUBSCRIBE_TO_VIDEO follow a change)."""
        return self._subscribe_to_video

    @subscribe_to_video.setter
    def subscribe_to_video(self, on: bool) -> None:
        check(lib().fn.ot_subscriber_set_subscribe_to_video(self._handle(), int(on)), "subscribe_to_video")
        self._subscribe_to_video = bool(on)

    @property
    def stats(self) -> dict:
        s = lib().decl.structs["ot_subscriber_stats"]()
        check(lib().fn.ot_subscriber_get_stats(self._handle(), ctypes.byref(s)), "stats")
        return _struct_dict(s)

    def rtc_stats_report(self) -> str:
        buf = ctypes.create_string_buffer(1 << 16)
        check(lib().fn.ot_subscriber_get_rtc_stats_report(self._handle(), buf, len(buf)), "rtc_stats_report")
        return buf.value.decode()

    def close(self) -> None:
        """Deletes the subscriber; a subscription still going on ends with it (as Session.unsubscribe)."""
        if self._h:
            h, self._h = self._h, None
            check(lib().fn.ot_subscriber_delete(h), "Subscriber.close")

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _struct_dict(s) -> dict:
    return {name: getattr(s, name) for name, _ in s._fields_}


def publish(session: Session, publisher: Publisher) -> None:
    """Publishes into a connected session (also available as Session.publish)."""
    check(lib().fn.ot_session_publish(session._handle(), publisher._handle()), "publish")


def unpublish(session: Session, publisher: Publisher) -> None:
    check(lib().fn.ot_session_unpublish(session._handle(), publisher._handle()), "unpublish")


def subscribe(session: Session, subscriber: Subscriber) -> None:
    check(lib().fn.ot_session_subscribe(session._handle(), subscriber._handle()), "subscribe")


def unsubscribe(session: Session, subscriber: Subscriber) -> None:
    check(lib().fn.ot_session_unsubscribe(session._handle(), subscriber._handle()), "unsubscribe")


Session.publish = publish
Session.unpublish = unpublish
Session.subscribe = subscribe
Session.unsubscribe = unsubscribe
