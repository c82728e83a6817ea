"""Cameras, microphones and speakers: enumeration (see docs/devices.md)."""
from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass

from ._errors import check
from ._lib import lib


class DeviceKind(enum.IntEnum):
    MICROPHONE = 1
    """A PulseAudio source."""
    SPEAKER = 2
    """A PulseAudio sink."""
    CAMERA = 3
    """A V4L2 capture node (/dev/video*)."""


@dataclass(frozen=True)
class CameraMode:
    pixel_format: int
    """A PixelFormat number (YUY2 4, MJPEG 10, ...)."""
    width: int
    height: int
    max_fps: float


@dataclass(frozen=True)
class Device:
    id: str
    """What selects it: Publisher(camera=...), Publisher(microphone=...), Session.set_speaker(...)."""
    name: str
    """Human-readable: the PulseAudio description or the camera's name."""
    kind: DeviceKind
    is_default: bool
    """The system's default source or sink (cameras: the first one)."""
    is_monitor: bool
    """Microphones: the monitor of a sink."""
    modes: tuple[CameraMode, ...] = ()
    """Cameras: every capture mode the library can convert."""


def devices(kind: DeviceKind) -> list[Device]:
    """The devices of one kind now. Raises OTError(9100, DEVICE_UNAVAILABLE) for microphones and speakers when no
    sound server answers ($PULSE_SERVER, or the user's); an empty list when there is no camera."""
    l = lib()
    handle = ctypes.c_void_p()
    check(l.fn.ot_device_list_new(int(kind), ctypes.byref(handle)), "devices")
    try:
        count = ctypes.c_size_t()
        check(l.fn.ot_device_list_count(handle, ctypes.byref(count)), "devices")
        out = []
        for i in range(count.value):
            info = l.decl.structs["ot_device_info"]()
            check(l.fn.ot_device_list_get(handle, i, ctypes.byref(info)), "devices")
            modes = []
            for m in range(info.mode_count):
                mode = l.decl.structs["ot_camera_mode"]()
                check(l.fn.ot_device_list_get_camera_mode(handle, i, m, ctypes.byref(mode)), "devices")
                modes.append(CameraMode(mode.pixel_format, mode.width, mode.height, mode.max_fps))
            out.append(Device(info.id.decode(errors="replace"), info.name.decode(errors="replace"), DeviceKind(info.kind),
                              bool(info.is_default), bool(info.is_monitor), tuple(modes)))
        return out
    finally:
        l.fn.ot_device_list_delete(handle)
