"""Deploying beyond loopback (issue 14), through the whole product on loopback: `ot-server --tls-cert --tls-key` with
a CA made by the test, driven by the official `opentok` SDK over https (its `requests` trusting the test CA through
REQUESTS_CA_BUNDLE) with native clients over wss://; certificate refusals (another CA, another name) with their own
code; SIGHUP reloading the certificate under live sessions; signaling and TURN over TCP through an HTTP CONNECT proxy
started by the test, with coturn (use-auth-secret) credentials handed out by the server; headless Chromium loading
the page over https (the CA in its NSS database, as a user's installed CA) and publishing and subscribing through
wss://. The network-namespace cases (NATs, /etc/hosts names, 1:1 NAT) are in test_nat.py."""
import json
import os
import queue
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request

import jwt as pyjwt
import pytest
from opentok import Client, MediaModes

import otsession
from testca import TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return TestCA(str(tmp_path_factory.mktemp("ca")))


class TLSServer:
    """An ot-server process on a free loopback port with TLS (and whatever else `args` says)."""

    def __init__(self, binary, cert, key, *args):
        self.key, self.secret = subprocess.run([binary, "keygen"], check=True, capture_output=True, text=True).stdout.strip().split(":")
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=dict(os.environ, OT_SERVER_PROJECTS=f"{self.key}:{self.secret}"))
        self.first_line = self.proc.stdout.readline()
        m = re.search(r"https://127\.0\.0\.1:(\d+) \(signaling wss://127\.0\.0\.1:\d+/v2/signaling\)", self.first_line)
        assert m, self.first_line
        self.port = int(m.group(1))
        self.lines = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(l) for l in self.proc.stdout], daemon=True).start()

    def wait_line(self, text, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                break
            if text in line:
                return line
        raise AssertionError(f"ot-server did not print {text!r}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def binary(ot_server_binary):
    return ot_server_binary


@pytest.fixture
def tls_server(binary, ca):
    cert, key = ca.issue(["localhost", "127.0.0.1"], label=f"server{time.monotonic_ns()}")
    s = TLSServer(binary, cert, key)
    s.cert_file, s.key_file = cert, key
    yield s
    s.stop()


class Client_(otsession.Session):
    """A native client recording its connection result and signals."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.result, self.signals, self.created = queue.Queue(), queue.Queue(), queue.Queue()

    def on_connected(self):
        self.result.put(("connected", None))

    def on_error(self, code, message):
        self.result.put(("error", (int(code), message)))

    def on_signal_received(self, type, data, connection):
        self.signals.put((type, data))

    def on_stream_created(self, stream):
        self.created.put(stream)

    def outcome(self, timeout=15):
        return self.result.get(timeout=timeout)


def connect(key, sid, token, url, **kw):
    c = Client_(key, sid, server_url=url, **kw)
    c.connect(token)
    return c, c.outcome()


def test_official_sdk_over_https_and_a_wss_client(tls_server, ca, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca.ca_file)
    sdk = Client(tls_server.key, tls_server.secret, api_url=f"https://localhost:{tls_server.port}")
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    client, outcome = connect(tls_server.key, sid, sdk.generate_token(sid), f"wss://localhost:{tls_server.port}", tls_ca_file=ca.ca_file)
    try:
        assert outcome == ("connected", None), outcome
        sdk.send_signal(sid, {"type": "chat", "data": "over https"})
        assert client.signals.get(timeout=10) == ("chat", "over https")
        assert sdk.list_streams(sid).count == 0
    finally:
        client.close()
    # Both TLS versions the server speaks, and the plain refusal on the same port.
    for version, name in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")):
        with ca.context(minimum=version, maximum=version).wrap_socket(socket.create_connection(("127.0.0.1", tls_server.port)),
                                                                      server_hostname="localhost") as s:
            assert s.version() == name
            s.sendall(b"GET /js/otsession.js HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            assert s.recv(12) == b"HTTP/1.1 200"
    with socket.create_connection(("127.0.0.1", tls_server.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = s.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400") and b"use https:// or wss://" in answer, answer


def test_another_ca_or_another_name_fails_with_the_tls_code(tls_server, binary, ca):
    sid = _session_id(tls_server)
    sdk_token = otsession.token(tls_server.key, tls_server.secret, sid)
    other = TestCA(tempfile.mkdtemp(prefix="ot-ca-"), name="another CA")
    try:
        c, outcome = connect(tls_server.key, sid, sdk_token, f"wss://localhost:{tls_server.port}", tls_ca_file=other.ca_file)
        c.close()
        assert outcome[0] == "error" and outcome[1][0] == otsession.ErrorCode.TLS_CERTIFICATE_REJECTED == 9200, outcome
        assert "unable to get local issuer certificate" in outcome[1][1], outcome
        # The system store (no tls_ca_file) does not know the test CA either: refused, never a clear fallback.
        c, outcome = connect(tls_server.key, sid, sdk_token, f"wss://localhost:{tls_server.port}")
        c.close()
        assert outcome[0] == "error" and outcome[1][0] == 9200, outcome
    finally:
        shutil.rmtree(other.dir, ignore_errors=True)
    cert, key = ca.issue(["ot.example.test"], label="othername")
    named = TLSServer(binary, cert, key)
    try:
        sid2 = _session_id(named)
        c, outcome = connect(named.key, sid2, otsession.token(named.key, named.secret, sid2), f"wss://localhost:{named.port}",
                             tls_ca_file=ca.ca_file)
        c.close()
        assert outcome[0] == "error" and outcome[1][0] == 9200 and "hostname mismatch" in outcome[1][1], outcome
    finally:
        named.stop()


def _session_id(server):
    """A routed session of `server`, created through its REST API (the test's own backend; the certificate is not
    what this helper checks)."""
    auth = pyjwt.encode({"iss": server.key, "ist": "project", "iat": int(time.time()), "exp": int(time.time()) + 60},
                        server.secret, algorithm="HS256")
    req = urllib.request.Request(f"https://127.0.0.1:{server.port}/session/create", data=b"p2p.preference=disabled",
                                 headers={"X-OPENTOK-AUTH": auth}, method="POST")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return json.loads(r.read())[0]["session_id"]
