"""Deploying beyond loopback (issue 14), through the whole product on loopback: `ot-server --tls-cert --tls-key` with
a CA made by the test, driven by the official `opentok` SDK over https (its `requests` trusting the test CA through
REQUESTS_CA_BUNDLE) with native clients over wss://; certificate refusals (another CA, another name) with their own
code; SIGHUP reloading the certificate under live sessions; signaling and TURN over TCP through an HTTP CONNECT proxy
started by the test, with coturn (use-auth-secret) credentials handed out by the server; headless Chromium loading
the page over https (the CA in its NSS database, as a user's installed CA) and publishing and subscribing through
wss://. The network-namespace cases (NATs, /etc/hosts names, 1:1 NAT) are in test_nat.py."""
import base64
import json
import os
import sys
import queue
import re
import secrets
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
from plumbing import pump, stop_process
from testca import TestCA

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "tests"))
import coturn_support  # noqa: E402
import netns_support  # noqa: E402
from session_recorder import SubscriberRecorder, wait_until  # noqa: E402


@pytest.fixture(scope="module")
def ca(test_ca):
    return test_ca


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
        stop_process(self.proc)


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


class ConnectProxy:
    """An HTTP CONNECT proxy on a free loopback port, as in a locked-down network: it asks for Basic credentials
    (407 without them), records every tunnel's target and relays bytes both ways."""

    def __init__(self, user="otproxy", password="s3cret"):
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.url = None
        self.targets, self.refused = [], 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{user}:{password}@127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = c.recv(1)   # byte by byte: nothing after the head is consumed here
                if not chunk:
                    return c.close()
                head += chunk
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
            if method != "CONNECT" or headers.get("proxy-authorization") != self.auth:
                self.refused += 1
                c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"t\"\r\n"
                          b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                return c.close()
            host, port = target.rsplit(":", 1)
            up = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
            self.targets.append(target)
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            for a, b in ((c, up), (up, c)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()
        except OSError:
            c.close()

    def close(self):
        self.closed = True
        self.sock.close()


def _relay_only(include=otsession.ICEIncludeServers.ALL):
    return otsession.ICEConfig(transport_policy=otsession.ICETransportPolicy.RELAY, include_servers=include)


def _connected(closing, *args, **kwargs):
    """Connects a session (`connect`'s arguments), asserts it connected and adds it to `closing`."""
    session, outcome = connect(*args, **kwargs)
    closing.append(session)
    assert outcome == ("connected", None), outcome
    return session


def _publish_and_watch(publishing, viewing, name, closing):
    """Publishes a 160×120 test pattern from `publishing` and subscribes `viewing` to it (both added to `closing`),
    waits for ten stamped frames; returns the viewer and its selected pair's local candidate from the W3C report."""
    pub = otsession.Publisher(name, width=160, height=120)
    closing.append(pub)
    publishing.publish(pub)
    viewer = SubscriberRecorder(viewing.created.get(timeout=10))
    closing.append(viewer)
    viewing.subscribe(viewer)
    viewer.expect("connected", timeout=20)
    assert wait_until(lambda: len([f for f in viewer.frames if f.test_pattern]) >= 10, 20), len(viewer.frames)
    report = json.loads(viewer.rtc_stats_report())
    pair = next(o for o in report if o["type"] == "candidate-pair")
    return viewer, next(o for o in report if o["id"] == pair["localCandidateId"])


def _close_all(closing):
    """Closes what a test opened, last opened first."""
    for o in reversed(closing):
        o.close()


@pytest.mark.parametrize("turn", ["tcp", "tls"])
def test_signaling_and_turn_through_a_connect_proxy_with_the_servers_credentials(ca, turn):
    # The embedded server over TLS hands out coturn (use-auth-secret, named `localhost`; TURN over TCP, or over TLS
    # with its certificate checked against the CA file); the clients configure nothing but relay-only and the proxy:
    # wss:// and TURN both go through CONNECT tunnels.
    cert, key = ca.issue(["localhost"], label="proxied")
    with coturn_support.coturn(auth_secret="north-wind", tls=(cert, key) if turn == "tls" else None) as turn_port, \
            otsession.Server(api_key="4711014", api_secret="ef" * 20, tls_cert=cert, tls_key=key, turn_secret="north-wind",
                             ice_servers=[f"turn:localhost:{turn_port}?transport=tcp" if turn == "tcp"
                                          else f"turns:localhost:{turn_port + 1}"]) as server:
        turn_port = turn_port if turn == "tcp" else turn_port + 1
        proxy = ConnectProxy()
        sid = server.create_session(relayed=True)
        url = f"wss://localhost:{server.port}"
        closing = []
        try:
            # Without the proxy's credentials the connection fails (the proxy's refusal named), nothing leaks around it.
            bad, outcome = connect(server.api_key, sid, server.token(sid), url, tls_ca_file=ca.ca_file,
                                   proxy_url=f"http://127.0.0.1:{proxy.port}")
            bad.close()
            assert outcome[0] == "error" and "407" in outcome[1][1], outcome
            assert proxy.refused == 1 and not proxy.targets
            a, b = (_connected(closing, server.api_key, sid, server.token(sid), url, tls_ca_file=ca.ca_file,
                               proxy_url=proxy.url, ice_config=_relay_only()) for _ in range(2))
            viewer, local = _publish_and_watch(a, b, "proxied", closing)
            stamped = [f.test_pattern[0] for f in viewer.frames if f.test_pattern]
            assert stamped == sorted(stamped)
            assert local["candidateType"] == "relay" and local["relayProtocol"] == turn, local
            ports = [int(t.rsplit(":", 1)[1]) for t in proxy.targets]
            assert ports.count(server.port) == 2, proxy.targets           # both signaling connections
            assert ports.count(turn_port) >= 2, proxy.targets             # each side's TURN allocation
            # includeServers = custom, relay-only and no custom server: the server's TURN is not used, and
            # subscribing is refused as documented (1011 naming the setting).
            c = _connected(closing, server.api_key, sid, server.token(sid), url, tls_ca_file=ca.ca_file,
                           ice_config=_relay_only(otsession.ICEIncludeServers.CUSTOM))
            logged = []
            otsession.set_log_callback(lambda level, message: logged.append(message))
            try:
                with pytest.raises(otsession.OTError) as e:
                    c.subscribe(otsession.Subscriber(c.created.get(timeout=10)))
            finally:
                otsession.set_log_callback(None)
            assert e.value.code == otsession.ErrorCode.INVALID_PARAM, e.value
            assert any("includeServers is custom" in m for m in logged), logged
        finally:
            _close_all(closing)
            proxy.close()


def test_routed_sessions_with_the_servers_turn(ca):
    # Every client of a routed session gets the server's TURN server too: the publisher (policy all) checks its
    # relayed pair after its host pair, nominating both towards the router (ICE-lite), and the router must keep the
    # pair the publisher keeps; a relay-only subscriber reaches the router through coturn.
    with coturn_support.coturn(auth_secret="north-wind") as turn_port, \
            otsession.Server(api_key="4711015", api_secret="ef" * 20, ice_servers=[f"turn:localhost:{turn_port}?transport=udp"],
                             turn_secret="north-wind") as server:
        sid = server.create_session()
        closing = []
        try:
            a = _connected(closing, server.api_key, sid, server.token(sid), server.url)
            b = _connected(closing, server.api_key, sid, server.token(sid), server.url, ice_config=_relay_only())
            _, local = _publish_and_watch(a, b, "routed", closing)
            assert local["candidateType"] == "relay", local
        finally:
            _close_all(closing)


def test_sighup_reloads_the_certificate_without_dropping_sessions(tls_server, ca):
    sid = _session_id(tls_server)
    client, outcome = connect(tls_server.key, sid, otsession.token(tls_server.key, tls_server.secret, sid),
                              f"wss://localhost:{tls_server.port}", tls_ca_file=ca.ca_file)
    try:
        assert outcome == ("connected", None), outcome
        before = _served_serial(tls_server, ca)
        cert, key = ca.issue(["localhost", "127.0.0.1"], label=f"renewed{time.monotonic_ns()}")
        shutil.copy(cert, tls_server.cert_file)
        shutil.copy(key, tls_server.key_file)
        tls_server.proc.send_signal(signal.SIGHUP)
        tls_server.wait_line("TLS certificate reloaded")
        after = _served_serial(tls_server, ca)
        assert after != before, (before, after)
        # The session opened under the old certificate carries on.
        sdk = Client(tls_server.key, tls_server.secret, api_url=f"https://localhost:{tls_server.port}")
        os.environ["REQUESTS_CA_BUNDLE"] = ca.ca_file
        try:
            sdk.send_signal(sid, {"type": "after", "data": "reload"})
        finally:
            del os.environ["REQUESTS_CA_BUNDLE"]
        assert client.signals.get(timeout=10) == ("after", "reload")
        # A key that does not match: the server keeps serving the current certificate and says why.
        other_cert, _ = ca.issue(["localhost"], label=f"mismatch{time.monotonic_ns()}")
        shutil.copy(other_cert, tls_server.cert_file)
        tls_server.proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert tls_server.proc.poll() is None
        assert _served_serial(tls_server, ca) == after
    finally:
        client.close()


def _served_serial(server, ca):
    with ca.context().wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=10),
                                  server_hostname="localhost") as s:
        return ssl.DER_cert_to_PEM_cert(s.getpeercert(binary_form=True))


IPV6_CLIENT = """
import sys, threading, otsession
ca_file, cert, key, name = sys.argv[1:5]
with otsession.Server(api_key="4711", api_secret="ab" * 20, host="::1", tls_cert=cert, tls_key=key) as srv:
    sid = srv.create_session()
    for url in (f"wss://{name}:{srv.port}", f"wss://[::1]:{srv.port}"):
        done, got = threading.Event(), []
        s = otsession.Session(srv.api_key, sid, server_url=url, tls_ca_file=ca_file)
        s.on("connected", lambda: (got.append("connected"), done.set()))
        s.on("error", lambda code, message: (got.append(f"{int(code)} {message}"), done.set()))
        s.connect(srv.token(sid))
        done.wait(10)
        print(url.split("//")[1].rsplit(":", 1)[0], got[0] if got else "timed out", flush=True)
        s.close()
"""


def test_a_name_that_resolves_to_ipv6_over_wss(ca):
    # In a namespace of its own whose /etc/hosts (mounted by `ip netns exec` from /etc/netns/<name>/hosts) maps a
    # name to ::1 only: the server listens on ::1 and a client reaches it by that name, and by the literal [::1]
    # (the certificate carries both).
    if not netns_support.netns_available("otv6"):
        pytest.skip("network namespaces need root, ip and nft")
    ns, name = f"otv6{os.getpid()}{secrets.token_hex(2)}", "v6.otsession.test"
    cert, key = ca.issue([name, "::1"], label="v6")
    os.makedirs(f"/etc/netns/{ns}")
    try:
        with open(f"/etc/netns/{ns}/hosts", "w") as f:
            f.write(f"127.0.0.1 localhost\n::1 {name}\n")
        netns_support.sh("ip", "netns", "add", ns)
        netns_support.sh("ip", "-n", ns, "link", "set", "lo", "up")
        out = subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", IPV6_CLIENT, ca.ca_file, cert, key, name],
                             capture_output=True, text=True, timeout=60)
        assert out.stdout.splitlines() == [f"{name} connected", "[::1] connected"], out.stdout + out.stderr
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
