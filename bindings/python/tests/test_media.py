"""Publish and subscribe through the Python package: real VP8 (and VP9)/Opus media on loopback."""
import array
import json
import math
import threading
import time

import pytest

import otsession
from otsession import AudioSource, ErrorCode, OTError, PixelFormat, VideoReason, VideoSource
from session_recorder import SubscriberRecorder, publisher_and_viewer, router_stats, wait_until


class Viewer(SubscriberRecorder):
    def __init__(self, stream):
        super().__init__(stream)
        self.audio = []

    def on_audio_data(self, pcm, rate, channels):
        self.audio.append((pcm, rate, channels))

    def on_video_disabled(self, reason):
        self.events.put(("video_disabled", reason))

    def on_video_enabled(self, reason):
        self.events.put(("video_enabled", reason))


def zero_crossing_hz(pcm: bytes, rate: int) -> float:
    s = array.array("h", pcm)
    crossings = sum(1 for a, b in zip(s, s[1:]) if (a < 0) != (b < 0))
    return crossings / 2 / (len(s) / rate)


@pytest.fixture(params=["routed", "relayed"])
def joined(request):
    """A server, a session, a publishing client and a viewing client (connected)."""
    with otsession.Server(api_key="777", api_secret="ef" * 20) as server:
        sid = server.create_session(relayed=request.param == "relayed")
        with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams):
            yield server, pub_s, sub_s, streams


def test_test_pattern_and_tone_arrive_decoded(joined):
    server, pub_s, sub_s, streams = joined
    pub = otsession.Publisher("py", width=320, height=240, audio_source=AudioSource.TONE, tone_hz=440)
    pub_s.publish(pub)
    stream = streams.get(timeout=10)
    assert stream.name == "py" and stream.has_video and stream.has_audio
    viewer = Viewer(stream)
    sub_s.subscribe(viewer)
    viewer.expect("connected")
    assert wait_until(lambda: len(viewer.frames) >= 30 and len(viewer.audio) >= 50)
    stamped = [f.test_pattern[0] for f in viewer.frames if f.test_pattern]
    assert len(stamped) >= 25 and stamped == sorted(stamped) and len(set(stamped)) == len(stamped)
    f = viewer.frames[-1]
    assert (f.width, f.height) == (320, 240) and len(f.y) >= 320 * 240
    latency_ms = (otsession.monotonic_us() - viewer.frames[-1].test_pattern[1]) / 1000
    assert 0 <= latency_ms < 5000
    pcm = b"".join(p for p, _, _ in viewer.audio[10:])
    assert abs(zero_crossing_hz(pcm, viewer.audio[0][1]) - 440) < 25
    assert viewer.stats["frames_decoded"] >= 30
    assert pub.stats["frames_encoded"] >= 30
    assert '"inbound-rtp"' in viewer.rtc_stats_report()
    sub_s.unsubscribe(viewer)
    viewer.close()
    pub_s.unpublish(pub)
    pub.close()


def test_toggles_give_video_disabled_and_enabled_with_reasons(joined):
    server, pub_s, sub_s, streams = joined
    pub = otsession.Publisher("toggle", width=160, height=120)
    pub_s.publish(pub)
    viewer = Viewer(streams.get(timeout=10))
    sub_s.subscribe(viewer)
    viewer.expect("connected")
    assert viewer.subscribe_to_video and pub.publish_video
    viewer.subscribe_to_video = False
    assert not viewer.subscribe_to_video
    assert viewer.expect("video_disabled")[1] == VideoReason.SUBSCRIBE_TO_VIDEO
    viewer.subscribe_to_video = True
    assert viewer.expect("video_enabled")[1] == VideoReason.SUBSCRIBE_TO_VIDEO
    pub.publish_video = False
    assert not pub.publish_video
    assert viewer.expect("video_disabled")[1] == VideoReason.PUBLISH_VIDEO
    pub.publish_video = True
    assert viewer.expect("video_enabled")[1] == VideoReason.PUBLISH_VIDEO
    viewer.close()
    pub.close()


def test_audio_fallback_setting_travels_with_the_stream(joined):
    server, pub_s, sub_s, streams = joined
    for allowed in (False, True):
        pub = otsession.Publisher("fb", width=160, height=120, audio_fallback_enabled=allowed)
        pub_s.publish(pub)
        stream = streams.get(timeout=10)
        assert stream.audio_fallback_enabled is allowed
        pub_s.unpublish(pub)
        pub.close()


def test_custom_capturer_frames_in_nv12(joined):
    server, pub_s, sub_s, streams = joined
    pub = otsession.Publisher("custom", video_source=VideoSource.CUSTOM, width=64, height=48, audio_source=AudioSource.NONE)
    started = threading.Event()
    pub.on("capture_start", started.set)
    with pytest.raises(OTError) as e:
        pub.provide_video_frame(PixelFormat.NV12, 64, 48, [bytes(64 * 48), bytes(64 * 24)], [64, 64], 0)
    assert e.value.code == ErrorCode.ILLEGAL_STATE            # not capturing before publish
    pub_s.publish(pub)
    assert started.wait(10)
    viewer = Viewer(streams.get(timeout=10))
    sub_s.subscribe(viewer)
    y = bytes([200]) * (64 * 48)
    uv = bytes([128]) * (64 * 24)
    deadline = time.time() + 15
    while time.time() < deadline and len(viewer.frames) < 5:
        pub.provide_video_frame(PixelFormat.NV12, 64, 48, [y, uv], [64, 64], otsession.monotonic_us())
        time.sleep(1 / 30)
    assert len(viewer.frames) >= 5
    f = viewer.frames[-1]
    mean_luma = sum(f.y[r * f.stride_y + c] for r in range(f.height) for c in range(f.width)) / (f.width * f.height)
    assert abs(mean_luma - 200) < 12, mean_luma                # what we pushed comes out
    with pytest.raises(OTError) as e:
        pub.provide_video_frame(PixelFormat.NV12, 64, 48, [y], [64], 0)
    assert e.value.code == ErrorCode.INVALID_PARAM           # wrong plane count
    viewer.close()
    pub.close()


def router_subscribers(server, stream_id):
    """How many subscribers the media router forwards `stream_id` to (the REST API's /v2/stats; 0 when it has none)."""
    return sum(s["streams"].get(stream_id, {}).get("subscribers", 0) for s in router_stats(server).values())


def test_closing_a_subscriber_ends_its_subscription(joined):
    """Subscriber.close (ot_subscriber_delete) without unsubscribing first, three times, then a fourth subscriber that
    stays: the closed ones' subscriptions end with them, so the publisher (relayed) or the media router (routed) sends
    to the live one only, and it still receives."""
    server, pub_s, sub_s, streams = joined
    pub = otsession.Publisher("closed", width=160, height=120)
    pub_s.publish(pub)
    stream = streams.get(timeout=10)
    for _ in range(3):
        viewer = Viewer(stream)
        sub_s.subscribe(viewer)
        assert wait_until(lambda: len(viewer.frames) >= 3), len(viewer.frames)
        viewer.close()
    live = Viewer(stream)
    sub_s.subscribe(live)
    assert wait_until(lambda: len(live.frames) >= 3), len(live.frames)
    if sub_s.relayed:
        assert wait_until(lambda: pub.stats["connections"] == 1), pub.stats["connections"]
    else:
        assert wait_until(lambda: router_subscribers(server, stream.id) == 1), router_subscribers(server, stream.id)
    got = len(live.frames)
    assert wait_until(lambda: len(live.frames) >= got + 15), (got, len(live.frames))
    sub_s.unsubscribe(live)
    live.close()
    pub_s.unpublish(pub)
    pub.close()


def test_a_subscriber_role_cannot_publish(joined):
    server, pub_s, sub_s, streams = joined
    pub = otsession.Publisher("nope")
    with pytest.raises(OTError) as e:
        sub_s.publish(pub)
    assert e.value.code == ErrorCode.UNABLE_TO_PUBLISH
    pub.close()


def codec_mime_type(report: str, rtp_type: str) -> str:
    """The mimeType of the codec a W3C stats report's video `rtp_type` entry names."""
    objects = json.loads(report)
    rtp = next(o for o in objects if o["type"] == rtp_type and o["kind"] == "video")
    return next(o["mimeType"] for o in objects if o["id"] == rtp["codecId"])


def test_a_publisher_preferring_vp9_is_decoded_in_vp9(joined):
    server, pub_s, sub_s, streams = joined
    pub = otsession.Publisher("vp9", width=320, height=240, preferred_video_codecs=["VP9", "VP8"])
    pub_s.publish(pub)
    viewer = Viewer(streams.get(timeout=10))
    sub_s.subscribe(viewer)
    viewer.expect("connected")
    assert wait_until(lambda: len(viewer.frames) >= 20)
    assert (viewer.frames[-1].width, viewer.frames[-1].height) == (320, 240)
    assert codec_mime_type(viewer.rtc_stats_report(), "inbound-rtp") == "video/VP9"
    assert codec_mime_type(pub.rtc_stats_report(), "outbound-rtp") == "video/VP9"
    sub_s.unsubscribe(viewer)
    viewer.close()
    pub_s.unpublish(pub)
    pub.close()


def test_an_unknown_video_codec_is_refused():
    with pytest.raises(OTError) as e:
        otsession.Publisher("x", preferred_video_codecs=["H265"])
    assert e.value.code == 1011


def _router_port(viewer):
    """The UDP port of the router worker a routed subscriber's media comes from (its selected remote candidate)."""
    report = json.loads(viewer.rtc_stats_report())
    stats = report.values() if isinstance(report, dict) else report
    ports = {s["port"] for s in stats if isinstance(s, dict) and s.get("type") == "remote-candidate"}
    assert len(ports) == 1, report
    return ports.pop()


def test_two_media_workers_each_carry_a_routed_session():
    """A server with media_workers=2 (out-of-range counts refused): two routed sessions pinned to different workers
    both carry a publisher's frames to their subscriber, through two different router ports."""
    for bad in (0, 65, -1, 2**32 + 2):
        with pytest.raises(OTError):
            otsession.Server(api_key="778", api_secret="ef" * 20, media_workers=bad)
    with otsession.Server(api_key="778", api_secret="ef" * 20, media_workers=2) as server:
        with pytest.raises(OTError) as e:
            server.session_placement("1_MX45OTl-not-this-project")
        assert e.value.code == 1011
        sessions = {}
        for _ in range(200):
            sid = server.create_session()
            sessions.setdefault(server.session_placement(sid), sid)
            if len({w for w, _ in sessions}) == 2:
                break
        assert {w for w, _ in sessions} == {0, 1}, sessions
        ports = []
        for (worker, placed_port), sid in sessions.items():
            with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams):
                pub = otsession.Publisher("w", width=320, height=240)
                pub_s.publish(pub)
                viewer = Viewer(streams.get(timeout=10))
                sub_s.subscribe(viewer)
                viewer.expect("connected")
                assert wait_until(lambda: len(viewer.frames) >= 10), f"frames: {len(viewer.frames)}"
                ports.append(_router_port(viewer))
                assert ports[-1] == placed_port, f"worker {worker}: media from {ports[-1]}, placed on {placed_port}"
                sub_s.unsubscribe(viewer)
                viewer.close()
                pub_s.unpublish(pub)
                pub.close()
        assert len(set(ports)) == 2, ports
