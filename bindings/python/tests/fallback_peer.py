"""One side of the routed network tests (test_audio_fallback_netns.py), run in its own network namespace.

  fallback_peer.py server HOST FALLBACK   embedded server on HOST, a routed session and a publisher (FALLBACK: 1 or 0
                                          for audio_fallback_enabled); prints {"url", "api_key", "sid", "token"}, then
                                          runs until stdin closes.
  fallback_peer.py subscriber URL API_KEY SID TOKEN
                                          subscribes to the first stream; prints one JSON line per event (connected,
                                          video_disable_warning, video_disable_warning_lifted, video_disabled,
                                          video_enabled, disconnected, reconnected, and "media" progress each
                                          second), until stdin closes.
"""
import json
import sys
import threading
import time

import otsession
from otsession import AudioSource, Role


def emit(**kv):
    print(json.dumps(kv), flush=True)


def run_server(host: str, fallback: bool) -> None:
    with otsession.Server(api_key="4242", api_secret="ab" * 20, host=host) as server:
        sid = server.create_session(relayed=False)
        pub_s = otsession.Session(server.api_key, sid, server_url=server.url)
        connected = threading.Event()
        pub_s.on("connected", connected.set)
        pub_s.connect(server.token(sid, Role.PUBLISHER))
        if not connected.wait(15):
            raise SystemExit("publisher did not connect")
        pub = otsession.Publisher("fallback", width=320, height=240, fps=15, audio_source=AudioSource.TONE,
                                  audio_fallback_enabled=fallback)
        created = threading.Event()
        pub.on("stream_created", lambda s: created.set())
        pub_s.publish(pub)
        if not created.wait(15):
            raise SystemExit("stream not created")
        emit(url=server.url, api_key=server.api_key, sid=sid, token=server.token(sid, Role.SUBSCRIBER))
        sys.stdin.read()
        pub.close()
        pub_s.close()


class Viewer(otsession.Subscriber):
    def __init__(self, stream):
        super().__init__(stream)
        self.frames = self.audio = 0

    def on_connected(self, stream):
        emit(event="connected", audio_fallback_enabled=stream.audio_fallback_enabled)

    def on_render_frame(self, frame):
        self.frames += 1

    def on_audio_data(self, pcm, rate, channels):
        self.audio += 1

    def on_video_disable_warning(self):
        emit(event="video_disable_warning")

    def on_video_disable_warning_lifted(self):
        emit(event="video_disable_warning_lifted")

    def on_video_disabled(self, reason):
        emit(event="video_disabled", reason=int(reason))

    def on_video_enabled(self, reason):
        emit(event="video_enabled", reason=int(reason))

    def on_disconnected(self):
        emit(event="disconnected")

    def on_reconnected(self):
        emit(event="reconnected")


def run_subscriber(url: str, api_key: str, sid: str, token: str) -> None:
    s = otsession.Session(api_key, sid, server_url=url)
    streams = []
    got = threading.Event()
    s.on("stream_created", lambda st: (streams.append(st), got.set()))
    s.connect(token)
    if not got.wait(15):
        raise SystemExit("no stream")
    viewer = Viewer(streams[0])
    s.subscribe(viewer)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    while not done.wait(1):
        emit(event="media", frames=viewer.frames, audio=viewer.audio)
    viewer.close()
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        run_server(sys.argv[2], sys.argv[3] == "1")
    else:
        run_subscriber(*sys.argv[2:6])
