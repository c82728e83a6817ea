"""A session that records its callbacks into a queue, for the tests (each test module adds the callbacks it needs)."""
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
        while True:
            ev = self.events.get(timeout=timeout)
            if ev[0] == kind:
                return ev

    def drain(self):
        """The events received so far and not yet taken."""
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out
