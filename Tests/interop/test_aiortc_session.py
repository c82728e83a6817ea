"""aiortc (default settings, and max-bundle) joins real sessions of our server through the session protocol
(aiortc_session.py: WebSocket signaling, then media through the router or peer to peer) and exchanges media with
a libotsession client (the Python package), both ways, routed and relayed."""
import array
import json
import os
import queue
import subprocess
import sys
import threading

import pytest

import otsession
from otsession import AudioSource

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python", "tests"))
from session_recorder import SubscriberRecorder, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SECONDS = 5


class Viewer(SubscriberRecorder):
    def __init__(self, stream):
        super().__init__(stream)
        self.audio = []

    def on_audio_data(self, pcm, rate, channels):
        self.audio.append((pcm, rate))


def crossing_hz(pcm, rate):
    s = array.array("h", pcm)
    rising = [i for i in range(1, len(s)) if s[i - 1] < 0 <= s[i]]
    return (len(rising) - 1) * rate / (rising[-1] - rising[0]) if len(rising) > 10 else 0.0


class AiortcClient:
    """aiortc_session.py in a child process; its JSON lines are collected by a thread."""

    def __init__(self, mode, server, sid, role, policy, *options, env=None):
        token = server.token(sid, role)
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "aiortc_session.py"), mode, str(server.port),
                                      server.api_key, sid, token, policy, str(SECONDS), *options],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE,
                                     env=dict(os.environ, **(env or {})))
        self.events = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def expect(self, event, timeout=20):
        while True:
            try:
                m = self.events.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"aiortc: no {event} event; stderr:\n{''.join(self.stderr)[-3000:]}")
            if m["event"] == event:
                return m

    def srtp_profile(self, timeout=20):
        """The SRTP profile of aiortc's first connection to come up."""
        while (m := self.expect("ice", timeout))["state"] != "connected":
            pass
        return m["srtpProfile"]

    def finish(self):
        assert self.proc.wait(timeout=SECONDS + 30) == 0, "".join(self.stderr)[-3000:]


@pytest.fixture(params=["routed", "relayed"])
def session(request):
    with otsession.Server(api_key="4242", api_secret="cd" * 20) as server:
        yield server, server.create_session(relayed=request.param == "relayed")


def join(server, sid, role):
    s = otsession.Session(server.api_key, sid, server_url=server.url)
    done, streams = threading.Event(), queue.Queue()
    s.on("connected", done.set)
    s.on("stream_created", streams.put)
    s.connect(server.token(sid, role))
    assert done.wait(10), "not connected"
    return s, streams


def native_to_aiortc(server, sid, policy, *options, video_codecs=None, srtp_profile=None, env=None):
    """aiortc subscribes to our publisher and decodes its frames (and, given `srtp_profile`, agreed that profile)."""
    pub_s, _ = join(server, sid, otsession.Role.PUBLISHER)
    pub = otsession.Publisher("native", width=320, height=240, fps=30, audio_source=AudioSource.TONE, tone_hz=440,
                              preferred_video_codecs=video_codecs)
    try:
        pub_s.publish(pub)
        client = AiortcClient("subscribe", server, sid, "subscriber", policy, *options, env=env)
        if srtp_profile:
            assert client.srtp_profile() == srtp_profile
        media = client.expect("media", timeout=SECONDS + 25)
        client.finish()
        assert media["videoFrames"] >= 30, media
        assert (media["width"], media["height"]) == (320, 240)
        stamps = media["stamps"]
        assert len(stamps) >= 25 and stamps == sorted(stamps) and len(set(stamps)) == len(stamps), stamps
        assert media["audioFrames"] >= 50 and abs(media["audioHz"] - 440) < 15, media
    finally:
        pub.close()
        pub_s.close()


@pytest.mark.parametrize("policy", ["balanced", "max-bundle"])
def test_native_publisher_to_aiortc_subscriber(session, policy):
    native_to_aiortc(*session, policy)


def test_router_writes_the_extension_ids_the_subscriber_chose():
    """The issue's case: MID at id 2 and transport-cc at id 5 in the subscriber's offer (the publisher's are 1 and 2)."""
    with otsession.Server(api_key="4243", api_secret="ce" * 20) as server:
        native_to_aiortc(server, server.create_session(), "balanced", "moved-ids")


def test_aiortc_subscribes_to_a_publisher_preferring_vp9_peer_to_peer_in_vp8():
    """aiortc has no VP9 and offers VP8 (and H.264): relayed, the publisher answers with the first of its codecs the
    offer lists, VP8, and encodes that."""
    with otsession.Server(api_key="4244", api_secret="cf" * 20) as server:
        native_to_aiortc(server, server.create_session(relayed=True), "balanced", video_codecs=["VP9", "VP8"])


@pytest.mark.parametrize("mode", ["routed", "relayed"])
def test_a_subscriber_without_the_streams_codec_is_refused_naming_it(mode):
    """Routed sessions forward the publisher's codec, and a relayed publisher sends one codec to all: a subscriber whose
    offer lacks it (aiortc has no VP9) is refused with the codec named, by the router (a 1011 reply to the offer) or
    by the publisher (`mediaClose` with reason `refused`; docs/protocol.md), instead of getting a stream without video."""
    with otsession.Server(api_key="4245", api_secret="d0" * 20) as server:
        sid = server.create_session(relayed=mode == "relayed")
        pub_s, _ = join(server, sid, otsession.Role.PUBLISHER)
        pub = otsession.Publisher("native", width=320, height=240, preferred_video_codecs=["VP9"])
        try:
            pub_s.publish(pub)
            client = AiortcClient("subscribe", server, sid, "subscriber", "balanced", "refusable")
            refused = client.expect("refused", timeout=30)
            client.finish()
            assert "VP9" in refused["message"], refused
            assert ("'code': 1011" if mode == "routed" else "'reason': 'refused'") in refused["message"], refused
        finally:
            pub.close()
            pub_s.close()


def aiortc_to_native(server, sid, policy, srtp_profile=None, env=None):
    """Our subscriber decodes aiortc's stamped frames and tone (and, given `srtp_profile`, aiortc agreed that profile)."""
    sub_s, streams = join(server, sid, otsession.Role.SUBSCRIBER)
    client = AiortcClient("publish", server, sid, "publisher", policy, env=env)
    viewer = None
    try:
        stream = streams.get(timeout=15)
        assert (stream.name, stream.has_video, stream.has_audio) == ("aiortc", True, True)
        viewer = Viewer(stream)
        sub_s.subscribe(viewer)
        viewer.expect("connected", timeout=15)
        if srtp_profile:
            assert client.srtp_profile() == srtp_profile
        def stamped():
            return [fr.test_pattern[0] for fr in list(viewer.frames) if fr.test_pattern]
        assert wait_until(lambda: len(stamped()) >= 30 and len(viewer.audio) >= 50, timeout=SECONDS + 10), \
            f"{len(viewer.frames)} frames ({len(stamped())} with a readable stamp), {len(viewer.audio)} audio buffers"
        f = viewer.frames[-1]
        assert (f.width, f.height) == (320, 240)
        numbers = stamped()
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), numbers
        pcm = b"".join(p for p, _ in viewer.audio[len(viewer.audio) // 2:])
        assert abs(crossing_hz(pcm, viewer.audio[0][1]) - 440) < 15
        client.finish()
    finally:
        if viewer:
            viewer.close()
        sub_s.close()
        client.proc.kill()


@pytest.mark.parametrize("policy", ["balanced", "max-bundle"])
def test_aiortc_publisher_to_native_subscriber(session, policy):
    aiortc_to_native(*session, policy)


@pytest.mark.parametrize("mode", ["routed", "relayed"])
def test_aes_cm_srtp_profile_both_ways(mode):
    """AES_CM_128_HMAC_SHA1_80, the profile many stacks use (Chromium and aiortc agree on AEAD_AES_128_GCM with us): aiortc
    offers and accepts only it, publishes to our subscriber and subscribes to our publisher (a session each), through
    the router (its leg to the router is AES-CM, ours GCM) or peer to peer (our client's own AES-CM). Frames decode both
    ways."""
    aes_cm = "SRTP_AES128_CM_SHA1_80"
    with otsession.Server(api_key="4246", api_secret="d1" * 20) as server:
        for direction in (aiortc_to_native, native_to_aiortc):
            direction(server, server.create_session(relayed=mode == "relayed"), "balanced", srtp_profile=aes_cm,
                      env={"AIORTC_SRTP_PROFILES": aes_cm})
