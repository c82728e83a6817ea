"""Automatic reconnection through the C ABI: a session reaches the embedded server through a small TCP proxy
that cuts every connection on demand (and refuses new ones for a while)."""
import socket
import struct
import threading
import time
import urllib.parse

import pytest

from otsession import ErrorCode, OTError, SessionStatus
from plumbing import pump
from session_recorder import SessionRecorder


class Proxy:
    """Relays 127.0.0.1:<port> to the server; `sever()` resets every relayed connection, `refusing` resets new ones."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.refusing = False
        self.accepted = 0
        self._lock = threading.Lock()
        self._conns = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}"

    @staticmethod
    def _reset(sock):
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                refuse = self.refusing or self._stopped
            if refuse:
                self._reset(client)
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.append((client, upstream))
            done = threading.Barrier(2, action=lambda c=client, u=upstream: self._close(c, u))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(a, b, done), daemon=True).start()

    def _close(self, client, upstream):
        with self._lock:
            if (client, upstream) in self._conns:
                self._conns.remove((client, upstream))
            client.close()
            upstream.close()

    @staticmethod
    def _relay(src, dst, done):
        pump(src, dst)
        done.wait()

    def sever(self):
        with self._lock:
            for c, u in self._conns:
                self._reset(c)
                self._reset(u)

    def stop(self):
        with self._lock:
            self._stopped = True
        self.sever()
        self._listener.close()


class Recorder(SessionRecorder):
    """A session that records errors (code only), reconnections and signals (sender's id) into a queue."""

    def on_error(self, code, message):
        self.events.put(("error", code))

    def on_reconnecting(self):
        self.events.put(("reconnecting", self.status, self.reconnecting))

    def on_reconnected(self):
        self.events.put(("reconnected",))

    def on_signal_received(self, type, data, connection):
        self.events.put(("signal", type, data, connection.id if connection else None))


@pytest.fixture
def proxy(server):
    p = Proxy(urllib.parse.urlparse(server.url).port)
    yield p
    p.stop()


def test_reconnect_callbacks_and_queued_signals(server, proxy):
    sid = server.create_session()
    a = Recorder.connected(server, sid, url=proxy.url)
    b = Recorder.connected(server, sid)
    id_a = a.connection.id
    assert not a.reconnecting

    proxy.refusing = True
    proxy.sever()
    # The status stays CONNECTED while reconnecting, as in OpenTok.
    assert a.expect("reconnecting") == ("reconnecting", SessionStatus.CONNECTED, True)
    a.send_signal("queued", "1")
    with pytest.raises(OTError) as e:
        a.send_signal("dropped", "x", retry_after_reconnect=False)
    assert e.value.code == ErrorCode.NOT_CONNECTED
    refused = proxy.accepted
    deadline = time.monotonic() + 10
    while proxy.accepted < refused + 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    proxy.refusing = False

    a.expect("reconnected")
    assert not a.reconnecting
    assert a.status == SessionStatus.CONNECTED
    assert a.connection.id == id_a
    assert b.expect("signal") == ("signal", "queued", "1", id_a)
    a.send_signal("marker", "")
    assert b.expect("signal") == ("signal", "marker", "", id_a)
    assert all(ev[0] != "signal" or ev[1] != "dropped" for ev in b.drain())
    assert not any(ev[0] in ("disconnected", "error") for ev in a.drain())
    a.close()
    b.close()
