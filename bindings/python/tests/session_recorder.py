"""A session and a subscriber that record their callbacks into a queue, for the tests (each test module adds the
callbacks it needs)."""
import queue

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
