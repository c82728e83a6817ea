"""The media router under real network faults: the server (with a publisher) and a subscriber run in two network
namespaces joined by a veth pair. Audio fallback: an nftables rule in the subscriber's namespace drops 30% of the UDP
it receives (its downlink from the router), then is removed; the router's default rules apply (judged on the last
5 s weighted by packets): warning after 1.9 s of poor windows, video dropped after 2.9 s, back after 2.9 s good. Publisher outage: a rule in the server's namespace cuts
the publisher's UDP to the router. Needs root, `ip` and `nft` (skipped otherwise)."""
import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest
from netns_support import netns_available, sh as _sh

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "fallback_peer.py")
QUALITY = 3  # VideoReason.QUALITY


pytestmark = pytest.mark.skipif(not netns_available("otfb"), reason="needs root, ip and nft (network namespaces)")


class Net:
    """Two namespaces (server side A, subscriber side B) joined by a veth pair on a /30 of our own."""

    def __init__(self):
        pid = os.getpid() % 10000
        self.a, self.b = f"otfbA{pid}", f"otfbB{pid}"
        va, vb = f"otfba{pid}", f"otfbb{pid}"
        octet = 16 + pid % 200
        self.ip_a, self.ip_b = f"10.231.{octet}.1", f"10.231.{octet}.2"
        for ns in (self.a, self.b):
            _sh("ip", "netns", "del", ns, check=False)
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "link", "add", va, "netns", self.a, "type", "veth", "peer", "name", vb, "netns", self.b)
        for ns, dev, ip in ((self.a, va, self.ip_a), (self.b, vb, self.ip_b)):
            _sh("ip", "-n", ns, "addr", "add", f"{ip}/30", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")

    def drop_udp_into_b(self, percent: int) -> None:
        _sh("ip", "netns", "exec", self.b, "nft", "add", "table", "inet", "otfb")
        _sh("ip", "netns", "exec", self.b, "nft", "add", "chain", "inet", "otfb", "in",
            "{ type filter hook input priority 0 ; }")
        _sh("ip", "netns", "exec", self.b, "nft", "add", "rule", "inet", "otfb", "in",
            "ip", "saddr", self.ip_a, "meta", "l4proto", "udp", "numgen", "random", "mod", "100", "<", str(percent), "drop")

    def drop_udp_within_a(self) -> None:
        """Cuts the publisher's media link to the router: both run in A, so their UDP goes over A's loopback, while
        the subscriber's (from B, on the veth) and all signaling (TCP) pass."""
        _sh("ip", "netns", "exec", self.a, "nft", "add", "table", "inet", "otfb")
        _sh("ip", "netns", "exec", self.a, "nft", "add", "chain", "inet", "otfb", "in",
            "{ type filter hook input priority 0 ; }")
        _sh("ip", "netns", "exec", self.a, "nft", "add", "rule", "inet", "otfb", "in", "iifname", "lo", "meta", "l4proto", "udp",
            "drop")

    def stop_dropping(self, ns=None) -> None:
        _sh("ip", "netns", "exec", ns or self.b, "nft", "delete", "table", "inet", "otfb")

    def close(self) -> None:
        for ns in (self.a, self.b):
            _sh("ip", "netns", "del", ns, check=False)


class Peer:
    """A fallback_peer.py process in a namespace; its JSON lines arrive on `lines`."""

    def __init__(self, ns, *args):
        env = dict(os.environ)
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, PEER, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                pass
        self.lines.put(None)

    def next(self, timeout):
        msg = self.lines.get(timeout=timeout)
        if msg is None:
            raise AssertionError(f"peer exited: {self.proc.wait(timeout=5)} {self.proc.stderr.read()[-2000:]}")
        self.seen.append(msg)
        return msg

    def expect(self, event, timeout=30):
        """The next message of kind `event`, recording the others."""
        end = time.time() + timeout
        while True:
            msg = self.next(max(0.1, end - time.time()))
            if msg.get("event") == event:
                return msg

    def events(self):
        return [m["event"] for m in self.seen if m.get("event") not in ("media", None)]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def routed():
    """Yields a function starting server+publisher (audio_fallback_enabled as given) and a subscriber."""
    net = Net()
    peers = []

    def start(fallback: bool):
        server = Peer(net.a, "server", net.ip_a, "1" if fallback else "0")
        peers.append(server)
        info = server.next(60)
        sub = Peer(net.b, "subscriber", info["url"], info["api_key"], info["sid"], info["token"])
        peers.append(sub)
        assert sub.expect("connected", 60)["audio_fallback_enabled"] is fallback
        return net, sub

    try:
        yield start
    finally:
        for p in reversed(peers):
            p.close()
        net.close()


def media_after(sub, seconds):
    """The subscriber's (frames, audio frames) progress over the next `seconds` seconds of its reports."""
    first = sub.expect("media", 10)
    last = first
    for _ in range(seconds):
        last = sub.expect("media", 10)
    return last["frames"] - first["frames"], last["audio"] - first["audio"]


def test_router_drops_video_under_loss_and_restores_it(routed):
    net, sub = routed(True)
    assert media_after(sub, 2)[0] > 0, "video flows before the loss"
    net.drop_udp_into_b(30)
    sub.expect("video_disable_warning", 30)
    assert sub.expect("video_disabled", 30)["reason"] == QUALITY
    frames, audio = media_after(sub, 2)
    assert audio > 20, "audio continues while video is off"
    assert frames <= 2, "video stopped"
    net.stop_dropping()
    assert sub.expect("video_enabled", 40)["reason"] == QUALITY
    assert media_after(sub, 2)[0] > 0, "video flows again"
    ev = sub.events()
    assert ev.index("video_disable_warning") < ev.index("video_disabled") < ev.index("video_enabled")


def test_no_fallback_when_the_publisher_disables_it(routed):
    net, sub = routed(False)
    net.drop_udp_into_b(30)
    frames, _ = media_after(sub, 12)  # longer than the window (4 s) and disabling (3 s more) take
    net.stop_dropping()
    assert frames > 0, "video keeps coming under loss"
    assert "video_disable_warning" not in sub.events() and "video_disabled" not in sub.events()


def test_publisher_media_outage_interrupts_the_subscriber_until_the_publisher_is_back(routed):
    """Issue 13's routed outage through the C ABI: the publisher's media link to the router drops (its UDP cut, its
    signaling kept) until the router or the publisher gives it up (ICE consent, 30 s); the subscriber's own link stays
    up and gets on_disconnected; once the link may work again the publisher republishes within its 15 s window and
    the subscriber gets on_reconnected, then frames again, its stream never destroyed."""
    net, sub = routed(False)
    assert media_after(sub, 2)[0] > 0, "video flows before the outage"
    net.drop_udp_within_a()
    try:
        sub.expect("disconnected", 90)
        frames, _ = media_after(sub, 2)
        assert frames <= 2, "no video while the publisher's link is down"
    finally:
        net.stop_dropping(net.a)
    sub.expect("reconnected", 60)
    assert media_after(sub, 3)[0] > 0, "video flows again"
    ev = sub.events()
    assert ev.index("disconnected") < ev.index("reconnected") and ev.count("disconnected") == 1, ev

