"""Reads the declarations of otsession.h into ctypes types.

The package ships a copy of the generated public header (otsession/otsession.h,
written by tools/gen-header.py) and builds every prototype, struct and constant
from it, so no signature is written twice.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field
from pathlib import Path

HEADER = Path(__file__).with_name("otsession.h")

_SCALARS = {
    "void": None, "int": ctypes.c_int, "unsigned int": ctypes.c_uint, "long": ctypes.c_long,
    "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16,
    "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t, "double": ctypes.c_double, "float": ctypes.c_float, "char": ctypes.c_char,
    "bool": ctypes.c_bool,
}


@dataclass
class Declarations:
    """Everything the header declares, as ctypes objects."""
    constants: dict[str, int] = field(default_factory=dict)
    types: dict[str, object] = field(default_factory=dict)       # typedef name -> ctypes type
    opaque: set[str] = field(default_factory=set)                 # opaque handle type names
    structs: dict[str, type] = field(default_factory=dict)        # struct typedef name -> Structure
    callbacks: dict[str, type] = field(default_factory=dict)      # function-pointer typedef -> CFUNCTYPE
    functions: dict[str, tuple[object, list[object]]] = field(default_factory=dict)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"^\s*#(?!define).*$", "", text, flags=re.M)


def _split_params(params: str) -> list[str]:
    params = params.strip()
    if params in ("", "void"):
        return []
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            out.append(cur.strip()); cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    out.append(cur.strip())
    return out


class _Parser:
    def __init__(self, text: str):
        self.d = Declarations()
        self.text = _strip_comments(text)

    def ctype(self, spec: str):
        """ctypes type for a C type spelling such as 'char const *' or 'ot_session *'."""
        spec = " ".join(spec.replace("const", " ").replace("*", " * ").split())
        stars = spec.count("*")
        base = spec.replace("*", "").strip()
        if stars == 0:
            if base in _SCALARS:
                return _SCALARS[base]
            if base in self.d.types:
                return self.d.types[base]
            if base in self.d.callbacks:
                return self.d.callbacks[base]
            if base in self.d.structs:
                return self.d.structs[base]
            raise ValueError(f"otsession.h: unknown type {spec!r}")
        if stars == 1:
            if base == "char":
                return ctypes.c_char_p
            if base == "void" or base in self.d.opaque:
                return ctypes.c_void_p
        inner = self.ctype(base + " *" * (stars - 1)) if stars > 1 else self.ctype(base)
        return ctypes.POINTER(inner) if inner is not None else ctypes.c_void_p

    def param_type(self, param: str):
        m = re.match(r"(.*?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", param, flags=re.S)
        if m:  # inline function pointer
            return m.group(2), self.funcptr(m.group(1), m.group(3))
        m = re.match(r"(.*?)(\w+)$", param)
        if not m or not m.group(1).strip():
            return None, self.ctype(param)
        return m.group(2), self.ctype(m.group(1))

    def funcptr(self, ret: str, params: str):
        return ctypes.CFUNCTYPE(self.ctype(ret), *[self.param_type(p)[1] for p in _split_params(params)])

    def run(self) -> Declarations:
        d, text = self.d, self.text
        for name, value in re.findall(r"#define\s+(OT_\w+)\s+(-?\d+)", text):
            d.constants[name] = int(value)
        text = re.sub(r"^\s*#define.*$", "", text, flags=re.M)
        for stmt in re.finditer(r"[^;{}]*(?:\{[^{}]*\})?[^;{}]*;", text, flags=re.S):
            self.statement(" ".join(stmt.group(0).split()))
        return d

    def statement(self, s: str):
        d = self.d
        if m := re.match(r"enum \w+ \{(.*)\};$", s):
            for item in m.group(1).split(","):
                if "=" in item:
                    k, v = item.split("=")
                    d.constants[k.strip()] = int(v.strip())
        elif m := re.match(r"typedef struct (\w+) (\w+);$", s):
            d.opaque.add(m.group(2))
        elif m := re.match(r"typedef struct (\w+) \{(.*)\} (\w+);$", s):
            fields = []
            for f in filter(None, (x.strip() for x in m.group(2).split(";"))):
                fname, ftype = self.param_type(f)
                fields.append((fname, ftype))
            d.structs[m.group(3)] = type(m.group(3), (ctypes.Structure,), {"_fields_": fields})
        elif m := re.match(r"typedef (.*?)\(\s*\*\s*(\w+)\)\s*\((.*)\);$", s):
            d.callbacks[m.group(2)] = self.funcptr(m.group(1), m.group(3))
        elif m := re.match(r"typedef ([\w ]+?) (\w+);$", s):
            d.types[m.group(2)] = self.ctype(m.group(1))
        elif m := re.match(r"(.*?)(\w+)\((.*)\);$", s):
            ret = self.ctype(m.group(1))
            d.functions[m.group(2)] = (ret, [self.param_type(p)[1] for p in _split_params(m.group(3))])


def parse(text: str | None = None) -> Declarations:
    """Parses otsession.h (the packaged copy by default)."""
    return _Parser(HEADER.read_text() if text is None else text).run()
