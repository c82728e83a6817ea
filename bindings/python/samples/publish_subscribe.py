"""Publishes the test pattern and a tone from one client and subscribes from another,
through an embedded server on loopback; prints what arrives.

    python3 publish_subscribe.py [seconds] [routed|relayed]
"""
import sys
import threading
import time

import otsession


def main() -> int:
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    relayed = len(sys.argv) > 2 and sys.argv[2] == "relayed"
    received = {"frames": 0, "audio": 0, "last": None}
    lock = threading.Lock()

    with otsession.Server(api_key="4700003", api_secret="ab" * 20) as server:
        sid = server.create_session(relayed=relayed)
        viewer = otsession.Session(server.api_key, sid, server_url=server.url)
        camera = otsession.Session(server.api_key, sid, server_url=server.url)
        subscribers = []

        def on_frame(frame):
            with lock:
                received["frames"] += 1
                received["last"] = frame

        def on_audio(pcm, rate, channels):
            with lock:
                received["audio"] += 1

        def on_stream(stream):
            print(f"stream {stream.id} \"{stream.name}\" appeared; subscribing")
            sub = otsession.Subscriber(stream)
            sub.on("render_frame", on_frame)
            sub.on("audio_data", on_audio)
            viewer.subscribe(sub)
            subscribers.append(sub)

        viewer.on("stream_created", on_stream)
        for session, role in ((viewer, "subscriber"), (camera, "publisher")):
            connected = threading.Event()
            session.on("connected", connected.set)
            session.connect(server.token(sid, role))
            if not connected.wait(10):
                print("could not connect", file=sys.stderr)
                return 1

        publisher = otsession.Publisher("python camera", width=320, height=240,
                                        audio_source=otsession.AudioSource.TONE, tone_hz=440)
        camera.publish(publisher)
        for t in range(seconds):
            time.sleep(1)
            with lock:
                f = received["last"]
                stamp = f.test_pattern if f else None
                latency = (otsession.monotonic_us() - stamp[1]) / 1000 if stamp else float("nan")
                print(f"t={t + 1}s frames={received['frames']} audio chunks={received['audio']} "
                      f"last frame #{stamp[0] if stamp else '-'} latency={latency:.1f} ms")
        ok = received["frames"] > 0 and received["audio"] > 0
        for s in subscribers:
            s.close()
        publisher.close()
        viewer.close()
        camera.close()
    print("ok" if ok else "FAILED: nothing received")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
