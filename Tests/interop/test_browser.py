"""Headless Chromium with otsession.js (served by the server under test at /js/otsession.js) in real sessions of the
embedded server (the Python package's `otsession.Server`: signaling and the media router), with native clients of
the Python package on the other side. Routed and relayed:

- media both ways: the page subscribes to the native test pattern and a 440 Hz tone and republishes the picture it
  decodes with its fake microphone (a 660 Hz tone); the native side reads the test pattern's stamps back in order from
  the browser's stream (native → browser → native) and finds 660 Hz in its audio; the page counts decoded frames
  of the right size and finds 440 Hz with WebAudio; signals go both ways;
- a viewer page (no camera permission: Chromium signals mDNS `.local` host candidates) receives the native stream;
- a moderator's forceMuteStream mutes the browser's publisher; the browser as moderator mutes and disconnects;
- the page survives a cut of its signaling connection (a TCP proxy resets it): sessionReconnecting,
  sessionReconnected, signals and media flow again.

One browser serves every test (conftest's `chromium`); each test has its own server, hence its own page origin."""
import array
import os
import queue
import sys
import threading
import time

import pytest

import otsession
from browser import BROWSER_TONE_HZ, Page, PageError, TCPProxy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "tests"))
from session_recorder import SubscriberRecorder, wait_until  # noqa: E402

NATIVE_TONE_HZ = 440
W, H = 320, 240


class Native(otsession.Session):
    """A native client recording what the tests look at."""

    def __init__(self, server, sid, role="publisher", data="native"):
        super().__init__(server.api_key, sid, server_url=server.url)
        self.streams, self.signals, self.events = queue.Queue(), queue.Queue(), queue.Queue()
        connected = threading.Event()
        self.on("connected", connected.set)
        self.connect(server.token(sid, role, data=data))
        assert connected.wait(10), "the native client did not connect"

    def on_stream_created(self, stream):
        self.streams.put(stream)

    def on_signal_received(self, type, data, connection):
        self.signals.put((type, data, connection.id if connection else None))

    def on_stream_has_audio_changed(self, stream, has_audio):
        self.events.put(("has_audio", stream.id, has_audio))

    def on_mute_forced(self, active):
        self.events.put(("mute_forced", active))

    def on_disconnected(self):
        self.events.put(("disconnected",))

    def stream_named(self, name, timeout=15):
        end = time.time() + timeout
        while time.time() < end:
            s = self.streams.get(timeout=max(0.01, end - time.time()))
            if s.name == name:
                return s
        raise AssertionError(f"no stream {name}")

    def expect(self, q, match, timeout=15):
        end = time.time() + timeout
        while True:
            item = q.get(timeout=max(0.01, end - time.time()))
            if match(item):
                return item


class Viewer(SubscriberRecorder):
    """A native subscriber keeping frame sizes, test-pattern stamps and PCM."""

    def __init__(self, stream):
        super().__init__(stream)
        self.pcm, self.rate = [], 48000

    def on_render_frame(self, frame):
        self.frames.append((frame.width, frame.height, frame.test_pattern[0] if frame.test_pattern else None))

    def on_audio_data(self, pcm, rate, channels):
        self.rate = rate
        self.pcm.append(pcm if channels == 1 else array.array("h", pcm)[::channels].tobytes())


def tone_hz(pcm, rate):
    """The pitch of a tone: rising crossings with hysteresis (a third of the RMS), so that codec noise around zero
    does not count; 0 for silence."""
    s = array.array("h", pcm)
    t = max(50.0, rms(pcm) / 3)
    rising, low = [], False
    for i, x in enumerate(s):
        if x < -t:
            low = True
        elif x > t and low:
            low = False
            rising.append(i)
    return (len(rising) - 1) * rate / (rising[-1] - rising[0]) if len(rising) > 10 else 0.0


def rms(pcm):
    s = array.array("h", pcm)
    return (sum(x * x for x in s) / max(1, len(s))) ** 0.5


@pytest.fixture(params=["routed", "relayed"])
def mode(request):
    return request.param


@pytest.fixture
def server():
    with otsession.Server(api_key="4711", api_secret="ab" * 20) as s:
        yield s


def native_publisher(server, sid, name="native"):
    """A native client publishing the test pattern and a 440 Hz tone."""
    n = Native(server, sid)
    pub = otsession.Publisher(name, width=W, height=H, audio_source=otsession.AudioSource.TONE, tone_hz=NATIVE_TONE_HZ)
    n.publish(pub)
    return n, pub


def test_media_and_signals_both_ways(chromium, server, mode):
    sid = server.create_session(relayed=mode == "relayed")
    native, pub = native_publisher(server, sid)
    page = Page(chromium, f"http://127.0.0.1:{server.port}")
    try:
        me = page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        got = page.call("subscribe", "native")
        stats = page.call("framesDecoded", got["streamId"], 30)
        assert (stats["video"]["frameWidth"], stats["video"]["frameHeight"]) == (W, H), stats
        tone = page.call("toneHz", got["streamId"])
        assert abs(tone["hz"] - NATIVE_TONE_HZ) < 10, tone

        # The page republishes the picture it decodes, with its fake microphone's tone. (While the page plays
        # received audio, Chromium's fake microphone is silent: the page stops playing it first.)
        page.js("H.subs.forEach((s) => { s.videoElement.muted = true; })")
        page.call("publish", {"name": "browser", "videoSource": "stream:native", "disableAudioProcessing": True})
        viewer = Viewer(native.stream_named("browser"))
        native.subscribe(viewer)
        viewer.expect("connected", timeout=20)
        assert wait_until(lambda: len(viewer.frames) >= 45 and len(viewer.pcm) >= 150, timeout=20), \
            (len(viewer.frames), len(viewer.pcm), page.log())
        sizes = {(w, h) for w, h, _ in viewer.frames}
        assert sizes == {(W, H)}, sizes
        stamps = [n for _, _, n in viewer.frames if n is not None]
        assert len(stamps) >= 20, f"{len(stamps)} of {len(viewer.frames)} frames carried a readable stamp"
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), stamps
        hz = tone_hz(b"".join(viewer.pcm[50:]), viewer.rate)
        assert abs(hz - BROWSER_TONE_HZ) < 25, hz

        # Signals: page → native (to one connection), native → everyone.
        page.call("signal", "hello", "from the browser", native.connection.id)
        assert native.expect(native.signals, lambda s: s[0] == "hello") == ("hello", "from the browser", me["connectionId"])
        native.send_signal("typed", "from native")
        assert wait_until(lambda: page.js("H.signalsFrom('signal:typed').length") >= 2), page.js("H.signals")
        typed = page.js("H.signals.filter((s) => s.data === 'from native')")
        assert {s.get("handler", "signal") for s in typed} == {"signal", "signal:typed"}, typed
        assert all(s["type"] == "signal:typed" and s["from"] == native.connection.id for s in typed), typed
        native.unsubscribe(viewer)
        viewer.close()
    finally:
        page.close()
        native.close()
        pub.close()
