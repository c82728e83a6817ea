"""A session and a subscriber that record their callbacks into a queue, for the tests (each test module adds the
callbacks it needs)."""
import contextlib
import json
import queue
import threading
import time
import urllib.request

import jwt

import otsession


class SessionRecorder(otsession.Session):
    """Puts ("connected",) and ("disconnected",) into `events`; subclasses put their own events there too."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.events = queue.Queue()

    @classmethod
    def connected(cls, server, sid, role="publisher", data=None, t1=False, url=None, timeout=10):
        """A session of `server` (reached at `url` when given), connected with a token of `role`."""
        s = cls(server.api_key, sid, server_url=url or server.url)
        s.connect(server.token(sid, role, data=data, t1=t1))
        s.expect("connected", timeout=timeout)
        return s

    def on_connected(self):
        self.events.put(("connected",))

    def on_disconnected(self):
        self.events.put(("disconnected",))

    def expect(self, kind, timeout=10):
        """The next event of `kind` (earlier events of other kinds are dropped); queue.Empty after `timeout` s."""
        return _expect(self.events, kind, timeout)

    def drain(self):
        """The events received so far and not yet taken."""
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out


class SubscriberRecorder(otsession.Subscriber):
    """Keeps the rendered frames; puts ("connected", stream id), ("disconnected",) and ("error", (code, message))
    into `events`."""

    def __init__(self, stream):
        super().__init__(stream)
        self.frames = []
        self.events = queue.Queue()

    def on_connected(self, stream):
        self.events.put(("connected", stream.id))

    def on_disconnected(self):
        self.events.put(("disconnected",))

    def on_error(self, code, message):
        self.events.put(("error", (code, message)))

    def on_render_frame(self, frame):
        self.frames.append(frame)

    def expect(self, kind, timeout=15):
        """The next event of `kind` (earlier events of other kinds are dropped); queue.Empty after `timeout` s."""
        return _expect(self.events, kind, timeout)


def _expect(events, kind, timeout):
    while True:
        ev = events.get(timeout=timeout)
        if ev[0] == kind:
            return ev


@contextlib.contextmanager
def publisher_and_viewer(server, sid):
    """Two sessions of `sid` connected (a publisher-role and a subscriber-role token); yields them and a queue of the
    streams the viewer sees; closes both after."""
    streams = queue.Queue()
    pub_s = otsession.Session(server.api_key, sid, server_url=server.url)
    sub_s = otsession.Session(server.api_key, sid, server_url=server.url)
    sub_s.on("stream_created", streams.put)
    try:
        for s, role in ((pub_s, otsession.Role.PUBLISHER), (sub_s, otsession.Role.SUBSCRIBER)):
            done = threading.Event()
            s.on("connected", done.set)
            s.connect(server.token(sid, role))
            assert done.wait(10), "not connected"
        yield pub_s, sub_s, streams
    finally:
        sub_s.close()
        pub_s.close()


def wait_until(cond, timeout=15):
    """Polls `cond` every 50 ms; whether it held within `timeout` s."""
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def router_stats(server):
    """The media router's stats of `server`'s project (the REST API's /v2/stats): its routed sessions by id."""
    now = int(time.time())
    auth = jwt.encode({"iss": server.api_key, "ist": "project", "iat": now, "exp": now + 60}, server.api_secret,
                      algorithm="HS256")
    req = urllib.request.Request(server.url.rstrip("/") + "/v2/stats", headers={"X-OPENTOK-AUTH": auth})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["sessions"]
