"""A minimal WebSocket client (standard library only) speaking docs/protocol.md."""
import base64
import hashlib
import json
import os
import socket
import struct
import time


class Closed(Exception):
    pass


class SignalingClient:
    """`ssl_context` (an ssl.SSLContext): wss://, with `host` as the name the certificate is checked against."""

    def __init__(self, port, host="127.0.0.1", path="/v2/signaling", ssl_context=None):
        self.sock = socket.create_connection((host, port), timeout=10)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Closed("closed during handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        assert lines[0].startswith("HTTP/1.1 101"), lines[0]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
        assert headers["sec-websocket-accept"] == accept
        self.next_id = 1
        self.inbox = []
        self.closed = False

    def send(self, obj):
        payload = json.dumps(obj).encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def request(self, obj):
        obj = dict(obj, id=self.next_id)
        self.next_id += 1
        self.send(obj)
        return obj["id"]

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                self.closed = True
                raise Closed("socket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        assert not (b1 & 0x80), "server frames are not masked"
        return b0 & 0x0F, self._read(n)

    def recv(self, timeout=10):
        """The next JSON message; raises Closed when the server closes."""
        if self.inbox:
            return self.inbox.pop(0)
        self.sock.settimeout(timeout)
        while True:
            op, payload = self._frame()
            if op == 1:
                return json.loads(payload)
            if op == 9:
                self._control(10, payload)
            elif op == 8:
                self.closed = True
                raise Closed("close frame")

    def _control(self, op, payload=b""):
        mask = os.urandom(4)
        self.sock.sendall(struct.pack("!BB", 0x80 | op, 0x80 | len(payload)) + mask +
                          bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def wait_for(self, pred, timeout=10):
        """Reads until a message matches `pred`; the others stay queued in order."""
        deadline = time.time() + timeout
        skipped = []
        try:
            while True:
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError("no matching message")
                if self.inbox:
                    m = self.inbox.pop(0)
                else:
                    self.sock.settimeout(left)
                    op, payload = self._frame()
                    if op == 9:
                        self._control(10, payload)
                        continue
                    if op == 8:
                        self.closed = True
                        raise Closed("close frame")
                    if op != 1:
                        continue
                    m = json.loads(payload)
                if pred(m):
                    return m
                skipped.append(m)
        finally:
            self.inbox = skipped + self.inbox

    def reply(self, rid, timeout=10):
        return self.wait_for(lambda m: m.get("type") == "reply" and m.get("id") == rid, timeout)

    def connect(self, key, session_id, token, suppressed=False, **extra):
        self.request(dict({"type": "connect", "apiKey": key, "sessionId": session_id, "token": token,
                           "eventsSuppressed": suppressed}, **extra))
        m = self.recv()
        return m

    def abort(self):
        self.sock.close()

    def close(self):
        try:
            self.send({"type": "disconnect"})
            self._control(8, struct.pack("!H", 1000))
        except OSError:
            pass
        self.sock.close()
