"""The attack suite's tools: a real `ot-server` per case (optionally with a lowered descriptor limit), raw
clients, token minting with the project secret (the backend's part), a legitimate client that joins and
exchanges a signal, and the server's peak RSS. Every case adds a row to the report printed at the end
(and written as JSON to $ATTACK_REPORT when set)."""
import base64
import hashlib
import hmac
import json
import os
import resource
import secrets
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "interop"))
from plumbing import stop_process  # noqa: E402
from wsclient import Closed, SignalingClient  # noqa: E402

REPORT = []


def binary_path():
    path = os.environ.get("OT_SERVER_BIN")
    if path:
        return path
    subprocess.run(["swift", "build", "--product", "ot-server"], cwd=ROOT, check=True, capture_output=True)
    out = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True)
    return os.path.join(out.stdout.strip(), "ot-server")


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign_jwt(payload_json: str, secret: str) -> str:
    """An HS256 JWT over the payload exactly as given (so absurd numbers go out as written)."""
    head = b64url(b'{"alg":"HS256","typ":"JWT"}')
    body = b64url(payload_json.encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


class Server:
    """One ot-server process on a free loopback port."""

    def __init__(self, binary, args=(), nofile=None, verbose=False, log_path=None, ssl_context=None):
        self.key = str(10_000_000 + secrets.randbelow(89_999_999))
        self.secret = secrets.token_hex(20)
        env = dict(os.environ, OT_SERVER_PROJECTS=f"{self.key}:{self.secret}")

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        cmd = [binary, "--listen", "127.0.0.1:0", *args] + (["--verbose"] if verbose else [])
        self.log = open(log_path, "w+") if log_path else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log or subprocess.DEVNULL, text=True,
                                     env=env, preexec_fn=limit)
        line = self.proc.stdout.readline()
        assert "listening" in line, line
        self.port = int(line.split("://127.0.0.1:")[1].split()[0])
        #: With a TLS server: the client context of its CA (the REST calls of `http` use it).
        self.ssl_context = ssl_context
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        self.baseline_rss = self.rss_kb()

    def _drain(self):
        for _ in self.proc.stdout:
            pass

    def status(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def rss_kb(self):
        return self.status("VmRSS")

    def peak_rss_kb(self):
        """The kernel's high-water mark of the server's resident set (VmHWM)."""
        return self.status("VmHWM")

    def open_fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        stop_process(self.proc)
        if self.log:
            self.log.close()

    # The backend's part: project JWTs, sessions, client tokens.

    def project_jwt(self, **claims):
        now = int(time.time())
        c = {"ist": "project", "iss": self.key, "iat": now, "exp": now + 180, "jti": secrets.token_hex(4)}
        c.update(claims)
        return sign_jwt(json.dumps(c), self.secret)

    def http(self, method, path, body=b"", headers=None, timeout=10):
        """One request on a fresh socket; returns (status, body)."""
        h = {"Host": "127.0.0.1", "Connection": "close", "Content-Length": str(len(body))}
        h.update(headers or {})
        raw = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        head, _, rest = exchange(self.port, raw.encode() + body, timeout, self.ssl_context).partition(b"\r\n\r\n")
        return int(head.split()[1]), rest

    def create_session(self):
        status, body = self.http("POST", "/session/create", b"p2p.preference=disabled",
                                 {"X-OPENTOK-AUTH": self.project_jwt(), "Content-Type": "application/x-www-form-urlencoded"})
        assert status == 200, (status, body)
        return json.loads(body)[0]["session_id"]

    def token(self, sid, role="publisher", data=None, **overrides):
        now = int(time.time())
        c = {"iss": self.key, "ist": "project", "iat": now, "exp": now + 3600, "session_id": sid, "role": role,
             "scope": "session.connect", "nonce": secrets.randbelow(1_000_000)}
        if data is not None:
            c["connection_data"] = data
        c.update(overrides)
        return sign_jwt(json.dumps(c, ensure_ascii=False), self.secret)

    def token_raw(self, payload_json):
        return sign_jwt(payload_json, self.secret)

    def t1(self, sid, **fields):
        now = int(time.time())
        f = {"session_id": sid, "create_time": str(now), "expire_time": str(now + 3600), "role": "publisher",
             "nonce": "1", "initial_layout_class_list": ""}
        f.update(fields)
        data = urllib.parse.urlencode(f)
        sig = hmac.new(self.secret.encode(), data.encode(), hashlib.sha1).hexdigest()
        return "T1==" + base64.b64encode(f"partner_id={self.key}&sig={sig}:{data}".encode()).decode()


def exchange(port, raw, timeout=10, ssl_context=None):
    """Sends `raw` on a fresh socket (TLS with `ssl_context`) and returns everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as plain:
        s = ssl_context.wrap_socket(plain, server_hostname="127.0.0.1") if ssl_context else plain
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def legit_join(server, sid, deadline=10.0, ssl_context=None, host="127.0.0.1"):
    """A legitimate client joins `sid` and sends itself a signal (over TLS with `ssl_context`, checking the
    certificate against `host`); returns the seconds that took."""
    t0 = time.monotonic()
    c = SignalingClient(server.port, host=host, ssl_context=ssl_context)
    c.sock.settimeout(deadline)
    m = c.connect(server.key, sid, server.token(sid))
    assert m["type"] == "connected", m
    rid = c.request({"type": "signal", "signalType": "probe", "data": "hello"})
    c.wait_for(lambda x: x.get("type") == "signal" and x.get("data") == "hello", timeout=deadline)
    r = c.reply(rid, timeout=deadline)
    assert "code" not in r, r
    elapsed = time.monotonic() - t0
    c.close()
    assert elapsed < deadline
    return elapsed


def raw_socket(port, source="127.0.0.1", rcvbuf=None, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((source, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def ws_upgrade(s, origin=None):
    """Sends the upgrade request on raw socket `s`; returns the status line."""
    key = base64.b64encode(os.urandom(16)).decode()
    extra = f"Origin: {origin}\r\n" if origin else ""
    s.sendall((f"GET /v2/signaling HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return head.split(b"\r\n")[0].decode()


def ws_frame(opcode, payload, fin=True):
    mask = os.urandom(4)
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        header = struct.pack("!BB", b0, 0x80 | n)
    elif n < 65536:
        header = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", b0, 0x80 | 127, n)
    m = (mask * (n // 4 + 1))[:n]
    return header + mask + (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")


class FrameReader:
    """Server frames from a raw socket, with the partial frame kept between calls."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def read(self, timeout, first=False):
        """Frames until the socket closes, a close frame arrives or `timeout` (with `first`: as soon as there is
        one): [(opcode, payload)]."""
        frames = []
        deadline = time.monotonic() + timeout
        poll = select.poll()   # not settimeout: another thread may be sending on a non-blocking socket
        poll.register(self.sock, select.POLLIN)
        while time.monotonic() < deadline:
            if not poll.poll(max(0.0, deadline - time.monotonic()) * 1000):
                break
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            self.buf += chunk
            while len(self.buf) >= 2:
                n = self.buf[1] & 0x7F
                off = 2
                if n == 126:
                    if len(self.buf) < 4:
                        break
                    n = struct.unpack("!H", self.buf[2:4])[0]; off = 4
                elif n == 127:
                    if len(self.buf) < 10:
                        break
                    n = struct.unpack("!Q", self.buf[2:10])[0]; off = 10
                if len(self.buf) < off + n:
                    break
                frames.append((self.buf[0] & 0x0F, self.buf[off:off + n]))
                self.buf = self.buf[off + n:]
            if frames and (first or frames[-1][0] == 8):
                break
        return frames


def read_frames(s, timeout=10):
    """Frames from a raw socket until it closes, a close frame arrives or `timeout`: [(opcode, payload)]."""
    return FrameReader(s).read(timeout)


def close_code(frames):
    for op, p in frames:
        if op == 8 and len(p) >= 2:
            return struct.unpack("!H", p[:2])[0]
    return None


def record(row):
    REPORT.append(row)


def finish(server, case, join_s, observed, rss_bound_mb):
    """Common end of a case: the server is alive, its peak RSS within the bound; the row is recorded."""
    assert server.alive(), f"{case}: the server died"
    peak = server.peak_rss_kb() / 1024
    record({"case": case, "peak_rss_mb": peak, "start_rss_mb": server.baseline_rss / 1024, "join_s": join_s,
            "observed": observed, "rss_bound_mb": rss_bound_mb})
    assert peak < rss_bound_mb, f"{case}: peak RSS {peak:.0f} MB over {rss_bound_mb} MB"
