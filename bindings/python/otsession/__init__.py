"""otsession: Python bindings (ctypes) for libotsession, a real-time video session SDK.

    import otsession
    print(otsession.version())

The shared library is found through $OTSESSION_LIBRARY, then pkg-config, then
the system loader.
"""
from __future__ import annotations

import ctypes
import enum
from typing import Callable, Optional

from ._errors import ErrorCode, OTError, check, status_message
from ._lib import LibraryNotFound, lib
from .devices import CameraMode, Device, DeviceKind, devices
from .media import (AudioSource, PixelFormat, Publisher, Subscriber, VideoFrame, VideoReason, VideoSource,
                    monotonic_us)
from .session import (CallbackMode, Capabilities, Connection, ICEConfig, ICEIncludeServers, ICEServer, ICETransportPolicy,
                      MuteForcedInfo, Role, Server, Session, SessionStatus, Stream, VideoType, attach_asyncio,
                      detach_asyncio, poll, poll_fd, token)

__all__ = ["version", "ErrorCode", "OTError", "LibraryNotFound", "LogLevel", "set_log_level",
           "set_log_callback", "status_message", "Server", "Session", "SessionStatus", "Role", "Stream",
           "Connection", "Capabilities", "VideoType", "token", "ICEConfig", "ICEServer", "ICETransportPolicy",
           "ICEIncludeServers", "Publisher", "Subscriber", "VideoFrame", "VideoSource",
           "AudioSource", "PixelFormat", "VideoReason", "monotonic_us", "CallbackMode", "MuteForcedInfo", "poll",
           "poll_fd", "attach_asyncio", "detach_asyncio", "devices", "Device", "DeviceKind", "CameraMode"]


def version() -> str:
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return lib().fn.ot_version().decode()


class LogLevel(enum.IntEnum):
    DISABLED = 0
    ERROR = 1
    WARN = 2
    INFO = 3
    DEBUG = 4
    TRACE = 5


def set_log_level(level: int) -> None:
    """Sets the most verbose level written to the log."""
    check(lib().fn.ot_log_set_level(int(level)), "set_log_level")


_log_cb_ref = None  # keeps the ctypes trampoline alive while the library may call it


def set_log_callback(callback: Optional[Callable[[LogLevel, str], None]]) -> None:
    """Sends log lines to `callback(level, message)`; None restores stderr.

    The callback runs on the library thread that logged; keep it short."""
    global _log_cb_ref
    l = lib()
    if callback is None:
        check(l.fn.ot_log_set_callback(ctypes.cast(None, l.decl.callbacks["ot_log_callback"]), None))
        _log_cb_ref = None
        return

    def trampoline(level: int, message: bytes, _user_data) -> None:
        try:
            callback(LogLevel(level), message.decode(errors="replace"))
        except Exception:  # an exception must never unwind into C
            import traceback
            traceback.print_exc()

    ref = l.decl.callbacks["ot_log_callback"](trampoline)
    check(l.fn.ot_log_set_callback(ref, None), "set_log_callback")
    _log_cb_ref = ref
