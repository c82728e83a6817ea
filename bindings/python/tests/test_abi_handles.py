"""The handles a connected session gives (streams, connections, subscribers, video frames, device lists), swept as
test_abi_robustness sweeps the others: each passed where every other handle type belongs, used after it was
deleted, after its callback returned (a borrowed one) and after its owner went; and the settings a subscriber and a
signal take, at absurd values. Real objects come from an embedded server on loopback, in a child process so that a
crash is a failure with a message."""
import ctypes
import re
import threading
import time

import pytest

import otsession
from otsession._lib import lib
from session_recorder import publisher_and_viewer, router_stats, wait_until
from test_abi_robustness import (ACCEPT_NULLS, _absurd_sweep, _check_absurd_results, _extremes, _handle_kind, _in_child,
                                 _is_pointer, _logged, _parameters)
from test_media import router_subscribers

E = otsession.ErrorCode


class _Watcher:
    """A session of raw C callbacks that keeps what they were lent (the borrowed handles' bits) and what happened
    inside them: the subscriber's first frame and stream, the watching session's first stream and connections."""

    def __init__(self):
        d, f = lib().decl, lib().fn
        self.borrowed, self.copies, self.inside = {}, {}, {}
        self.frames = 0
        self.event = threading.Event()
        self._keep = []

        def lend(kind, copy, delete):
            def record(*args):
                h = args[-1]
                if kind == "frame":
                    self.frames += 1
                if kind in self.borrowed or not h:
                    return
                self.borrowed[kind] = h
                self.copies[kind] = copy(h)
                # Deleting what the library lends is refused, and the handle still answers after the refusal.
                self.inside[kind] = (delete(h), bool(copy_and_delete(copy, delete, h)))
                self.event.set()
            return record

        def copy_and_delete(copy, delete, h):
            c = copy(h)
            return c and delete(c) == 0

        self.session_callbacks = d.structs["ot_session_callbacks"]()
        self.subscriber_callbacks = d.structs["ot_subscriber_callbacks"]()
        for struct, member, kind, copy, delete in [
            (self.session_callbacks, "on_stream_created", "session_stream", f.ot_stream_copy, f.ot_stream_delete),
            (self.session_callbacks, "on_connection_created", "connection", f.ot_connection_copy, f.ot_connection_delete),
            (self.subscriber_callbacks, "on_connected", "subscriber_stream", f.ot_stream_copy, f.ot_stream_delete),
            (self.subscriber_callbacks, "on_render_frame", "frame", f.ot_video_frame_copy, f.ot_video_frame_delete),
        ]:
            fn = dict(struct._fields_)[member](lend(kind, copy, delete))
            self._keep.append(fn)
            setattr(struct, member, fn)


def _connected_sweep():
    """A server, a publishing and a viewing session (publisher_and_viewer), a subscriber of raw C callbacks in the
    viewer, a watching session of raw C callbacks, a camera device list; then every function that takes a handle
    called with, in each handle parameter, every wrong handle (a live one of another type; a deleted, borrowed after
    its callback, or orphaned one of any type), the other handles live and of the right type, a zeroed buffer for every
    other pointer and 0 for every number. Returns what each call returned, what the callbacks saw, and whether every
    live object still answers afterwards."""
    d, f = lib().decl, lib().fn
    out = {}
    with otsession.Server(api_key="4711", api_secret="ab" * 20) as server:
        sid = server.create_session()
        with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams):
            publisher = otsession.Publisher(name="swept")
            pub_s.publish(publisher)
            stream = streams.get(timeout=15)
            w = _Watcher()
            settings = d.structs["ot_session_settings"]()
            assert f.ot_session_settings_default(ctypes.byref(settings)) == 0
            settings.server_url = server.url.encode()
            watcher = f.ot_session_new_with_settings(server.api_key.encode(), sid.encode(), ctypes.byref(w.session_callbacks),
                                                    ctypes.byref(settings))
            assert f.ot_session_connect(watcher, server.token(sid, otsession.Role.SUBSCRIBER).encode()) == 0
            subscriber = f.ot_subscriber_new(stream._handle, ctypes.byref(w.subscriber_callbacks))
            assert subscriber and f.ot_session_subscribe(sub_s._handle(), subscriber) == 0
            assert wait_until(lambda: len(w.borrowed) == 4, timeout=30), f"callbacks seen: {sorted(w.borrowed)}"
            out["inside"] = w.inside

            devices = ctypes.c_void_p()
            assert f.ot_device_list_new(d.constants["OT_DEVICE_CAMERA"], ctypes.byref(devices)) == 0
            live = {"ot_server": server._h, "ot_session": sub_s._handle(), "ot_publisher": publisher._handle(),
                    "ot_subscriber": subscriber, "ot_stream": w.copies["subscriber_stream"],
                    "ot_connection": w.copies["connection"], "ot_video_frame": w.copies["frame"], "ot_device_list": devices.value}
            dead = {f"borrowed {k}": (k2, w.borrowed[k]) for k, k2 in [("session_stream", "ot_stream"), ("subscriber_stream", "ot_stream"),
                                                                      ("connection", "ot_connection"), ("frame", "ot_video_frame")]}
            for kind, copy, delete in [("ot_stream", f.ot_stream_copy, f.ot_stream_delete),
                                       ("ot_connection", f.ot_connection_copy, f.ot_connection_delete),
                                       ("ot_video_frame", f.ot_video_frame_copy, f.ot_video_frame_delete)]:
                h = copy(live[kind])
                assert h and delete(h) == 0
                dead[f"deleted {kind}"] = (kind, h)
            gone = ctypes.c_void_p()
            assert f.ot_device_list_new(d.constants["OT_DEVICE_CAMERA"], ctypes.byref(gone)) == 0
            assert f.ot_device_list_delete(gone) == 0
            dead["deleted ot_device_list"] = ("ot_device_list", gone.value)
            never = f.ot_subscriber_new(live["ot_stream"], ctypes.byref(w.subscriber_callbacks))
            assert never and f.ot_subscriber_delete(never) == 0
            dead["deleted ot_subscriber"] = ("ot_subscriber", never)

            out["calls"] = _wrong_handle_calls(live, dead)
            out["other_session"] = _other_session(pub_s._handle(), live, w)
            out["session_connection"] = _session_connection(watcher)
            out["answers"] = _answers(live)
            out["absurd"] = _absurd_sweep(live, only=_numeric_functions_of(NEW_KINDS))
            out["subscriber_settings"] = _subscriber_settings_sweep(live["ot_stream"], w.subscriber_callbacks)
            out["signal_options"] = _signal_options_sweep(pub_s._handle())
            out["owners_gone"] = _owners_gone(live, sub_s, watcher, w)
            assert f.ot_device_list_delete(devices) == 0
            for k in ("session_stream", "subscriber_stream"):
                f.ot_stream_delete(w.copies[k])
            f.ot_connection_delete(w.copies["connection"])
            f.ot_video_frame_delete(w.copies["frame"])
            publisher.close()
    return out


# The handle types test_abi_robustness cannot make without a connected session (and the device list).
NEW_KINDS = {"ot_subscriber", "ot_stream", "ot_connection", "ot_video_frame", "ot_device_list"}
ALL_KINDS = NEW_KINDS | {"ot_server", "ot_session", "ot_publisher"}


def _numeric_functions_of(kinds):
    """The functions that take a handle of one of `kinds` and a number."""
    return {name for name, params in _parameters().items()
            if {_handle_kind(t) for t, _ in params} & kinds
            and any(not _is_pointer(a) for a in lib().decl.functions[name][1])}


def _array_kind(ctype):
    """The handle type of an array-of-handles parameter (`ot_stream const * const *`), else None."""
    m = re.fullmatch(r"(ot_\w+) const \* const \*", ctype)
    return m.group(1) if m and m.group(1) in lib().decl.opaque else None


def _args(name, params, position, handle, live, buf):
    """The arguments of `name` with `handle` in handle parameter `position` (an array of handles: that one handle, and
    1 in the count after it), live handles of the right type in the others, the zeroed buffer for every other
    pointer, NULL callbacks and 0 for every other number."""
    args = []
    for i, ((ctype, _), a) in enumerate(zip(params, lib().decl.functions[name][1])):
        kind = _handle_kind(ctype)
        if i == position and _array_kind(ctype):
            args.append(ctypes.cast((ctypes.c_void_p * 1)(handle), a))
        elif i == position + 1 and _array_kind(params[position][0]):
            args.append(a(1))
        elif kind:
            args.append(handle if i == position else live[kind])
        elif isinstance(a, type) and issubclass(a, ctypes._CFuncPtr):
            args.append(a())
        elif _is_pointer(a):
            args.append(ctypes.cast(buf, a))
        else:
            args.append(a(0))
    return args


def _wrong_handle_calls(live, dead):
    """[(function, wrong handle's label, result)] for every wrong handle in every handle parameter of every function."""
    l = lib()
    buf = ctypes.create_string_buffer(65536)
    wrong = [(f"live {k}", k, h) for k, h in live.items()] + [(label, k, h) for label, (k, h) in dead.items()]
    calls = []
    for name, params in sorted(_parameters().items()):
        if name in ACCEPT_NULLS:
            continue
        restype = l.decl.functions[name][0]
        for position, (ctype, _) in enumerate(params):
            kind = _handle_kind(ctype) or _array_kind(ctype)
            if not kind:
                continue
            for label, k, h in wrong:
                if label == f"live {kind}":
                    continue
                ctypes.memset(buf, 0, len(buf))
                result = getattr(l.fn, name)(*_args(name, params, position, h, live, buf))
                calls.append((name, label, bool(result) if _is_pointer(restype) else result))
    return calls


def _other_session(other, live, w):
    """Handles of the right type that belong to another session (`other`, the publisher's, where `live`'s subscriber
    is not subscribed and its publisher is published): refused with the status that says so; the subscriber still
    receives in its own session afterwards."""
    f = lib().fn
    frames = w.frames
    out = {"unsubscribe": f.ot_session_unsubscribe(other, live["ot_subscriber"]),
           "unpublish": f.ot_session_unpublish(live["ot_session"], live["ot_publisher"]),
           "subscribe again elsewhere": f.ot_session_subscribe(other, live["ot_subscriber"]),
           "publish again elsewhere": f.ot_session_publish(live["ot_session"], live["ot_publisher"])}
    out["still receiving"] = wait_until(lambda: w.frames > frames + 10, timeout=15)
    return out


def _answers(live):
    """Whether every live object still does what it did: {kind: status of a call that reads it}."""
    f, d = lib().fn, lib().decl
    n, buf = ctypes.c_size_t(), ctypes.create_string_buffer(65536)
    return {
        "ot_server": f.ot_server_create_session(live["ot_server"], 0, buf, 256),
        "ot_session": f.ot_session_get_status(live["ot_session"], ctypes.byref(ctypes.c_int32())),
        "ot_publisher": f.ot_publisher_get_publish_audio(live["ot_publisher"], ctypes.byref(ctypes.c_int32())),
        "ot_subscriber": f.ot_subscriber_get_stats(live["ot_subscriber"], ctypes.byref(d.structs["ot_subscriber_stats"]())),
        "ot_stream": f.ot_stream_get_info(live["ot_stream"], ctypes.byref(d.structs["ot_stream_info"]())),
        "ot_connection": f.ot_connection_get_info(live["ot_connection"], ctypes.byref(d.structs["ot_connection_info"]())),
        "ot_video_frame": f.ot_video_frame_get_info(live["ot_video_frame"], ctypes.byref(d.structs["ot_video_frame_info"]())),
        "ot_device_list": f.ot_device_list_count(live["ot_device_list"], ctypes.byref(n)),
    }


def _session_connection(session):
    """The session's own connection (ot_session_get_connection) may not be deleted: the delete's status, and whether
    the session hands out the same live handle after it."""
    f = lib().fn
    own = f.ot_session_get_connection(session)
    status = f.ot_connection_delete(own)
    again = f.ot_session_get_connection(session)
    return {"delete": status, "same": again == own, "answers": bool(f.ot_connection_get_id(again))}


def _owners_gone(live, viewer, watcher, w):
    """Handles whose owner went: the watching session's own connection after the session was deleted (refused); a
    subscriber, its stream copy and a frame copy after its session was deleted (copies stay valid; the subscriber
    answers and can no longer subscribe there)."""
    f, d = lib().fn, lib().decl
    own = f.ot_session_get_connection(watcher)
    assert own
    assert f.ot_session_delete(watcher) == 0
    out = {"connection of a deleted session": f.ot_connection_get_info(own, ctypes.byref(d.structs["ot_connection_info"]()))}
    sub = live["ot_subscriber"]
    out["unsubscribe"] = f.ot_session_unsubscribe(viewer._handle(), sub)
    out["stats after unsubscribe"] = f.ot_subscriber_get_stats(sub, ctypes.byref(d.structs["ot_subscriber_stats"]()))
    h = viewer._handle()
    viewer.close()
    out["subscribe into a deleted session"] = f.ot_session_subscribe(h, sub)
    out["stats after its session"] = f.ot_subscriber_get_stats(sub, ctypes.byref(d.structs["ot_subscriber_stats"]()))
    out["stream copy after its session"] = f.ot_stream_get_info(live["ot_stream"], ctypes.byref(d.structs["ot_stream_info"]()))
    out["frame copy after its session"] = f.ot_video_frame_get_info(live["ot_video_frame"],
                                                                    ctypes.byref(d.structs["ot_video_frame_info"]()))
    out["delete"] = f.ot_subscriber_delete(sub)
    out["delete again"] = f.ot_subscriber_delete(sub)
    return out


def _subscriber_settings_sweep(stream, callbacks):
    """Each numeric member of ot_subscriber_settings at each extreme (NULL settings too): [member, flavour, made,
    whether the refusal's log line names the member]."""
    f, d = lib().fn, lib().decl
    rows = []

    def make(s):
        h, lines = _logged(lambda: f.ot_subscriber_new_with_settings(stream, ctypes.byref(s) if s is not None else None,
                                                                   ctypes.byref(callbacks)))
        made = bool(h) and f.ot_subscriber_delete(h) == 0
        return made, lines

    assert make(None)[0]
    for member, t in d.structs["ot_subscriber_settings"]._fields_:
        for flavour, value in _extremes(t).items():
            s = d.structs["ot_subscriber_settings"]()
            assert f.ot_subscriber_settings_default(ctypes.byref(s)) == 0
            assert make(s)[0]
            setattr(s, member, value)
            made, lines = make(s)
            rows.append((member, flavour, made, any(member in line for line in lines)))
    return rows


def _signal_options_sweep(session):
    """ot_signal_options with retry_after_reconnect at each extreme, a completion and a user_data no one may read
    (the library passes it through): [flavour, status, (completion status, user_data) or None]."""
    f, d = lib().fn, lib().decl
    rows = []
    done = []
    completion = d.callbacks["ot_signal_completion"](lambda _s, ud, status, _m: done.append((status, ud)))
    for flavour, value in _extremes(dict(d.structs["ot_signal_options"]._fields_)["retry_after_reconnect"]).items():
        o = d.structs["ot_signal_options"]()
        assert f.ot_signal_options_default(ctypes.byref(o)) == 0
        o.retry_after_reconnect, o.on_complete, o.user_data = value, completion, 0x5eed_0000 + len(rows)
        before = len(done)
        status = f.ot_session_send_signal_with_options(session, b"swept", b"x", None, ctypes.byref(o))
        wait_until(lambda: len(done) > before, timeout=15)
        rows.append((flavour, status, done[before] if len(done) > before else None))
    return rows


@pytest.fixture(scope="module")
def swept():
    """What _connected_sweep found (run once, in a child process)."""
    return _in_child("_connected_sweep", module="test_abi_handles")


def test_connected_handles_of_every_type_in_the_wrong_place_or_dead_are_refused(swept):
    """Every handle type a connected session gives, live where another type belongs, deleted, borrowed and used after
    its callback returned: every call fails with OT_ERR_INVALID_HANDLE (NULL for the functions that return a
    pointer), nothing crashes, and every live object still answers."""
    labels = {label for _, label, _ in swept["calls"]}
    assert ALL_KINDS == lib().decl.opaque, "a handle type the sweep does not make"
    assert labels == {f"live {k}" for k in ALL_KINDS} | {f"deleted {k}" for k in NEW_KINDS} \
        | {"borrowed session_stream", "borrowed subscriber_stream", "borrowed connection", "borrowed frame"}, labels
    assert len(swept["calls"]) > 1000
    assert "ot_session_force_mute_all_streams" in {name for name, label, _ in swept["calls"] if label == "live ot_connection"}
    bad = []
    for name, label, result in swept["calls"]:
        pointer = _is_pointer(lib().decl.functions[name][0])
        if (pointer and result) or (not pointer and result != E.INVALID_HANDLE):
            bad.append(f"{name}({label}) -> {result}")
    assert bad == [], "\n".join(bad)
    assert swept["answers"] == {k: 0 for k in ALL_KINDS}, swept["answers"]


def test_borrowed_handles_cannot_be_deleted(swept):
    """A stream, connection or frame lent to a callback: its *_delete inside the callback is refused
    (OT_ERR_INVALID_HANDLE) and a copy made after the refusal works; the session's own connection cannot be deleted
    either, and the session still hands it out, live."""
    assert swept["inside"] == {k: [E.INVALID_HANDLE, True] for k in ("session_stream", "connection", "subscriber_stream", "frame")}, \
        swept["inside"]
    assert swept["session_connection"] == {"delete": E.INVALID_HANDLE, "same": True, "answers": True}


def test_handles_of_another_session_are_refused(swept):
    """A subscriber or publisher handed to a session it is not in: unsubscribe and unpublish say it is not there,
    subscribe says it is in use elsewhere, publish into the viewer's session is refused for its role (checked before
    the publisher's state); the subscriber goes on receiving in its own session."""
    assert swept["other_session"] == {"unsubscribe": E.SUBSCRIBER_NOT_FOUND, "unpublish": E.PUBLISHER_NOT_FOUND,
                                      "subscribe again elsewhere": E.ILLEGAL_STATE, "publish again elsewhere": E.UNABLE_TO_PUBLISH,
                                      "still receiving": True}, swept["other_session"]


def test_handles_after_their_owner_went(swept):
    """The session's own connection dies with the session; a subscriber outlives its subscription and its session (it
    answers, cannot subscribe into the deleted session, is deleted once); stream and frame copies outlive them."""
    assert swept["owners_gone"] == {
        "connection of a deleted session": E.INVALID_HANDLE, "unsubscribe": 0, "stats after unsubscribe": 0,
        "subscribe into a deleted session": E.INVALID_HANDLE, "stats after its session": 0, "stream copy after its session": 0,
        "frame copy after its session": 0, "delete": 0, "delete again": E.INVALID_HANDLE}, swept["owners_gone"]


def test_absurd_numbers_with_connected_handles(swept):
    """The numeric sweep of test_abi_robustness over the functions that take a stream, connection, subscriber, frame
    or device list and a number, with live ones: every number that has a range is refused with OT_ERR_INVALID_PARAM."""
    results = swept["absurd"]
    assert {"ot_device_list_get", "ot_device_list_get_camera_mode", "ot_subscriber_set_subscribe_to_audio"} <= set(results)
    _check_absurd_results(results, live_kinds=ALL_KINDS)


def test_absurd_subscriber_settings_and_signal_options(swept):
    """Every member of ot_subscriber_settings at each extreme: the booleans take any value, the others are refused
    (NULL) with a logged reason that names the C member. ot_signal_options (its one number is a boolean):
    retry_after_reconnect at any value sends, and the completion comes once with the caller's user_data untouched."""
    booleans = {"subscribe_to_audio", "subscribe_to_video", "play_audio", "audio_fallback_enabled"}
    rows = swept["subscriber_settings"]
    assert {m for m, _, _, _ in rows} == booleans | {"quality_loss_threshold", "quality_window_seconds", "connect_timeout_ms"}
    wrong = [r for r in rows if (r[0] in booleans) != r[2] or (r[0] not in booleans and not r[3])]
    assert wrong == [], wrong
    assert len(swept["signal_options"]) == 3
    for i, (flavour, status, completion) in enumerate(swept["signal_options"]):
        assert status == 0 and completion == [0, 0x5eed_0000 + i], (flavour, status, completion)


def _refused_while_live():
    """A subscriber receiving and a publisher publishing in session A (poll mode: A's callbacks, its subscriber's and
    publisher's among them, run on the one thread that polls) while other threads call ot_session_subscribe with the
    subscriber (into B, a thread-mode session of the same session id, and into A again) and ot_session_publish with
    the publisher (into B', a thread-mode session that could publish) thousands of times, each refused; then each is
    deleted while those calls go on. Returns the statuses, how many callbacks of each kind ran on the polling thread
    and on others, whether the frame numbers increased, and whether each delete ended what it had in A (the media
    router's view)."""
    out = {}
    with otsession.Server(api_key="4711", api_secret="ab" * 20) as server:
        sid = server.create_session()
        with publisher_and_viewer(server, sid) as (b_pub, b_view, _):
            stop_polling = threading.Event()
            poller = []

            def poll():
                poller.append(threading.get_ident())
                while not stop_polling.is_set():
                    otsession.poll(0.05)
            polling = threading.Thread(target=poll, daemon=True)
            polling.start()
            a_pub = otsession.Session(server.api_key, sid, server_url=server.url, callback_mode=otsession.CallbackMode.POLL)
            a_view = otsession.Session(server.api_key, sid, server_url=server.url, callback_mode=otsession.CallbackMode.POLL)
            try:
                a_threads, streams = set(), []
                a_view.on("connected", lambda *_: a_threads.add(threading.get_ident()))
                a_view.on("stream_created", streams.append)
                for s, role in ((a_pub, otsession.Role.PUBLISHER), (a_view, otsession.Role.SUBSCRIBER)):
                    connected = threading.Event()
                    s.on("connected", connected.set)
                    s.connect(server.token(sid, role))
                    assert connected.wait(15), "not connected"
                out = _while_refused(server, a_pub, a_view, b_pub, b_view, streams)
                out["A's own callbacks on the polling thread"] = a_threads == set(poller)
            finally:
                a_view.close()
                a_pub.close()
                stop_polling.set()
                polling.join(10)
            out["callbacks"] = {kind: {"poller" if t == poller[0] else "other": n for t, n in by_thread.items()}
                                for kind, by_thread in out.pop("threads").items()}
    return out


def _while_refused(server, a_pub, a_view, b_pub, b_view, streams):
    """The part of _refused_while_live with A connected: what it returns, with the callbacks' threads as idents."""
    f = lib().fn
    threads = {}            # callback kind -> {thread ident: callbacks run on it}
    numbers = []            # test-pattern frame numbers, in callback order

    def seen(kind):
        def record(*args):
            by_thread = threads.setdefault(kind, {})
            by_thread[threading.get_ident()] = by_thread.get(threading.get_ident(), 0) + 1
            if kind == "render_frame" and args[0].test_pattern:
                numbers.append(args[0].test_pattern[0])
        return record

    publisher = otsession.Publisher("refused", width=160, height=120, fps=15)
    for kind in ("stream_created", "stats", "error"):
        publisher.on(kind, seen("publisher " + kind))
    a_pub.publish(publisher)
    assert wait_until(lambda: streams, timeout=20), "A's viewer saw no stream"
    stream_id = streams[0].id
    subscriber = otsession.Subscriber(streams[0])
    for kind in ("connected", "render_frame", "audio_data", "stats", "error", "disconnected"):
        subscriber.on(kind, seen(kind))
    a_view.subscribe(subscriber)
    assert wait_until(lambda: len(numbers) > 10, timeout=30), "no frames in A"
    assert wait_until(lambda: router_subscribers(server, stream_id) == 1, timeout=15)

    sub_h, pub_h = subscriber._handle(), publisher._handle()
    statuses = {"subscribe": {}, "publish": {}}
    done = threading.Event()

    def hammer(counts, calls):
        # Until the object is deleted (or the test ends): then its handle is refused and the calls stop.
        while not done.is_set() and E.INVALID_HANDLE not in counts:
            for call in calls:
                status = call()
                counts[status] = counts.get(status, 0) + 1
    hammers = [threading.Thread(target=hammer, args=(statuses["subscribe"], [lambda: f.ot_session_subscribe(b_view._handle(), sub_h),
                                                                             lambda: f.ot_session_subscribe(a_view._handle(), sub_h)])),
               threading.Thread(target=hammer, args=(statuses["publish"], [lambda: f.ot_session_publish(b_pub._handle(), pub_h)]))]
    d = lib().decl
    f.ot_log_set_level(d.constants["OT_LOG_ERROR"])  # each refusal logs a warning
    for t in hammers:
        t.start()
    try:
        # Long enough for several publisher stats (one a second) and many frames and audio callbacks.
        frames = len(numbers)
        wait_until(lambda: min(sum(c.values()) for c in statuses.values()) > 3000 and len(numbers) > frames + 60, timeout=60)
        subscriber.close()
        out = {"subscriber deleted: A's subscription ended": wait_until(lambda: router_subscribers(server, stream_id) == 0, timeout=15)}
        publisher.close()
        out["publisher deleted: A's stream ended"] = wait_until(
            lambda: all(stream_id not in s["streams"] for s in router_stats(server).values()), timeout=15)
    finally:
        done.set()
        for t in hammers:
            t.join(30)
        f.ot_log_set_level(d.constants["OT_LOG_WARN"])
    out["statuses"] = {name: [[k, v] for k, v in counts.items()] for name, counts in statuses.items()}
    out["frame numbers increase"] = all(a < b for a, b in zip(numbers, numbers[1:]))
    out["frames"] = len(numbers)
    out["threads"] = threads
    return out


def test_refused_subscribe_and_publish_leave_a_live_object_where_it_is():
    """A subscriber receiving and a publisher publishing in a poll-mode session A, while other threads hand them to
    another session (and the subscriber to A again) thousands of times, each refused (OT_ERR_ILLEGAL_STATE): every
    callback of theirs ran on the thread that polls A's callbacks (none went through the other session's sink), the
    frames came in order, and deleting each during the refusals ended its subscription or stream in A."""
    out = _in_child("_refused_while_live", module="test_abi_handles")
    for name, rows in out["statuses"].items():
        counts = dict(rows)
        # Refused while live (ILLEGAL_STATE), then deleted (INVALID_HANDLE); a call in flight across the deletes may
        # also find the stream gone (SERVER_CANNOT_FIND_STREAM). None is accepted: the deleted object stays nowhere.
        assert set(counts) <= {E.ILLEGAL_STATE, E.INVALID_HANDLE, E.SERVER_CANNOT_FIND_STREAM}, (name, counts)
        assert counts.get(E.ILLEGAL_STATE, 0) > 1000, (name, counts)
    assert out["A's own callbacks on the polling thread"]
    callbacks = out["callbacks"]
    assert {"render_frame", "audio_data", "stats", "publisher stream_created", "publisher stats"} <= set(callbacks), callbacks
    assert {kind: n for kind, n in callbacks.items() if set(n) != {"poller"}} == {}, callbacks
    assert out["frame numbers increase"] and out["frames"] > 60, out
    assert out["subscriber deleted: A's subscription ended"], out
    assert out["publisher deleted: A's stream ended"], out


ROUNDS = 60


def _race(start, delete, round_):
    """Runs `start` (returns a status) and `delete` on two threads released at once, the delete later each round
    (0 to 2.2 ms, a busy wait: before the call is accepted, while it starts, after it returned; a subscribe takes about
    1 to 2.5 ms); the start's status."""
    go = threading.Barrier(2)
    status = []

    def starting():
        go.wait()
        status.append(start())

    def deleting():
        go.wait()
        until = time.perf_counter() + (round_ % 12) * 0.0002
        while time.perf_counter() < until:
            pass
        delete()
    threads = [threading.Thread(target=starting), threading.Thread(target=deleting)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return status[0]


def _starts_racing_deletes():
    """ot_session_subscribe of a new subscriber on one thread and its ot_subscriber_delete on another, released at once
    (the delete a little later each round), ROUNDS rounds; then the same with ot_session_publish and ot_publisher_delete
    of new publishers in a session of their own. Returns the statuses, the callbacks that ran after their object's
    delete had returned, and the media router's view once the deletes are over: how many subscribers the stream
    has and which streams the session has (the first publisher's only, if every raced one ended)."""
    f = lib().fn
    out = {"after delete": []}
    deleted = set()

    def watch(obj, events):
        for kind in events:
            obj.on(kind, lambda *_, kind=kind, key=id(obj): out["after delete"].append(kind) if key in deleted else None)

    def close(obj):
        obj.close()
        deleted.add(id(obj))

    with otsession.Server(api_key="4711", api_secret="ab" * 20) as server:
        sid = server.create_session()
        with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams):
            publisher = otsession.Publisher("raced", width=160, height=120, fps=15)
            pub_s.publish(publisher)
            stream = streams.get(timeout=15)
            statuses = {"subscribe": {}, "publish": {}}
            subscribers = []
            for i in range(ROUNDS):
                sub = otsession.Subscriber(stream)
                subscribers.append(sub)
                watch(sub, ("connected", "render_frame", "audio_data", "stats", "error", "disconnected"))
                h = sub._handle()
                status = _race(lambda: f.ot_session_subscribe(sub_s._handle(), h), lambda: close(sub), i)
                statuses["subscribe"][status] = statuses["subscribe"].get(status, 0) + 1
            out["subscribers left"] = 0 if wait_until(lambda: router_subscribers(server, stream.id) == 0, timeout=20) \
                else router_subscribers(server, stream.id)

            other = otsession.Session(server.api_key, sid, server_url=server.url)
            try:
                connected = threading.Event()
                other.on("connected", connected.set)
                other.connect(server.token(sid, otsession.Role.PUBLISHER))
                assert connected.wait(15), "not connected"
                publishers = []
                for i in range(ROUNDS):
                    p = otsession.Publisher(f"raced {i}", width=160, height=120, fps=15)
                    publishers.append(p)
                    watch(p, ("stream_created", "stream_destroyed", "stats", "error"))
                    h = p._handle()
                    status = _race(lambda: f.ot_session_publish(other._handle(), h), lambda: close(p), i)
                    statuses["publish"][status] = statuses["publish"].get(status, 0) + 1
                wait_until(lambda: set(router_stats(server)[sid]["streams"]) == {stream.id}, timeout=20)
                out["streams left"] = sorted(router_stats(server)[sid]["streams"])
                # The session kept no ghost of them: its one publisher slot is free.
                last = otsession.Publisher("after the races", width=160, height=120, fps=15)
                out["publish after the races"] = f.ot_session_publish(other._handle(), last._handle())
                last.close()
            finally:
                other.close()
            out["stream"] = stream.id
            out["statuses"] = {name: [[k, v] for k, v in counts.items()] for name, counts in statuses.items()}
            publisher.close()
    return out


def test_a_subscribe_or_publish_racing_the_objects_delete_leaves_nothing_running():
    """ot_session_subscribe racing ot_subscriber_delete of the same (new) subscriber on another thread, and
    ot_session_publish racing ot_publisher_delete, 60 times each with the delete landing before, during and after
    the call: each call either is refused (the object is being deleted) or succeeds and the delete ends what it
    started. No callback of a deleted object ran after its delete returned, the media router forwards the stream to
    no subscriber, the session has only the first publisher's stream, and its publisher slot is free."""
    out = _in_child("_starts_racing_deletes", module="test_abi_handles")
    for name, rows in out["statuses"].items():
        assert set(dict(rows)) <= {0, E.INVALID_HANDLE}, (name, rows)
    assert out["after delete"] == [], out["after delete"]
    assert out["subscribers left"] == 0, out
    assert out["streams left"] == [out["stream"]], out
    assert out["publish after the races"] == 0, out
