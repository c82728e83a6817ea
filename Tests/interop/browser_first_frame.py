"""Subscribe → first frame with headless Chromium (otsession.js) through the media router, both directions, beside
the native → native figure of the same run (the baseline). docs/benchmarks.md, "Browsers".

    OTSESSION_LIBRARY=dist/lib/libotsession.so PYTHONPATH=bindings/python \\
        python3 Tests/interop/browser_first_frame.py [--rounds 7] [--relayed]

One session of the embedded server (`otsession.Server`): a native client publishes the test pattern (640x480,
30 fps) and a tone, the page publishes Chromium's fake camera (640x480) and microphone. Each round, in turn:
- native → browser: the page calls `session.subscribe` and waits for the first frame its video element presents
  (requestVideoFrameCallback), then unsubscribes;
- browser → native: a native client subscribes to the page's stream; time to its first rendered frame;
- native → native: the same native client subscribes to the native stream.
Prints each round and the median and range per direction; exits 1 if any subscribe got no frame."""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import otsession  # noqa: E402
from browser import Page, launch  # noqa: E402


class FirstFrame(otsession.Subscriber):
    def __init__(self, stream):
        super().__init__(stream)
        self.first = threading.Event()
        self.at = None

    def on_render_frame(self, frame):
        if self.at is None:
            self.at = time.monotonic()
            self.first.set()


def native_first_frame(session, stream):
    sub = FirstFrame(stream)
    t0 = time.monotonic()
    session.subscribe(sub)
    ok = sub.first.wait(15)
    ms = (sub.at - t0) * 1000 if ok else None
    session.unsubscribe(sub)
    sub.close()
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--relayed", action="store_true", help="a relayed session instead (no router)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ot-browser-bench-")
    driver = launch(work)
    results = {"native → browser": [], "browser → native": [], "native → native": []}
    try:
        with otsession.Server(api_key="4711", api_secret="ab" * 20) as server:
            sid = server.create_session(relayed=args.relayed)
            streams = {}
            got = threading.Condition()

            def stream_created(stream):
                with got:
                    streams[stream.name] = stream
                    got.notify_all()

            pub_s = otsession.Session(server.api_key, sid, server_url=server.url)
            sub_s = otsession.Session(server.api_key, sid, server_url=server.url)
            sub_s.on("stream_created", stream_created)
            for s in (pub_s, sub_s):
                ready = threading.Event()
                s.on("connected", ready.set)
                s.connect(server.token(sid))
                assert ready.wait(10), "a native client did not connect"
            pub = otsession.Publisher("native", width=640, height=480, fps=30, audio_source=otsession.AudioSource.TONE)
            pub_s.publish(pub)
            page = Page(driver, f"http://127.0.0.1:{server.port}")
            page.call("connect", server.api_key, sid, server.token(sid, data="browser"))
            page.call("publish", {"name": "browser", "resolution": "640x480"})
            with got:
                assert got.wait_for(lambda: {"native", "browser"} <= streams.keys(), 15), "streams missing"
            native_id = page.js("[...H.streams.values()].find((s) => s.name === 'native').streamId")
            for r in range(args.rounds):
                got_sub = page.call("subscribe", "native")
                a = page.call("firstFrameMs", got_sub["streamId"])
                page.js(f"H.session.unsubscribe(H.subs.get('{native_id}'))")
                b = native_first_frame(sub_s, streams["browser"])
                c = native_first_frame(sub_s, streams["native"])
                for k, v in zip(results, (a, b, c)):
                    results[k].append(v)
                print(f"round {r + 1}: native → browser {a:.0f} ms, browser → native "
                      f"{'none' if b is None else f'{b:.0f} ms'}, native → native {'none' if c is None else f'{c:.0f} ms'}",
                      flush=True)
                time.sleep(0.3)
            page.close()
            for s in (pub_s, sub_s):
                s.close()
            pub.close()
    finally:
        driver.quit()
    mode = "relayed" if args.relayed else "routed"
    print(f"\n{mode}, subscribe → first frame, median of {args.rounds} (range), load average {os.getloadavg()[0]:.1f}:")
    failed = False
    for k, v in results.items():
        ok = [x for x in v if x is not None]
        failed |= len(ok) < len(v)
        if ok:
            print(f"  {k}: {statistics.median(ok):.0f} ms ({min(ok):.0f}–{max(ok):.0f}){'' if len(ok) == len(v) else f', {len(v) - len(ok)} without a frame'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
