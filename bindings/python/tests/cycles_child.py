"""Runs connect/publish/subscribe/unsubscribe/unpublish/disconnect/close cycles through the Python package, routed
or relayed, and prints one JSON line of what the process holds after a warm-up and after each half of the cycles. Run by
test_cycles.py with the repository's allocation counter preloaded (LD_PRELOAD), which counts the live heap exactly.

    python3 cycles_child.py routed|relayed COUNT
"""
import ctypes
import gc
import json
import os
import sys
import threading
import time

import otsession
from otsession import AudioSource, Role
from session_recorder import SessionRecorder

counter = ctypes.CDLL(None)
for name in ("ot_alloc_live_bytes", "ot_alloc_live_blocks"):
    getattr(counter, name).restype = ctypes.c_longlong


def live():
    """The live heap once idle, after a garbage collection (objects in reference cycles wait for one): when the number
    of threads has not changed for 6 s (at most 30 s), idle libdispatch workers have exited (after 5 s) with their
    per-thread state and cached work items, which otherwise come and go with the number of threads; then the smallest
    of ten samples over half a second. Every block counts (subtracting libdispatch's cached continuations drifted in
    the C test by two blocks a cycle, which would hide a leak of that size)."""
    gc.collect()
    threads, stable = resources()[1], 0.0
    waited = 0.0
    while stable < 6 and waited < 30:
        time.sleep(0.25)
        waited += 0.25
        now = resources()[1]
        stable = stable + 0.25 if now == threads else 0.0
        threads = now
    samples = []
    for _ in range(10):
        samples.append((counter.ot_alloc_live_bytes(), counter.ot_alloc_live_blocks()))
        time.sleep(0.05)
    return min(samples)


def resources():
    return len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task"))


class Viewer(otsession.Subscriber):
    def __init__(self, stream):
        super().__init__(stream)
        self.frames = 0
        self.gone = threading.Event()
        self.three = threading.Event()

    def on_render_frame(self, frame):
        self.frames += 1
        if self.frames >= 3:
            self.three.set()

    def on_disconnected(self):
        self.gone.set()


class Client(SessionRecorder):
    """A recorded session that also queues the streams it sees."""

    def on_stream_created(self, stream):
        self.events.put(("stream_created", stream))


def cycle(server, sid):
    a = Client.connected(server, sid, Role.PUBLISHER, timeout=15)
    b = Client.connected(server, sid, Role.SUBSCRIBER, timeout=15)
    pub = otsession.Publisher("cycle", width=320, height=240, audio_source=AudioSource.TONE, tone_hz=440)
    unpublished = threading.Event()
    pub.on("stream_destroyed", lambda stream: unpublished.set())
    a.publish(pub)
    viewer = Viewer(b.expect("stream_created", timeout=15)[1])
    b.subscribe(viewer)
    assert viewer.three.wait(15), f"{viewer.frames} frames"
    b.unsubscribe(viewer)
    a.unpublish(pub)
    assert unpublished.wait(15), "no stream destroyed"
    for s in (b, a):
        s.disconnect()
        s.expect("disconnected", timeout=15)
    # Neither the unsubscribe nor the session's end is a subscriber event (B's callbacks come in one order).
    assert not viewer.gone.is_set(), "a subscriber disconnected without an interruption"
    viewer.close()
    pub.close()
    b.close()
    a.close()


def main():
    kind, count = sys.argv[1], int(sys.argv[2])
    with otsession.Server(api_key="4700009", api_secret="cd" * 20) as server:
        sid = server.create_session(relayed=kind == "relayed")
        for _ in range(10):  # warm-up: the library's and Python's per-thread state, type caches
            cycle(server, sid)
        time.sleep(0.3)
        fds, threads = resources()
        # The live heap after the warm-up, after an early and after a late batch of half the cycles each: caches
        # filling up grow the early batch only, a leak grows every batch by the same amount.
        heap = [live()]
        for _ in range(2):
            for _ in range(count // 2):
                cycle(server, sid)
            deadline = time.time() + 5
            while time.time() < deadline and (resources()[0] > fds + 2 or resources()[1] > threads + 4):
                time.sleep(0.05)
            heap.append(live())
        fds_after, threads_after = resources()
    print(json.dumps({"kind": kind, "count": count, "fds": [fds, fds_after], "threads": [threads, threads_after],
                      "live_bytes": [h[0] for h in heap], "live_blocks": [h[1] for h in heap]}))


if __name__ == "__main__":
    main()
