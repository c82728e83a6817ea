"""Finds and loads libotsession.so and binds every function the header declares."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess

from . import _cdecl

SONAME = "libotsession.so.0"


class LibraryNotFound(OSError):
    """libotsession could not be loaded; the message lists every place tried."""


def _candidates() -> list[tuple[str, str]]:
    """(how it was found, path or name) in the order tried."""
    out = []
    env = os.environ.get("OTSESSION_LIBRARY")
    if env:
        out.append(("$OTSESSION_LIBRARY", env))
    if shutil.which("pkg-config"):
        try:
            libdir = subprocess.run(["pkg-config", "--variable=libdir", "otsession"], capture_output=True,
                                    text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            libdir = ""
        if libdir:
            out.append(("pkg-config otsession", os.path.join(libdir, SONAME)))
    out.append(("system loader", SONAME))
    found = ctypes.util.find_library("otsession")
    if found and found != SONAME:
        out.append(("ctypes.util.find_library", found))
    return out


def load() -> ctypes.CDLL:
    tried = []
    for how, where in _candidates():
        try:
            return ctypes.CDLL(where)
        except OSError as e:
            tried.append(f"  {how}: {where}: {e}")
    raise LibraryNotFound(
        "libotsession could not be loaded. Tried:\n" + "\n".join(tried) +
        "\nSet OTSESSION_LIBRARY to the path of libotsession.so, or install it "
        "(`make install`) so that pkg-config or the system loader finds it.")


class Library:
    """The loaded library with prototypes from the header: `lib.fn.ot_version()`."""

    def __init__(self) -> None:
        self.decl = decl()
        self.dll = load()
        for name, (restype, argtypes) in self.decl.functions.items():
            fn = getattr(self.dll, name)
            fn.restype = restype
            fn.argtypes = argtypes
        self.fn = self.dll
        self.constants = self.decl.constants


_instance: Library | None = None
_decl: _cdecl.Declarations | None = None


def decl() -> _cdecl.Declarations:
    """The header's declarations (parsed once; needs no library)."""
    global _decl
    if _decl is None:
        _decl = _cdecl.parse()
    return _decl


def lib() -> Library:
    """The process-wide library, loaded on first use."""
    global _instance
    if _instance is None:
        _instance = Library()
    return _instance
