"""Sessions under real packet loss: each test runs loss_peer.py (server, publisher and subscriber in one process) inside
its own network namespace whose nftables output chain drops UDP at random (`numgen random mod 100 < P`): every
datagram each way (media, RTCP, STUN, DTLS) crosses the output hook once, so each traversal loses P %. Signaling is
TCP and unaffected. Needs root, `ip` and `nft` (skipped otherwise); the namespace is deleted in a finally.

Asserted, with margins for a loaded 2-core machine: every subscribe connects and shows a first frame, the median
of four is under 600 ms at 10 % and 1 s at 20 % (none over 1.5 s / 4.5 s: the DTLS and keyframe repair timers run
from the measured round trip, not 1 s; at 20 % a handshake flight lost several times in a row is a real tail: at
stop 21, first frames of 3.1–3.7 s, e.g. 2 of 60 relayed subscribes in 15 runs, all connected), and over 6 s of one
subscription the frames rendered cover most (85 % / 75 %) of the test pattern's counter span. Before this work a lost DTLS flight cost 1 s, a
lost keyframe request or keyframe start left routed subscribers without video, and a lost retransmission froze video
for up to a second (docs/benchmarks.md, "Loss": 10 % routed rendered 26 % of its frames, 20 % relayed 70 %)."""
import json
import os
import secrets
import subprocess
import sys

import pytest
from netns_support import netns_available, sh as _sh

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "loss_peer.py")
ROUNDS = 3
SECONDS = 6


pytestmark = pytest.mark.skipif(not netns_available("otloss"), reason="needs root, ip and nft (network namespaces)")


def run_lossy(mode: str, percent: int) -> dict:
    ns = f"otloss{os.getpid()}{secrets.token_hex(2)}"
    try:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "netns", "exec", ns, "nft", "-f", "-", input=(
            "table inet otloss {\n chain out {\n  type filter hook output priority 0; policy accept;\n"
            f"  meta l4proto udp numgen random mod 100 < {percent} drop\n }}\n}}\n"))
        p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, PEER, mode, str(ROUNDS), str(SECONDS)],
                           capture_output=True, text=True, timeout=120, env=dict(os.environ))
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        assert p.returncode == 0 and lines, f"peer failed ({p.returncode}): {p.stderr[-2000:]}"
        return json.loads(lines[-1])
    finally:
        _sh("ip", "netns", "del", ns, check=False)


@pytest.mark.parametrize("mode,percent,median_ms,max_ms,min_share", [
    ("routed", 10, 600, 1500, 0.85), ("relayed", 10, 600, 1500, 0.85),
    ("routed", 20, 1000, 4500, 0.75), ("relayed", 20, 1000, 4500, 0.75)])
def test_session_under_random_loss(mode, percent, median_ms, max_ms, min_share):
    r = run_lossy(mode, percent)
    detail = f"{mode} {percent}%: {r}"
    assert r["connected"] == ROUNDS + 1, "every subscribe connected: " + detail
    assert all(ms is not None for ms in r["first_frames_ms"]), "every subscribe showed a frame: " + detail
    first = sorted(r["first_frames_ms"])
    assert (first[1] + first[2]) / 2 < median_ms, "first frames quick (median): " + detail
    assert first[-1] < max_ms, "no first frame waits long: " + detail
    assert r["counter_span"] >= 30 * SECONDS * 0.5, "the publisher kept sending: " + detail
    assert r["rendered"] >= min_share * r["counter_span"], "most frames rendered: " + detail
