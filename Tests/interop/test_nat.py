"""Two clients behind two NATs (network namespaces, nft masquerade) in a relayed session: media flows only through
server-reflexive candidates from a STUN server (coturn), and filterOutLanCandidates keeps private addresses out
of what is signalled.

Topology (unique namespace names per test, removed in a finally; the root namespace is not touched):

    private A 10.71.1.2 -- 10.71.1.1 [NAT A] 198.51.100.2 --- 198.51.100.1 [public] 198.51.100.5 --- 198.51.100.6 [NAT B] 10.71.2.1 -- 10.71.2.2 private B
                                                              203.0.113.10: ot-server (via a recording proxy), coturn (STUN)

The deploy cases at the end (issue 14) run `ot-server` itself in the public namespace over TLS, reached by host names
only the namespaces' /etc/hosts know: relay-only peers with the server's coturn (use-auth-secret) credentials, and the
media router behind a DNAT 1:1 NAT.

The NATs masquerade (port-preserving mapping) and drop unsolicited new flows from outside, so a peer is reachable
only at the address the NAT shows after the peer sent to that remote (address-and-port-dependent filtering). The
private networks are not routed: host candidates cannot work."""
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time

import pytest

from plumbing import stop_process

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLIC_IP = "203.0.113.10"
STUN = f"stun:{PUBLIC_IP}:3478"
SIGNALING_PORT = 8099


def _need_namespaces():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt: iproute2, nftables)")


def sh(*cmd, input=None):
    r = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r.stdout


class NATNetwork:
    """The namespaces and links above; `run(ns, ...)` starts a process in one of them."""

    def __init__(self):
        sfx = secrets.token_hex(3)
        self.ns = {k: f"otn{sfx}{k}" for k in ("pub", "nata", "natb", "a", "b")}
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="ot-nat-")

    def build(self):
        ns = self.ns
        for n in ns.values():
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "-n", ns["pub"], "addr", "add", f"{PUBLIC_IP}/32", "dev", "lo")
        sh("ip", "netns", "exec", ns["pub"], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for side, pub_net, priv_net in (("a", "198.51.100.0", "10.71.1"), ("b", "198.51.100.4", "10.71.2")):
            nat, priv = ns["nat" + side], ns[side]
            base = int(pub_net.rsplit(".", 1)[1])
            pub_ip, nat_ip = f"198.51.100.{base + 1}", f"198.51.100.{base + 2}"
            sh("ip", "-n", ns["pub"], "link", "add", "to" + side, "type", "veth", "peer", "name", "up0", "netns", nat)
            sh("ip", "-n", ns["pub"], "addr", "add", f"{pub_ip}/30", "dev", "to" + side)
            sh("ip", "-n", ns["pub"], "link", "set", "to" + side, "up")
            sh("ip", "-n", nat, "addr", "add", f"{nat_ip}/30", "dev", "up0")
            sh("ip", "-n", nat, "link", "set", "up0", "up")
            sh("ip", "-n", nat, "route", "add", "default", "via", pub_ip)
            sh("ip", "-n", nat, "link", "add", "lan0", "type", "veth", "peer", "name", "eth0", "netns", priv)
            sh("ip", "-n", nat, "addr", "add", f"{priv_net}.1/24", "dev", "lan0")
            sh("ip", "-n", nat, "link", "set", "lan0", "up")
            sh("ip", "-n", priv, "addr", "add", f"{priv_net}.2/24", "dev", "eth0")
            sh("ip", "-n", priv, "link", "set", "eth0", "up")
            sh("ip", "-n", priv, "route", "add", "default", "via", f"{priv_net}.1")
            sh("ip", "netns", "exec", nat, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            sh("ip", "netns", "exec", nat, "nft", "-f", "-", input="""
                table ip otnat {
                    chain post { type nat hook postrouting priority srcnat; oifname "up0" masquerade; }
                    chain pre { type filter hook prerouting priority -150; iifname "up0" ct state new counter drop; }
                }""")

    def run(self, ns_key, *cmd, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", self.ns[ns_key], *cmd], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        self.procs.append(p)
        return p

    def start_coturn(self, auth_secret=None):
        """coturn on the public address: STUN, and TURN with long-term credentials or, with `auth_secret`, the
        shared-secret scheme (use-auth-secret) whose credentials ot-server mints."""
        conf = os.path.join(self.dir, "turnserver.conf")
        auth = f"use-auth-secret\nstatic-auth-secret={auth_secret}\n" if auth_secret else "lt-cred-mech\nuser=otuser:otpass\n"
        with open(conf, "w") as f:
            f.write(f"listening-ip={PUBLIC_IP}\nrelay-ip={PUBLIC_IP}\nlistening-port=3478\n{auth}"
                    f"realm=otsession.test\nno-tls\nno-dtls\nno-cli\nno-rfc5780\nno-stdout-log\n"
                    f"log-file={self.dir}/turn.log\npidfile={self.dir}/turn.pid\nuserdb={self.dir}/turndb\n")
        self.run("pub", "/usr/bin/turnserver", "-c", conf)
        deadline = time.time() + 10
        while time.time() < deadline:  # coturn answers once its UDP listener is up
            if f"{PUBLIC_IP}:3478" in sh("ip", "netns", "exec", self.ns["pub"], "ss", "-Hlun"):
                return
            time.sleep(0.1)
        raise RuntimeError("coturn did not start")

    def hosts(self, names, ip=PUBLIC_IP):
        """`names` resolve to `ip` in the public and private namespaces: `ip netns exec` mounts
        /etc/netns/<namespace>/hosts over /etc/hosts, as a deployment's DNS would answer."""
        for key in ("pub", "a", "b"):
            d = os.path.join("/etc/netns", self.ns[key])
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write(f"127.0.0.1 localhost\n{ip} {' '.join(names)}\n")

    def close(self):
        for p in self.procs:
            stop_process(p)
        for n in self.ns.values():
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
            shutil.rmtree(os.path.join("/etc/netns", n), ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def nat():
    _need_namespaces()
    net = NATNetwork()
    try:
        net.build()
        yield net
    finally:
        net.close()


def read_json_line(p, timeout):
    """The first stdout line of `p` as JSON (within `timeout` seconds)."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise AssertionError(f"no result within {timeout} s; stderr: {p.stderr.read() if p.poll() is not None else ''}")
    line = p.stdout.readline()
    if not line:
        raise AssertionError(f"process ended without a result: {p.stderr.read()}")
    return json.loads(line)


def run_session(net, stun, filter_lan, frames=30, seconds=40):
    """Server and coturn in public, one client per private namespace; returns (results A and B, captured signaling)."""
    capture = os.path.join(net.dir, "signaling.bin")
    net.start_coturn()
    server = net.run("pub", "python3", os.path.join(HERE, "nat_server.py"), PUBLIC_IP, str(SIGNALING_PORT), capture)
    info = read_json_line(server, 30)
    clients = []
    for i, side in enumerate(("a", "b")):
        cfg = {"url": info["url"], "api_key": info["api_key"], "session_id": info["session_id"],
               "token": info["tokens"][i], "name": "client-" + side, "stun": [STUN] if stun else [],
               "filter_lan": filter_lan, "frames": frames, "seconds": seconds}
        clients.append(net.run(side, "python3", os.path.join(HERE, "nat_client.py"), json.dumps(cfg)))
    results = [read_json_line(c, seconds + 30) for c in clients]
    for c in clients:
        c.stdin.close()
    with open(capture, "rb") as f:
        signaling = f.read().decode(errors="replace")
    return results, signaling


def selected_local_candidate(report):
    return selected_candidate(report, "localCandidateId")


def selected_candidate(report, which):
    pair = next(s for s in report if s["type"] == "candidate-pair")
    return next(s for s in report if s["id"] == pair[which])


def assert_media_flowed(r):
    assert not r["sub_errors"] and not r["session_errors"], r
    numbers = r["numbers"]
    assert len(numbers) >= 30, r
    assert numbers[-1] > numbers[0], "the test pattern's frame counter increases"


def test_nated_peers_connect_through_server_reflexive_candidates(nat):
    results, signaling = run_session(nat, stun=True, filter_lan=False)
    for r in results:
        assert_media_flowed(r)
        local = selected_local_candidate(r["sub_report"])
        assert local["candidateType"] in ("srflx", "prflx"), local
        assert local["address"].startswith("198.51.100."), local
    assert "typ srflx" in signaling
    assert "10.71." in signaling, "without the LAN filter the private host candidates are signalled too"


def test_filter_out_lan_candidates_signals_no_private_address(nat):
    results, signaling = run_session(nat, stun=True, filter_lan=True)
    for r in results:
        assert_media_flowed(r)
        assert selected_local_candidate(r["sub_report"])["candidateType"] in ("srflx", "prflx")
    assert "typ srflx" in signaling and "198.51.100.2" in signaling and "198.51.100.6" in signaling
    assert "10.71." not in signaling, "a private address was signalled"


def test_without_stun_nated_peers_cannot_connect(nat):
    results, _ = run_session(nat, stun=False, filter_lan=False, seconds=45)
    for r in results:
        assert not r["numbers"], r
        assert r["sub_errors"], r
    # Each pair fails on whichever side's ICE gives up first: the subscriber reports "ICE failed", or hears that
    # the publisher's side (whose ICE failed first) closed the connection. The emulator's ServerReflexiveTests
    # check the ICE failure itself on both sides.
    messages = [message for r in results for _, message in r["sub_errors"]]
    assert all("ICE failed" in m or "closed the media connection" in m for m in messages), messages


# Deploying beyond loopback (issue 14): `ot-server` itself in the public namespace over TLS, reached by host names that
# only the namespaces' /etc/hosts know; its session and tokens made by the official `opentok` SDK over https.

SERVER_NAME, TURN_NAME = "ot.otsession.test", "turn.otsession.test"
TLS_PORT = 8443
TURN_SECRET = "north-wind"
#: 1:1 NAT: the router binds a private address of the public namespace and is advertised at a public one that a DNAT
#: rule maps to it.
ROUTER_PRIVATE, ROUTER_PUBLIC, ROUTER_PORT = "10.99.0.1", "203.0.113.20", 40000


def start_ot_server(net, binary, ca, *args):
    """ot-server on SERVER_NAME:TLS_PORT with a certificate of `ca`; returns (its first two lines, api key, secret)."""
    net.hosts([SERVER_NAME, TURN_NAME])
    cert, key = ca.issue([SERVER_NAME], label=f"nat{secrets.token_hex(3)}")
    key_, secret = sh(binary, "keygen").strip().split(":")
    p = net.run("pub", binary, "--listen", f"{PUBLIC_IP}:{TLS_PORT}", "--tls-cert", cert, "--tls-key", key, *args,
                env=dict(os.environ, OT_SERVER_PROJECTS=f"{key_}:{secret}"))
    lines = [p.stdout.readline(), p.stdout.readline()]
    assert f"https://{PUBLIC_IP}:{TLS_PORT}" in lines[0], lines
    return lines, key_, secret


BACKEND = """
import json, sys
from opentok import Client, MediaModes
sdk = Client(sys.argv[1], sys.argv[2], api_url=sys.argv[3])
sid = sdk.create_session(media_mode=MediaModes.relayed if sys.argv[4] == "relayed" else MediaModes.routed).session_id
print(json.dumps({"session_id": sid, "tokens": [sdk.generate_token(sid) for _ in range(2)]}))
"""


def run_deploy_session(net, key, secret, ca, mode, relay_only, seconds=40):
    """The backend (the opentok SDK, over https to SERVER_NAME, trusting the CA) makes a session and two tokens in the
    public namespace; a client in each private namespace joins it at wss://SERVER_NAME; returns their results."""
    made = sh("ip", "netns", "exec", net.ns["pub"], "env", f"REQUESTS_CA_BUNDLE={ca.ca_file}", "python3", "-c", BACKEND,
              key, secret, f"https://{SERVER_NAME}:{TLS_PORT}", mode)
    info = json.loads(made)
    clients = []
    for i, side in enumerate(("a", "b")):
        cfg = {"url": f"wss://{SERVER_NAME}:{TLS_PORT}", "api_key": key, "session_id": info["session_id"],
               "token": info["tokens"][i], "name": "client-" + side, "relay_only": relay_only,
               "tls_ca_file": ca.ca_file, "frames": 30, "seconds": seconds}
        clients.append(net.run(side, "python3", os.path.join(HERE, "nat_client.py"), json.dumps(cfg)))
    results = [read_json_line(c, seconds + 30) for c in clients]
    for c in clients:
        c.stdin.close()
    return results


def test_nated_peers_relay_through_the_servers_turn_by_name(nat, ot_server_binary, test_ca):
    # Relayed session, both clients relay-only with no ICE server of their own: the server hands each the TURN URL
    # (a host name) with credentials minted from coturn's use-auth-secret secret, and media flows relay to relay.
    nat.start_coturn(auth_secret=TURN_SECRET)
    _, key, secret = start_ot_server(nat, ot_server_binary, test_ca, "--ice-server", f"turn:{TURN_NAME}:3478?transport=udp",
                                     "--turn-secret", TURN_SECRET)
    for r in run_deploy_session(nat, key, secret, test_ca, "relayed", relay_only=True):
        assert_media_flowed(r)
        local = selected_local_candidate(r["sub_report"])
        assert local["candidateType"] == "relay" and local["address"] == PUBLIC_IP, local
        assert selected_candidate(r["sub_report"], "remoteCandidateId")["candidateType"] == "relay"


def test_the_router_behind_1to1_nat_is_reached_at_its_advertised_address(nat, ot_server_binary, test_ca):
    # Routed session; the router binds ROUTER_PRIVATE (which the clients cannot reach: the public namespace drops
    # what is sent to it from outside) and advertises ROUTER_PUBLIC, which a DNAT rule maps to it, as a cloud VM's
    # 1:1 NAT does.
    pub = nat.ns["pub"]
    sh("ip", "-n", pub, "addr", "add", f"{ROUTER_PRIVATE}/32", "dev", "lo")
    sh("ip", "netns", "exec", pub, "nft", "-f", "-", input=f"""
        table ip otdnat {{
            chain guard {{ type filter hook prerouting priority -150; iifname != "lo" ip daddr {ROUTER_PRIVATE} counter drop; }}
            chain pre {{ type nat hook prerouting priority dstnat; ip daddr {ROUTER_PUBLIC} udp dport {ROUTER_PORT} dnat to {ROUTER_PRIVATE}:{ROUTER_PORT}; }}
        }}""")
    lines, key, secret = start_ot_server(nat, ot_server_binary, test_ca, "--media-host", ROUTER_PRIVATE,
                                         "--media-port", str(ROUTER_PORT), "--media-advertise", ROUTER_PUBLIC)
    assert f"udp {ROUTER_PRIVATE}:{ROUTER_PORT} (advertised as {ROUTER_PUBLIC}:{ROUTER_PORT})" in lines[1], lines
    for r in run_deploy_session(nat, key, secret, test_ca, "routed", relay_only=False):
        assert_media_flowed(r)
        remote = selected_candidate(r["sub_report"], "remoteCandidateId")
        assert (remote["address"], remote["port"]) == (ROUTER_PUBLIC, ROUTER_PORT), remote
    counters = sh("ip", "netns", "exec", pub, "nft", "list", "chain", "ip", "otdnat", "guard")
    assert "packets 0 " in counters, "nothing was sent to the router's private address: " + counters
