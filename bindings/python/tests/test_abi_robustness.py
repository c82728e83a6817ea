"""Every function the header declares, called with NULL, never-issued and
deleted handles and out-of-range values: it must return an error (or NULL),
never crash. The list of functions comes from the header, so new functions
are covered the day they are added."""
import ctypes
import subprocess
import sys
import textwrap

import otsession
from otsession._lib import lib

# Functions for which all-NULL/zero arguments are a valid request.
ACCEPT_NULLS = {
    "ot_version": "returns the version string",
    "ot_status_message": "status 0 is OT_OK",
    "ot_log_set_callback": "NULL restores stderr",
    "ot_log_set_level": "level 0 is OT_LOG_DISABLED",
    "ot_monotonic_time_us": "takes no argument",
    "ot_poll": "timeout 0 is a poll that does not wait; the count may be NULL",
}


def _is_pointer(t):
    return t in (ctypes.c_void_p, ctypes.c_char_p) or (isinstance(t, type) and issubclass(t, ctypes._Pointer)) \
        or (isinstance(t, type) and issubclass(t, ctypes._CFuncPtr))


def _failed(restype, result) -> bool:
    if restype is None:
        return True
    if _is_pointer(restype):
        return not result
    return result != 0


def _call_all(handle_value):
    l = lib()
    results = {}
    for name, (restype, argtypes) in sorted(l.decl.functions.items()):
        if name in ACCEPT_NULLS:
            continue
        args = []
        for t in argtypes:
            if t is ctypes.c_void_p:
                args.append(handle_value)       # every handle parameter
            elif _is_pointer(t):
                args.append(None)
            else:
                args.append(t(0))
        results[name] = (restype, getattr(l.fn, name)(*args))
    return results


def test_every_function_refuses_null_arguments():
    for name, (restype, result) in _call_all(None).items():
        assert _failed(restype, result), f"{name}(NULL, ...) did not fail: {result!r}"


def test_every_function_refuses_never_issued_handles():
    results = _call_all(0x4242_0000)
    handle_functions = [n for n, (_, argtypes) in lib().decl.functions.items() if ctypes.c_void_p in argtypes]
    assert len(handle_functions) > 10
    for name in handle_functions:
        if name in ACCEPT_NULLS:
            continue
        restype, result = results[name]
        assert _failed(restype, result), f"{name}(bogus handle, ...) did not fail: {result!r}"


def test_out_of_range_values():
    E = otsession.ErrorCode
    f = lib().fn
    assert f.ot_log_set_level(-1) == E.INVALID_PARAM
    assert f.ot_log_set_level(99) == E.INVALID_PARAM
    assert not f.ot_server_new(b"127.0.0.1", 65536, b"k", b"s")
    assert not f.ot_server_new(b"127.0.0.1", -5, b"k", b"s")
    buf = ctypes.create_string_buffer(64)
    assert f.ot_token_new(b"1", b"s", b"1_x", 17, None, 0, buf, 64) == E.INVALID_PARAM
    assert f.ot_token_new(b"1", b"s", b"1_x", 1, None, 9, buf, 64) == E.INVALID_PARAM


def test_a_crash_would_be_caught():
    """Runs the NULL sweep in a child process too, so a crash shows as a failure with a message
    rather than taking the test runner down."""
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        import test_abi_robustness as t
        t._call_all(None); t._call_all(0x4242_0000)
        print("survived")
    """) % (str(__import__("pathlib").Path(__file__).parent),)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "survived" in r.stdout, r.stderr[-2000:]


def test_every_function_refuses_deleted_handles():
    f = lib().fn
    callbacks = lib().decl.structs["ot_session_callbacks"]()
    for make, delete in [
        (lambda: f.ot_session_new(b"1", b"1_s", ctypes.byref(callbacks)), f.ot_session_delete),
        (lambda: f.ot_server_new(None, 0, b"1", b"secret"), f.ot_server_delete),
    ]:
        h = make()
        assert h
        assert delete(h) == 0
        for name, (restype, result) in _call_all(h).items():
            if ctypes.c_void_p in lib().decl.functions[name][1]:
                assert _failed(restype, result), f"{name}(deleted handle, ...) did not fail: {result!r}"
