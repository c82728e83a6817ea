"""Headless Chromium with otsession.js (served by the server under test at /js/otsession.js) in real sessions of the
embedded server (the Python package's `otsession.Server`: signaling and the media router), with native clients of
the Python package on the other side. Routed and relayed:

- media both ways: the page subscribes to the native test pattern and a 440 Hz tone and republishes the picture it
  decodes with its fake microphone (a 660 Hz tone); the native side reads the test pattern's stamps back in order from
  the browser's stream (native → browser → native) and finds 660 Hz in its audio; the page counts decoded frames
  of the right size and finds 440 Hz with WebAudio; signals go both ways;
- VP9 both ways (the page's preferredVideoCodecs, relayed too); a relayed page whose answer lists VP9 only (munged)
  still reaches a native subscriber, whatever codec Chromium sends;
- a page publishing in a relayed session refuses, naming its codec, a native subscriber whose offer lists none of its
  preferred codecs, as a native publisher does;
- a viewer page (no camera permission: Chromium signals mDNS `.local` host candidates) receives the native stream;
- a page publishing into the router answers the uplink's RTCP XR RRTRs with DLRRs: the router measures its round trip;
- a moderator's forceMuteStream mutes the browser's publisher; the browser as moderator mutes and disconnects;
- the page survives a cut of its signaling connection (a TCP proxy resets it): sessionReconnecting,
  sessionReconnected, signals and media flow again.

One browser serves every test (conftest's `chromium`); each test has its own server, hence its own page origin."""
import array
import contextlib
import json
import os
import queue
import sys
import threading
import time

import pytest

import otsession
from browser import BROWSER_TONE_HZ, SITE_NAME, Page, PageError, TCPProxy, region_spread

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "tests"))
from session_recorder import SubscriberRecorder, router_stats, wait_until  # noqa: E402

NATIVE_TONE_HZ = 440
W, H = 320, 240


class Native(otsession.Session):
    """A native client recording what the tests look at."""

    def __init__(self, server, sid, role="publisher", data="native", **settings):
        super().__init__(server.api_key, sid, **{"server_url": server.url, **settings})
        self.created, self.signals, self.events = queue.Queue(), queue.Queue(), queue.Queue()
        connected = threading.Event()
        self.on("connected", connected.set)
        self.connect(server.token(sid, role, data=data))
        assert connected.wait(10), "the native client did not connect"

    def on_stream_created(self, stream):
        self.created.put(stream)

    def on_signal_received(self, type, data, connection):
        self.signals.put((type, data, connection.id if connection else None))

    def on_stream_has_audio_changed(self, stream, has_audio):
        self.events.put(("has_audio", stream.id, has_audio))

    def on_stream_has_video_changed(self, stream, has_video):
        self.events.put(("has_video", stream.id, has_video))

    def on_mute_forced(self, info):
        self.events.put(("mute_forced", info.active, info.stream_id))

    def on_disconnected(self):
        self.events.put(("disconnected",))

    def on_stream_destroyed(self, stream):
        self.events.put(("stream_destroyed", stream.id))

    def on_connection_destroyed(self, connection):
        self.events.put(("connection_destroyed", connection.id))

    def stream_named(self, name, timeout=15):
        end = time.time() + timeout
        while time.time() < end:
            s = self.created.get(timeout=max(0.01, end - time.time()))
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


@contextlib.contextmanager
def native_and_page(chromium, server, sid, media=True, port=None, video_codecs=None):
    """A native client publishing the test pattern (in the first of `video_codecs` it can, VP8 when None) and a 440 Hz
    tone as "native", and a page of the server (reached at `port` when given); both closed after."""
    native = Native(server, sid)
    pub = native.publisher = otsession.Publisher("native", width=W, height=H, audio_source=otsession.AudioSource.TONE,
                                                 tone_hz=NATIVE_TONE_HZ, preferred_video_codecs=video_codecs)
    try:
        native.publish(pub)
        page = Page(chromium, f"http://127.0.0.1:{port or server.port}", media=media)
        try:
            yield native, page
        finally:
            page.close()
    finally:
        native.close()
        pub.close()


def test_media_and_signals_both_ways(chromium, server, mode):
    sid = server.create_session(relayed=mode == "relayed")
    with native_and_page(chromium, server, sid) as (native, page):
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

        # subscribeToVideo(false): the router (relayed: the native publisher) stops sending it; true brings it back.
        page.js(f"H.subs.get('{got['streamId']}').subscribeToVideo(false)")
        time.sleep(0.5)
        stopped = page.call("subscriberStats", got["streamId"])["video"]["framesDecoded"]
        time.sleep(1)
        assert page.call("subscriberStats", got["streamId"])["video"]["framesDecoded"] - stopped <= 1
        page.js(f"H.subs.get('{got['streamId']}').subscribeToVideo(true)")
        page.call("framesDecoded", got["streamId"], 10, stopped)
        # publishVideo(false): the others see hasVideo false.
        page.js("H.publisher.publishVideo(false)")
        assert native.expect(native.events, lambda e: e[0] == "has_video")[2] is False
        native.unsubscribe(viewer)
        viewer.close()


def test_a_page_publishing_into_the_router_answers_its_uplinks_rrtr(chromium, server):
    """The router's uplink from a publisher only receives, so no report block measures its round trip: it puts XR RRTRs
    (RFC 3611 §4.4) in its reports and Chromium answers each with a DLRR sub-block in its next one (libwebrtc does,
    without any SDP attribute); the router's stats show the round trip measured (`publisherRttMs`)."""
    sid = server.create_session()
    page = Page(chromium, f"http://127.0.0.1:{server.port}")
    try:
        page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        page.call("publish", {"name": "browser"})

        def rtts():
            return [st.get("publisherRttMs") for st in router_stats(server).get(sid, {}).get("streams", {}).values()]
        assert wait_until(lambda: rtts() and None not in rtts(), timeout=30), (rtts(), page.log())
        assert all(r >= 0 for r in rtts()), rtts()
    finally:
        page.close()


def test_vp9_from_a_native_publisher_to_the_page_and_from_the_page_to_a_native_subscriber(chromium, server, mode):
    """Both sides prefer VP9: the native publisher (preferred_video_codecs) and the page's (preferredVideoCodecs, i.e.
    RTCRtpTransceiver.setCodecPreferences with VP9 first); each side decodes what arrives (W3C codec stats): VP9, but
    for the page's stream in a relayed session (see below)."""
    sid = server.create_session(relayed=mode == "relayed")
    with native_and_page(chromium, server, sid, video_codecs=["VP9", "VP8"]) as (native, page):
        page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        got = page.call("subscribe", "native")
        stats = page.call("framesDecoded", got["streamId"], 30)
        assert (stats["video"]["frameWidth"], stats["video"]["frameHeight"]) == (W, H), stats
        assert page.call("videoCodec", got["streamId"]) == "video/VP9"

        page.call("publish", {"name": "browser", "preferredVideoCodecs": ["VP9", "VP8"]})
        viewer = Viewer(native.stream_named("browser"))
        native.subscribe(viewer)
        viewer.expect("connected", timeout=20)
        assert wait_until(lambda: len(viewer.frames) >= 30, timeout=20), (len(viewer.frames), page.log())
        sent = page.call("videoCodec", "publisher")
        report = json.loads(viewer.rtc_stats_report())
        inbound = next(o for o in report if o["type"] == "inbound-rtp" and o["kind"] == "video")
        assert next(o["mimeType"] for o in report if o["id"] == inbound["codecId"]) == sent, report
        assert inbound["framesDecoded"] >= 30, inbound
        # Routed, the router takes the page's first preference. Relayed, the page answers the native subscriber's
        # offer (VP8 first) and picks its send codec itself (RTCRtpEncodingParameters.codec), as a native publisher does.
        assert sent == "video/VP9"
        native.unsubscribe(viewer)
        viewer.close()


# Keeps only VP9 (and its RTX) in the video section of the answers the page makes, as a page whose browser had no other
# codec in common would answer.
VP9_ONLY_ANSWERS = r"""(() => {
  const set = RTCPeerConnection.prototype.setLocalDescription;
  RTCPeerConnection.prototype.setLocalDescription = function (d) {
    if (!d || d.type !== "answer") return set.call(this, d);
    const out = [];
    let video = false, keep = new Set();
    for (const line of d.sdp.split("\r\n")) {
      if (line.startsWith("m=")) video = line.startsWith("m=video");
      if (!video) { out.push(line); continue; }
      if (line.startsWith("m=video")) {
        keep = new Set([...d.sdp.matchAll(/a=rtpmap:(\d+) VP9\//g)].map((x) => x[1]));
        for (const x of d.sdp.matchAll(/a=fmtp:(\d+) apt=(\d+)/g)) if (keep.has(x[2])) keep.add(x[1]);
        const f = line.split(" ");
        out.push([...f.slice(0, 3), ...f.slice(3).filter((pt) => keep.has(pt))].join(" "));
        continue;
      }
      const pt = /^a=(?:rtpmap|fmtp|rtcp-fb):(\d+)/.exec(line);
      if (!pt || keep.has(pt[1])) out.push(line);
    }
    window.answeredVideo = out.filter((l) => l.startsWith("m=video"))[0] || null;
    return set.call(this, { type: "answer", sdp: out.join("\r\n") });
  };
  return true;
})()"""


def test_a_relayed_page_whose_answer_lists_vp9_only_reaches_a_native_subscriber(chromium, server):
    """The page answers a native subscriber's offer (VP8 first, then VP9) with VP9 only (its answer munged), and
    Chromium sends what it chooses, the offer's first codec (VP8, which the answer does not list) or VP9: the native
    subscriber, which offered both, decodes that codec, as it reports (W3C codec stats)."""
    sid = server.create_session(relayed=True)
    with native_and_page(chromium, server, sid) as (native, page):
        page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        assert page.js(VP9_ONLY_ANSWERS)
        page.call("publish", {"name": "browser"})
        viewer = Viewer(native.stream_named("browser"))
        native.subscribe(viewer)
        viewer.expect("connected", timeout=20)
        assert wait_until(lambda: len(viewer.frames) >= 30, timeout=20), (len(viewer.frames), viewer.stats, page.log())
        answered = page.js("window.answeredVideo")
        assert answered and answered.split(" ")[3:] and "96" not in answered.split(" ")[3:], answered
        sent = page.call("videoCodec", "publisher")
        report = json.loads(viewer.rtc_stats_report())
        inbound = next(o for o in report if o["type"] == "inbound-rtp" and o["kind"] == "video")
        assert next(o["mimeType"] for o in report if o["id"] == inbound["codecId"]) == sent, report
        assert inbound["framesDecoded"] >= 30, inbound
        native.unsubscribe(viewer)
        viewer.close()


def test_a_relayed_page_publisher_refuses_a_subscriber_without_its_codec(chromium, server):
    """A page publishing H.264 only (preferredVideoCodecs) in a relayed session answers each subscriber's offer itself:
    a native subscriber, which offers VP8 and VP9, is refused with the codec named, as a native publisher and the media
    router refuse it (`mediaClose` reason `refused`, error 1011), instead of connecting to a stream without video. A
    native subscriber reports a refusal of its first connection as error 1600 with the reason."""
    sid = server.create_session(relayed=True)
    with native_and_page(chromium, server, sid) as (native, page):
        page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        page.call("publish", {"name": "browser", "preferredVideoCodecs": ["H264"]})
        viewer = Viewer(native.stream_named("browser"))
        native.subscribe(viewer)
        first = viewer.events.get(timeout=20)  # the subscriber's first event: no connection before the error
        assert first[0] == "error", first
        code, message = first[1]
        assert code == otsession.ErrorCode.SUBSCRIBER_WEBRTC == 1600, first
        assert message == "the stream's video is H264, which the subscriber's offer does not list", first
        assert not viewer.frames, len(viewer.frames)
        viewer.close()


def test_a_viewer_page_without_camera_signals_mdns_candidates_and_receives(chromium, server, mode):
    """No camera permission on this origin: Chromium hides its addresses behind mDNS names, as for a real viewer."""
    sid = server.create_session(relayed=mode == "relayed")
    with native_and_page(chromium, server, sid, media=False) as (native, page):
        me = page.call("connect", server.api_key, sid, server.token(sid, "subscriber", data="viewer"))
        assert me["role"] == "subscriber" and me["capabilities"]["publish"] == 0
        got = page.call("subscribe", "native")
        stats = page.call("framesDecoded", got["streamId"], 30)
        assert (stats["video"]["frameWidth"], stats["video"]["frameHeight"]) == (W, H), stats
        hosts = [c.split()[4] for c in page.js("H.localCandidates()") if " typ host" in c]
        assert hosts and all(h.endswith(".local") for h in hosts), hosts


def test_a_moderator_force_mutes_the_browsers_publisher(chromium, server, mode):
    sid = server.create_session(relayed=mode == "relayed")
    page = Page(chromium, f"http://127.0.0.1:{server.port}")
    moderator = Native(server, sid, role="moderator", data="moderator")
    try:
        page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        page.call("publish", {"name": "browser", "resolution": f"{W}x{H}", "disableAudioProcessing": True})
        stream = moderator.stream_named("browser")
        viewer = Viewer(stream)
        moderator.subscribe(viewer)
        viewer.expect("connected", timeout=20)
        assert wait_until(lambda: len(viewer.pcm) >= 100 and len(viewer.frames) >= 30, timeout=20)
        assert {(w, h) for w, h, _ in viewer.frames} == {(W, H)}  # the browser's camera at the size it asked for
        loud = rms(b"".join(viewer.pcm[50:]))
        assert loud > 300 and abs(tone_hz(b"".join(viewer.pcm[50:]), viewer.rate) - BROWSER_TONE_HZ) < 25, loud

        moderator.force_mute_stream(stream.id)
        assert moderator.expect(moderator.events, lambda e: e[0] == "has_audio") == ("has_audio", stream.id, False)
        assert wait_until(lambda: page.js("H.eventsOf('publisher:muteForced').length") == 1)
        forced = page.js("H.eventsOf('muteForced')")
        assert [(e["active"], e["streamId"]) for e in forced] == [(True, stream.id)], forced
        assert page.js("[H.publisher.isPublishingAudio, H.publisher.stream.hasAudio]") == [False, False]
        n = len(viewer.pcm)
        assert wait_until(lambda: len(viewer.pcm) >= n + 100, timeout=20)
        quiet = rms(b"".join(viewer.pcm[n + 50:]))
        assert quiet < loud / 20, (loud, quiet)

        # The page unmutes; then a mute all (nothing excluded) mutes it again.
        page.js("H.publisher.publishAudio(true)")
        assert moderator.expect(moderator.events, lambda e: e[0] == "has_audio") == ("has_audio", stream.id, True)
        moderator.force_mute_all()
        assert wait_until(lambda: page.js("H.eventsOf('publisher:muteForced').length") == 2)
        assert page.js("[H.publisher.isPublishingAudio, H.session.muteForced]") == [False, True]
        moderator.disable_force_mute()
        assert wait_until(lambda: page.js("H.session.muteForced") is False)
        moderator.unsubscribe(viewer)
        viewer.close()
    finally:
        page.close()
        moderator.close()


def test_the_browser_as_moderator_and_its_errors(chromium, server):
    sid = server.create_session()
    with native_and_page(chromium, server, sid, media=False) as (native, page), \
            contextlib.closing(Native(server, sid, data="other")) as other:
        muted = threading.Event()
        native.publisher.on("mute_forced", lambda active: active and muted.set())
        with pytest.raises(PageError) as e:
            page.call("connect", server.api_key, sid, server.token(sid, "moderator") + "x")
        assert e.value.code == 1004
        me = page.call("connect", server.api_key, sid, server.token(sid, "moderator", data="browser moderator"))
        assert me["capabilities"]["forceMute"] == 1 and me["capabilities"]["forceDisconnect"] == 1
        for bad, code in (("no spaces", 1461), ("x" * 129, 1414)):
            with pytest.raises(PageError) as e:
                page.call("signal", bad, "data")
            assert e.value.code == code
        with pytest.raises(PageError) as e:
            page.call("signal", "big", "x" * 8193)
        assert e.value.code == 1413

        page.call("moderate", "forceMuteStream", "native")
        assert muted.wait(10), "the native publisher was not told"
        assert native.expect(native.events, lambda e: e[0] == "mute_forced") == ("mute_forced", True, next(s.id for s in native.streams.values() if s.own))
        assert wait_until(lambda: page.js("H.eventsOf('streamPropertyChanged').some((e) => e.changedProperty === 'hasAudio' && e.newValue === false)"))

        other_id = other.connection.id
        page.call("moderate", "forceDisconnect", other_id)
        assert other.expect(other.events, lambda e: e[0] == "disconnected")
        gone = [other_id, "forceDisconnected"]
        assert wait_until(lambda: page.js("H.eventsOf('connectionDestroyed').map((e) => [e.connection, e.reason])") == [gone])

        page.call("moderate", "forceMuteAll")
        assert native.expect(native.events, lambda e: e[0] == "mute_forced") == ("mute_forced", True, None)
        page.call("moderate", "disableForceMute")
        assert native.expect(native.events, lambda e: e[0] == "mute_forced") == ("mute_forced", False, None)
        assert [e["active"] for e in page.js("H.eventsOf('muteForced')")] == [True, True, False]


def test_the_browser_resumes_after_its_signaling_connection_is_cut(chromium, server, mode):
    sid = server.create_session(relayed=mode == "relayed")
    proxy = TCPProxy(server.port)
    # The page comes through the proxy, so otsession.js (whose server is where it came from) signals through it too.
    with contextlib.closing(proxy), native_and_page(chromium, server, sid, port=proxy.port) as (native, page):
        me = page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        got = page.call("subscribe", "native")
        page.call("framesDecoded", got["streamId"], 10)
        page.call("publish", {"name": "browser", "resolution": f"{W}x{H}"})
        viewer = Viewer(native.stream_named("browser"))
        native.subscribe(viewer)
        viewer.expect("connected", timeout=20)

        assert proxy.cut(hold=True) >= 1
        assert wait_until(lambda: page.js("H.session.isReconnecting"), timeout=10)
        assert page.call("signalLater", "queued", "sent while reconnecting", native.connection.id) is True
        proxy.release()
        assert page.call("sentResult") == "sent"
        assert native.expect(native.signals, lambda s: s[0] == "queued")[1] == "sent while reconnecting"
        kinds = [e["type"] for e in page.js("H.events") if e["type"].startswith("session")]
        assert kinds == ["sessionConnected", "sessionReconnecting", "sessionReconnected"], kinds
        assert page.js("H.session.connection.connectionId") == me["connectionId"]
        seen = []
        while not native.events.empty():
            seen.append(native.events.get())
        assert not [e for e in seen if e[0] in ("stream_destroyed", "connection_destroyed")], seen  # others saw nothing

        native.send_signal("back", "after the cut")
        assert wait_until(lambda: page.js("H.signalsFrom('signal:back').length") >= 1)
        before = page.call("subscriberStats", got["streamId"])["video"]["framesDecoded"]
        page.call("framesDecoded", got["streamId"], 30, before)
        n = len(viewer.frames)
        assert wait_until(lambda: len(viewer.frames) >= n + 30), "the browser's stream stopped"
        viewer.close()


def test_the_browser_notices_a_silent_connection_and_resumes(chromium, server):
    """A page cannot see WebSocket pings: it sends a `ping` request after an interval without messages and counts a
    connection silent for three intervals as dropped. A proxy black-holes the connection (nothing passes, nothing
    closes): the page resumes on a new one."""
    sid = server.create_session()
    proxy = TCPProxy(server.port)
    with contextlib.closing(proxy), native_and_page(chromium, server, sid, media=False, port=proxy.port) as (native, page):
        page.call("connect", server.api_key, sid, server.token(sid, "subscriber", data="browser"), {"pingInterval": 500})
        time.sleep(2.5)  # idle but alive: the server answers the page's pings
        assert page.js("H.eventsOf('sessionReconnecting').length") == 0
        assert proxy.freeze() >= 1
        assert wait_until(lambda: page.js("H.eventsOf('sessionReconnected').length") == 1, timeout=15), page.log()
        native.send_signal("back", "after the silence")
        assert wait_until(lambda: page.js("H.signalsFrom('signal:back').length") >= 1)


def test_the_demo_web_page(chromium, ot_demo, tmp_path):
    """`ot-demo --web` prints a URL of its embedded server's /demo page; opened in Chromium, the page shows the demo's
    test pattern and its own camera (a screenshot's video areas are not blank), the browser's stream reaches the
    demo's status lines, and the page's signal box reaches the demo. Ctrl-C ends the demo, which still passes."""
    import re
    import signal
    import subprocess

    demo = subprocess.Popen([ot_demo, "--web", "--resolution", f"{W}x{H}", "--fps", "15", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, url = queue.Queue(), None
    threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in demo.stdout], daemon=True).start()
    seen = []

    def until(pattern, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            try:
                line = lines.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                break
            seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError(f"ot-demo never printed /{pattern}/:\n" + "\n".join(seen))

    try:
        url = until(r"^web page: (http://\S+/demo#\S+)$").group(1)
        page = Page(chromium, re.match(r"http://[^/]+", url).group(0), path=url[url.index("/demo"):])
        m = until(r'^  browser "browser": video [\d.]+ fps (\d+)x(\d+) .*, (\d+) frames decoded', timeout=30)
        while int(m.group(3)) < 30:
            m = until(r'^  browser "browser": video [\d.]+ fps (\d+)x(\d+) .*, (\d+) frames decoded')
        # Chromium's publisher may scale down under CPU overuse (degradationPreference "balanced"; seen at load 5+ on
        # two cores: 480x360), never up or to another shape.
        w, h = int(m.group(1)), int(m.group(2))
        assert w <= 640 and w * 3 == h * 4, m.group(0)

        assert wait_until(lambda: page.js("[...demo.subscribers.values()].length === 1 && "
                                          "[...document.querySelectorAll('video')].every((v) => v.videoWidth > 0)")), page.log()
        time.sleep(1)  # a few more frames on screen
        rects = page.js("[...document.querySelectorAll('video')].map((v) => { const r = v.getBoundingClientRect();"
                        " return { x: r.x, y: r.y, width: r.width, height: r.height }; })")
        assert len(rects) == 2, rects  # the page's own camera and the demo's stream
        png = chromium.get_screenshot_as_png()
        (tmp_path / "page.png").write_bytes(png)
        scale = page.js("window.devicePixelRatio")
        spreads = [region_spread(png, r, scale) for r in rects]
        assert all(s > 8 for s in spreads), (spreads, rects)

        from selenium.webdriver.common.by import By
        chromium.find_element(By.ID, "signal-text").send_keys("hello demo")
        chromium.find_element(By.CSS_SELECTOR, "#signal-form button").click()
        until(r'^signal "chat" from browser: hello demo$')
        demo.send_signal(signal.SIGINT)
        until(r"^  browser streams received: 1$")
        until(r'^  browser "browser": (\d+) frames decoded \((\d+)x(\d+)\)')
        assert demo.wait(timeout=30) == 0, "\n".join(seen)
    finally:
        chromium.get("about:blank")
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def test_end_to_end_encrypted_sessions_refuse_browser_media_clearly(chromium, server):
    """otsession.js cannot apply the E2EE frame transform: publish and subscribe fail with 1031, signals still work."""
    sid = server.create_session(e2ee=True)
    native = Native(server, sid)
    page = Page(chromium, f"http://127.0.0.1:{server.port}")
    try:
        page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
        with pytest.raises(PageError) as e:
            page.call("publish", {"name": "browser", "resolution": f"{W}x{H}"})
        assert e.value.code == 1031
        page.call("signal", "hello", "still signals", native.connection.id)
        assert native.expect(native.signals, lambda s: s[0] == "hello")[1] == "still signals"
    finally:
        page.close()
        native.close()


def test_a_roster_too_large_for_one_message_reaches_the_page_whole(chromium, server):
    """80 connections with 4 KB of data each make a roster over the 256 KiB a message may carry: the server sends it
    in parts (`connected` with rosterFollows, then `roster` messages) and the page reports every connection."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from wsclient import SignalingClient
    sid = server.create_session()
    data = "\U0001F600" * 1000  # 1000 characters, 4 bytes each in UTF-8
    others = []
    try:
        for _ in range(80):
            c = SignalingClient(server.port)
            others.append(c)
            assert c.connect(server.api_key, sid, server.token(sid, "subscriber", data=data))["type"] == "connected"
        with contextlib.closing(Page(chromium, f"http://127.0.0.1:{server.port}", media=False)) as page:
            page.call("connect", server.api_key, sid, server.token(sid, "subscriber", data="browser"))
            assert wait_until(lambda: page.js("H.eventsOf('connectionCreated').length") == 81)
            assert page.js("H.session.connections.filter((c) => c.data.length === 2000).length") == 80  # UTF-16 units
    finally:
        for c in others:
            c.close()


def test_a_page_served_over_https_publishes_and_subscribes_through_wss(chromium, test_ca):
    # The embedded server with a certificate of the run's CA (which the browser trusts as an installed CA) for a
    # site name: the page is a secure context because it came over https, its otsession.js signals over wss:// to
    # the same origin (the port answers plain HTTP with 400), and media goes both ways with a native wss:// client.
    cert, key = test_ca.issue([SITE_NAME, "localhost"], label="browser-site")
    with otsession.Server(api_key="4711", api_secret="ab" * 20, tls_cert=cert, tls_key=key) as server:
        sid = server.create_session()
        native = Native(server, sid, server_url=f"wss://localhost:{server.port}", tls_ca_file=test_ca.ca_file)
        pub = otsession.Publisher("native", width=W, height=H)
        page = None
        try:
            native.publish(pub)
            page = Page(chromium, f"https://{SITE_NAME}:{server.port}")
            assert page.js("[location.protocol, window.isSecureContext]") == ["https:", True]
            page.call("connect", server.api_key, sid, server.token(sid, "publisher", data="browser"))
            got = page.call("subscribe", "native")
            stats = page.call("framesDecoded", got["streamId"], 30)
            assert (stats["video"]["frameWidth"], stats["video"]["frameHeight"]) == (W, H), stats
            page.call("publish", {"name": "browser"})
            viewer = Viewer(native.stream_named("browser"))
            native.subscribe(viewer)
            viewer.expect("connected", timeout=20)
            assert wait_until(lambda: len(viewer.frames) >= 30, timeout=20), (len(viewer.frames), page.log())
            urls = page.js("performance.getEntriesByType('resource').map((e) => e.name)")
            assert f"https://{SITE_NAME}:{server.port}/js/otsession.js" in urls, urls
            native.unsubscribe(viewer)
            viewer.close()
        finally:
            if page is not None:
                page.close()
            native.close()
            pub.close()


def test_a_relay_only_page_uses_the_servers_turn_credentials(chromium):
    # coturn with use-auth-secret; the server hands its TURN URL (a host name) and this connection's credentials to
    # the page in `connected` (and to the native publisher), and a page whose only ICE setting is the relay policy
    # receives the native stream through coturn and the router.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "tests"))
    import coturn_support

    with coturn_support.coturn(auth_secret="north-wind") as turn_port, \
            otsession.Server(api_key="4711", api_secret="ab" * 20, ice_servers=[f"turn:localhost:{turn_port}?transport=udp"],
                             turn_secret="north-wind") as server:
        sid = server.create_session()
        with native_and_page(chromium, server, sid, media=False) as (native, page):
            page.call("connect", server.api_key, sid, server.token(sid, "subscriber"), {"iceConfig": {"transportPolicy": "relay"}})
            got = page.call("subscribe", "native")
            page.call("framesDecoded", got["streamId"], 20)
            local = page.call("selectedLocalCandidate", got["streamId"])
            assert local and local["candidateType"] == "relay", local
