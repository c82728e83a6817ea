"""Every function the header declares, called with NULL, never-issued, deleted
and live handles of another type, and absurd numbers in every numeric argument
and settings member: it must return an error (or NULL), never crash. The list of
functions and members comes from the header, so new ones are covered the day
they are added."""
import ctypes
import json
import math
import re
import subprocess
import sys
import textwrap

import otsession
from otsession import _cdecl
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
    pub_callbacks = lib().decl.structs["ot_publisher_callbacks"]()
    for make, delete in [
        (lambda: f.ot_session_new(b"1", b"1_s", ctypes.byref(callbacks)), f.ot_session_delete),
        (lambda: f.ot_publisher_new(None, ctypes.byref(pub_callbacks)), f.ot_publisher_delete),
        (lambda: f.ot_server_new(None, 0, b"1", b"secret"), f.ot_server_delete),
    ]:
        h = make()
        assert h
        assert delete(h) == 0
        for name, (restype, result) in _call_all(h).items():
            if ctypes.c_void_p in lib().decl.functions[name][1]:
                assert _failed(restype, result), f"{name}(deleted handle, ...) did not fail: {result!r}"


def _parameters():
    """name -> [(C type, parameter name)] of every function the header declares."""
    text = _cdecl._strip_comments(_cdecl.HEADER.read_text())
    out = {}
    for m in re.finditer(r"(\w+)\(([^;(){}]*)\);", text):
        if m.group(1) in lib().decl.functions:
            params = [p.strip() for p in m.group(2).split(",") if p.strip() not in ("", "void")]
            out[m.group(1)] = [tuple(p.rsplit(" ", 1)) for p in params]
    return out


def _handle_kind(ctype):
    """The opaque type a parameter is a handle of (`ot_session *`, `ot_stream const *`), else None."""
    m = re.fullmatch(r"(ot_\w+)(?: const)? \*", ctype)
    return m.group(1) if m and m.group(1) in lib().decl.opaque else None


def _live_handles():
    """A live server, session and publisher with custom video and audio (so that the checks of the frames and
    samples it is given are reached); none needs a network."""
    f, d = lib().fn, lib().decl
    settings, pub_callbacks = d.structs["ot_publisher_settings"](), d.structs["ot_publisher_callbacks"]()
    assert f.ot_publisher_settings_default(ctypes.byref(settings)) == 0
    settings.video_source = d.constants["OT_VIDEO_SOURCE_CUSTOM"]
    settings.audio_source = d.constants["OT_AUDIO_SOURCE_CUSTOM"]
    session_callbacks = d.structs["ot_session_callbacks"]()
    handles = {"ot_server": f.ot_server_new(None, 0, b"1", b"secret"),
               "ot_session": f.ot_session_new(b"1", b"1_s", ctypes.byref(session_callbacks)),
               "ot_publisher": f.ot_publisher_new(ctypes.byref(settings), ctypes.byref(pub_callbacks))}
    assert all(handles.values()), handles
    return handles


def _delete_live(handles):
    f = lib().fn
    assert f.ot_publisher_delete(handles["ot_publisher"]) == 0
    assert f.ot_session_delete(handles["ot_session"]) == 0
    assert f.ot_server_delete(handles["ot_server"]) == 0


def test_every_function_refuses_live_handles_of_another_type():
    """A live handle where another kind belongs (a server where a session or a stream goes, ...) is refused, and
    the object behind it is left alone."""
    l, f = lib(), lib().fn
    live = _live_handles()
    checked = 0
    for name, params in sorted(_parameters().items()):
        kinds = {_handle_kind(t) for t, _ in params} - {None}
        if not kinds or name in ACCEPT_NULLS:
            continue
        wrong = next(k for k in live if k not in kinds)
        args = [live[wrong] if _handle_kind(t) else (None if _is_pointer(a) else a(0))
                for (t, _), a in zip(params, l.decl.functions[name][1])]
        restype = l.decl.functions[name][0]
        result = getattr(f, name)(*args)
        assert _failed(restype, result), f"{name}({wrong} handle, ...) did not fail: {result!r}"
        checked += 1
    assert checked > 60
    # Not one call touched the objects: all three still answer.
    status, on, buf = ctypes.c_int32(), ctypes.c_int32(), ctypes.create_string_buffer(256)
    assert f.ot_session_get_status(live["ot_session"], ctypes.byref(status)) == 0
    assert f.ot_publisher_get_publish_audio(live["ot_publisher"], ctypes.byref(on)) == 0 and on.value == 1
    assert f.ot_server_create_session(live["ot_server"], 0, buf, 256) == 0
    _delete_live(live)


# Parameters (by name) whose every value is acceptable: buffer sizes and capacities (a larger buffer is fine),
# booleans, timestamps. Every other number has a range, and a call with a number far out of it must fail.
PERMISSIVE_NUMBERS = {"size", "capacity", "timestamp_us", "on", "relayed", "e2ee", "status"}
# Functions left out of the absurd-number sweep, and why.
NOT_SWEPT = {
    "ot_poll": "a timeout of INT32_MAX ms is a valid (long) wait; ot_poll(-2) is checked in test_out_of_range_values",
}


def _absurd_sweep(live=None, only=None):
    """Calls every function (or those named in `only`) with each extreme of its numeric parameters (all at once:
    minimum, -1, maximum), handles of the right kind from `live` (default: _live_handles(), deleted after), a zeroed
    64 KiB buffer for every other pointer and NULL callbacks; returns
    name -> [(flavour, status, or for functions that return a pointer whether it is not NULL)]."""
    l = lib()
    own = live is None
    live = _live_handles() if own else live
    buf = ctypes.create_string_buffer(65536)
    extremes = {"min": lambda t: -(1 << (8 * ctypes.sizeof(t) - 1)) if t(-1).value < 0 else (1 << (8 * ctypes.sizeof(t))) - 1,
                "minus_one": lambda t: -1 if t(-1).value < 0 else (1 << (8 * ctypes.sizeof(t))) - 1,
                "max": lambda t: (1 << (8 * ctypes.sizeof(t) - 1)) - 1 if t(-1).value < 0 else (1 << (8 * ctypes.sizeof(t) - 1))}
    results = {}
    for name, params in sorted(_parameters().items()):
        if name in NOT_SWEPT or name.endswith("_delete") or (only is not None and name not in only):
            continue
        restype, argtypes = l.decl.functions[name]
        for flavour, value in extremes.items():
            args = []
            for (ctype, pname), a in zip(params, argtypes):
                kind = _handle_kind(ctype)
                if kind:
                    args.append(live.get(kind, 0x4242_0000))
                elif isinstance(a, type) and issubclass(a, ctypes._CFuncPtr):
                    args.append(a())  # NULL
                elif _is_pointer(a):
                    args.append(ctypes.cast(buf, a))
                elif a is ctypes.c_double:
                    args.append(float("nan"))
                else:
                    args.append(a(value(a)))
            ctypes.memset(buf, 0, len(buf))  # what an earlier call wrote there is no argument of this one
            result = getattr(l.fn, name)(*args)
            results.setdefault(name, []).append((flavour, bool(result) if _is_pointer(restype) else result))
    if own:
        _delete_live(live)
    return results


def _in_child(function, module="test_abi_robustness"):
    """Runs `function` of `module` (a test module beside this one) in a child process (so that a crash is a failure
    with a message, not the end of the test run) and returns what it returned, through JSON."""
    code = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, %r)
        import %s as t
        print(json.dumps(t.%s()))
    """) % (str(__import__("pathlib").Path(__file__).parent), module, function)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{function} crashed ({r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_absurd_numbers_in_every_numeric_argument():
    """Minimum, -1 and maximum of every numeric parameter (SIZE_MAX, INT32_MIN, ...) of every function, in a
    child process so that a crash is a failure with a message: no call crashes, and every call with a number that
    has a range fails: with OT_ERR_INVALID_PARAM (or NULL) where its handles are live, so the number was judged."""
    results = _in_child("_absurd_sweep")
    assert len(results) > 80
    assert {"ot_publisher_provide_video_frame", "ot_publisher_write_audio", "ot_session_force_mute_all", "ot_token_new",
            "ot_server_new_token", "ot_device_list_new", "ot_log_set_level"} <= set(_ranged(results))
    _check_absurd_results(results, live_kinds={"ot_server", "ot_session", "ot_publisher"})


def _ranged(results):
    """The functions of an absurd sweep that have a number with a range."""
    params = _parameters()
    return [n for n in results
            if any(not _is_pointer(a) and pname not in PERMISSIVE_NUMBERS
                   for (_, pname), a in zip(params[n], lib().decl.functions[n][1]))]


def _check_absurd_results(results, live_kinds):
    """No function made an object from absurd numbers, and each with a ranged number refused them: with
    OT_ERR_INVALID_PARAM where all its handles were live (of `live_kinds`), so the number was judged."""
    params = _parameters()
    for name in _ranged(results):
        judged = all(_handle_kind(t) in live_kinds | {None} for t, _ in params[name])
        for flavour, result in results[name]:
            if result is False or result is True:
                assert not result, f"{name} made an object from every number at its {flavour}"
            elif judged:
                assert result == otsession.ErrorCode.INVALID_PARAM, f"{name}, every number at its {flavour}: {result}"
            else:
                assert result != 0, f"{name} accepted every number at its {flavour}"


def _extremes(t):
    """The absurd values of a numeric ctypes type: its minimum, -1 and maximum (unsigned: its maximum, 2^63);
    floating point: NaN, infinities and the largest magnitudes."""
    if t is ctypes.c_double:
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "max": 1e308, "-max": -1e308}
    bits = 8 * ctypes.sizeof(t)
    if t(-1).value < 0:
        return {"min": -(1 << (bits - 1)), "minus_one": -1, "max": (1 << (bits - 1)) - 1}
    return {"max": (1 << bits) - 1, "half": 1 << (bits - 1)}


# Members that take any value: booleans (ot_bool), and a tone frequency that only OT_AUDIO_SOURCE_TONE reads (the
# default source is silence; the tone's range is checked by test_media).
PERMISSIVE_MEMBERS = {"publish_audio", "publish_video", "audio_fallback_enabled", "connection_events_suppressed",
                      "ice_filter_out_lan_candidates", "tone_hz"}


def _logged(call):
    """Runs `call()` with the library's warnings collected: (its result, the log lines)."""
    f, d = lib().fn, lib().decl
    lines = []
    cb = d.callbacks["ot_log_callback"](lambda level, message, _ud: lines.append(message.decode(errors="replace")))
    assert f.ot_log_set_level(d.constants["OT_LOG_WARN"]) == 0
    f.ot_log_set_callback(cb, None)
    try:
        return call(), lines
    finally:
        f.ot_log_set_callback(d.callbacks["ot_log_callback"](), None)


def _settings_cases():
    """struct name -> (its default function, a function making the default valid, does the library accept it), with
    valid settings that list one ICE server (so that a count meets a real array); and that ot_ice_server."""
    f, d = lib().fn, lib().decl
    urls = (ctypes.c_char_p * 1)(b"stun:127.0.0.1:3478")
    servers = (d.structs["ot_ice_server"] * 1)()
    servers[0].url = b"stun:127.0.0.1:3478"
    pub_callbacks = d.structs["ot_publisher_callbacks"]()

    def publisher(s):
        h = f.ot_publisher_new(ctypes.byref(s), ctypes.byref(pub_callbacks))
        return bool(h) and f.ot_publisher_delete(h) == 0

    def server(s):
        s.api_key, s.api_secret = b"1", b"secret"
        s.ice_server_urls, s.ice_server_url_count = ctypes.cast(urls, type(s.ice_server_urls)), 1
        return s

    def session(s):
        s.server_url = b"ws://127.0.0.1:1"
        s.ice_servers, s.ice_server_count = ctypes.cast(servers, type(s.ice_servers)), 1
        return s

    def made_server(s):
        h = f.ot_server_new_with_options(ctypes.byref(s))
        return bool(h) and f.ot_server_delete(h) == 0

    cases = {  # struct: (its default function, the valid base, does the library accept it)
        "ot_publisher_settings": (f.ot_publisher_settings_default, lambda s: s, publisher),
        "ot_server_options": (f.ot_server_options_default, server, made_server),
        "ot_session_settings": (f.ot_session_settings_default, session,
                                lambda s: f.ot_session_settings_validate(ctypes.byref(s)) == 0),
    }
    return cases, servers[0]


def _settings_sweep():
    """Each numeric member of the settings structs, one at a time, at each of its extremes: name -> [member, flavour,
    accepted, whether a log line names the member]."""
    d = lib().decl
    cases, _ = _settings_cases()
    out = {}
    for name, (default, valid, accepts) in cases.items():
        def base():
            s = d.structs[name]()
            assert default(ctypes.byref(s)) == 0
            return valid(s)
        assert accepts(base()), f"the base {name} is refused"
        for member, t in d.structs[name]._fields_:
            if not (t is ctypes.c_double or (isinstance(t, type) and issubclass(t, ctypes._SimpleCData) and t._type_ in "bBhHiIlLqQ")):
                continue
            for flavour, value in _extremes(t).items():
                s = base()
                setattr(s, member, value)
                accepted, lines = _logged(lambda: accepts(s))
                out.setdefault(name, []).append((member, flavour, accepted, any(member in line for line in lines)))
    return out


def _string_sweep():
    """Each string member of the settings structs (and of the one ot_ice_server the session settings list), one at a
    time, NULL and not UTF-8: [struct.member, flavour, accepted]."""
    d = lib().decl
    cases, ice = _settings_cases()
    rows = []
    for name, (default, valid, accepts) in cases.items():
        def base():
            s = d.structs[name]()
            assert default(ctypes.byref(s)) == 0
            return valid(s)
        targets = [(name, base, None)] + ([("ot_ice_server", base, ice)] if name == "ot_session_settings" else [])
        for struct, make, element in targets:
            for member, t in d.structs[struct]._fields_:
                if t is not ctypes.c_char_p:
                    continue
                for flavour, value in {"null": None, "not_utf8": b"\xff\xfe"}.items():
                    s = make()
                    target = element if element is not None else s
                    kept = getattr(target, member)
                    setattr(target, member, value)
                    rows.append((f"{struct}.{member}", flavour, accepts(s)))
                    setattr(target, member, kept)
    return rows


# String members that must not be NULL (the header says so), and those the default settings never read (the camera's
# and microphone's names: the default sources are the test pattern and silence).
REQUIRED_STRINGS = {"ot_server_options.api_key", "ot_server_options.api_secret", "ot_ice_server.url"}
UNREAD_STRINGS = {"ot_publisher_settings.camera", "ot_publisher_settings.microphone"}


def test_null_and_malformed_strings_in_every_settings_member():
    """Every string member NULL is accepted where the header allows it (the default) and refused where it does not;
    not UTF-8 it is refused wherever it is read. In a child process."""
    rows = _in_child("_string_sweep")
    assert len({m for m, _, _ in rows}) >= 15
    wrong = [r for r in rows if r[2] != ((r[1] == "null" and r[0] not in REQUIRED_STRINGS) or (r[1] == "not_utf8" and r[0] in UNREAD_STRINGS))]
    assert wrong == [], wrong


def test_absurd_numbers_in_every_settings_member():
    """ot_publisher_settings, ot_server_options and ot_session_settings with each numeric member at each extreme (a
    count of SIZE_MAX beside a real array, INT32_MAX kbit/s, NaN, ...), in a child process: nothing crashes, and every
    member that has a range refuses its extremes with a logged reason that names the C member (ranges the C layer
    leaves to the Swift settings' validate() included)."""
    results = _in_child("_settings_sweep")
    assert {"ot_publisher_settings", "ot_server_options", "ot_session_settings"} == set(results)
    members = {m for rows in results.values() for m, _, _, _ in rows}
    assert {"ice_server_url_count", "ice_server_count", "max_bitrate_kbps", "media_workers", "connect_timeout_ms",
            "audio_bitrate_bps", "ping_interval_ms"} <= members
    accepted = [f"{name}.{m} at its {flavour}" for name, rows in results.items() for m, flavour, ok, _ in rows
                if ok and m not in PERMISSIVE_MEMBERS]
    assert accepted == []
    unnamed = [f"{name}.{m} at its {flavour}" for name, rows in results.items() for m, flavour, ok, named in rows
               if not ok and not named]
    assert unnamed == []


def _frame_layouts():
    """ot_publisher_provide_video_frame on planes that end where readable memory ends: an RGBA picture 16 wide
    and 16 high as a cropped view of a buffer 32 pixels wide (the last row only 64 bytes), then strides no layout
    has. Returns each call's status."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                             ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = 4096
    region = libc.mmap(None, 2 * page, 3, 0x22, -1, 0)           # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    assert region not in (None, ctypes.c_void_p(-1).value)
    assert libc.mprotect(region + page, page, 0) == 0            # the second page: PROT_NONE
    span = 128 * 15 + 64
    plane = ctypes.cast(region + page - span, ctypes.POINTER(ctypes.c_uint8))
    ctypes.memset(plane, 0x80, span)
    live = _live_handles()
    f, d = lib().fn, lib().decl
    rgba = d.constants["OT_PIXEL_FORMAT_RGBA"]
    planes = (ctypes.POINTER(ctypes.c_uint8) * 1)(plane)
    results = {}
    for name, stride in [("cropped_view", 128), ("int32_max", 2**31 - 1), ("two_mib", 2 << 20)]:
        results[name] = f.ot_publisher_provide_video_frame(live["ot_publisher"], rgba, 16, 16, planes,
                                                            (ctypes.c_int32 * 1)(stride), 1, 0)
    _delete_live(live)
    return results


def test_a_frames_planes_are_read_within_their_layout():
    """A plane's last row is read only as wide as the picture (a cropped view's buffer ends there; reading whole
    strides ran into the unreadable page and crashed), and absurd strides are refused instead of read."""
    results = _in_child("_frame_layouts")
    # Not published, so a frame that passed the checks is refused as not capturing, after it was copied.
    assert results["cropped_view"] == otsession.ErrorCode.ILLEGAL_STATE, results
    assert results["int32_max"] == otsession.ErrorCode.INVALID_PARAM, results
    assert results["two_mib"] == otsession.ErrorCode.INVALID_PARAM, results
