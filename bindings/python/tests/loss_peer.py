"""One run of test_loss_netns.py, inside a network namespace whose nftables output chain drops UDP at random.

  loss_peer.py routed|relayed ROUNDS SECONDS

An embedded server (with its media router for routed sessions) on 127.0.0.1, a publisher (test pattern 320x240 at
30 fps and a tone) and a second client that subscribes ROUNDS times (subscribe -> first rendered frame, unsubscribe),
then once more for SECONDS while it reads the test pattern's frame counter from every rendered frame. Prints one JSON
line: {"first_frames_ms": [...], "connected": n, "rendered": n, "counter_span": n, "errors": [...]}.
"""
import json
import sys
import threading
import time

import otsession
from otsession import AudioSource, Role


class Viewer(otsession.Subscriber):
    def __init__(self, stream):
        super().__init__(stream, play_audio=False)
        self.lock = threading.Lock()
        self.connected = threading.Event()
        self.first = threading.Event()
        self.first_at = None
        self.start = time.monotonic()
        self.numbers = []
        self.errors = []
        self.events = []

    def on_video_disabled(self, reason):
        with self.lock:
            self.events.append(f"video disabled ({reason.name.lower()}) at {self.elapsed()} ms")

    def on_video_enabled(self, reason):
        with self.lock:
            self.events.append(f"video enabled ({reason.name.lower()}) at {self.elapsed()} ms")

    def on_video_disable_warning(self):
        with self.lock:
            self.events.append(f"video disable warning at {self.elapsed()} ms")

    def elapsed(self):
        return round((time.monotonic() - self.start) * 1000)

    def on_connected(self, stream):
        self.connected.set()

    def on_error(self, code, message):
        with self.lock:
            self.errors.append(f"{code} {message}")

    def on_render_frame(self, frame):
        with self.lock:
            if self.first_at is None:
                self.first_at = time.monotonic()
            if frame.test_pattern:
                self.numbers.append(frame.test_pattern[0])
        self.first.set()


def main(mode: str, rounds: int, seconds: float) -> None:
    with otsession.Server(api_key="4242", api_secret="ab" * 20) as server:
        sid = server.create_session(relayed=mode == "relayed")
        pub_s = otsession.Session(server.api_key, sid, server_url=server.url)
        sub_s = otsession.Session(server.api_key, sid, server_url=server.url)
        streams, ready = [], threading.Event()
        sub_s.on("stream_created", lambda st: (streams.append(st), ready.set()))
        for s in (pub_s, sub_s):
            up = threading.Event()
            s.on("connected", up.set)
            s.connect(server.token(sid, Role.PUBLISHER))
            if not up.wait(15):
                raise SystemExit("a client did not connect (signaling is TCP: no loss there)")
        pub = otsession.Publisher("loss", width=320, height=240, fps=30, audio_source=AudioSource.TONE)
        pub_s.publish(pub)
        if not ready.wait(15):
            raise SystemExit("the stream did not reach the subscriber")
        result = {"first_frames_ms": [], "connected": 0, "errors": [], "events": []}
        for r in range(rounds + 1):
            v = Viewer(streams[0])
            start = time.monotonic()
            sub_s.subscribe(v)
            got = v.first.wait(10)
            result["connected"] += v.connected.is_set()
            result["first_frames_ms"].append(round((v.first_at - start) * 1000) if got and v.first_at else None)
            if r == rounds:  # the last subscription stays for the frame count
                time.sleep(seconds)
                with v.lock:
                    nums = list(v.numbers)
                result["rendered"] = len(nums)
                result["counter_span"] = (max(nums) - min(nums) + 1) if nums else 0
            result["errors"] += v.errors
            result["events"] += v.events
            v.close()
            time.sleep(0.2)
        print(json.dumps(result), flush=True)
        pub.close()
        pub_s.close()
        sub_s.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
