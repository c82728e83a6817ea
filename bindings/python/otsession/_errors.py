"""Errors carrying libotsession / OpenTok status codes."""
from __future__ import annotations

import enum

from ._lib import decl, lib


def _codes() -> dict[str, int]:
    return {k[len("OT_ERR_"):]: v for k, v in decl().constants.items() if k.startswith("OT_ERR_")}


ErrorCode = enum.IntEnum("ErrorCode", _codes())
ErrorCode.__doc__ = "Status codes (OpenTok's numbers where OpenTok has one)."


def status_message(code: int) -> str:
    """The library's English message for a status code."""
    return lib().fn.ot_status_message(code).decode()


class OTError(Exception):
    """A call failed; `code` is the status code (an ErrorCode where known)."""

    def __init__(self, code: int, context: str = "") -> None:
        try:
            self.code: int = ErrorCode(code)
        except ValueError:
            self.code = code
        self.message = status_message(code)
        super().__init__(f"{context + ': ' if context else ''}{self.message} ({code})")


def check(status: int, context: str = "") -> None:
    """Raises OTError unless `status` is OT_OK."""
    if status != 0:
        raise OTError(status, context)
