"""End-to-end encrypted sessions through the Python package: the same secret decodes, another one gives
ENCRYPTION_SECRET_MISMATCH and no pictures; secrets of a bad length are refused."""
import queue

import pytest

import otsession
from otsession import AudioSource, ErrorCode, OTError
from session_recorder import publisher_and_viewer, wait_until


class Viewer(otsession.Subscriber):
    def __init__(self, stream):
        super().__init__(stream)
        self.frames = []
        self.errors = queue.Queue()

    def on_render_frame(self, frame):
        self.frames.append(frame)

    def on_error(self, code, message):
        self.errors.put((code, message))


@pytest.fixture
def e2ee_pair():
    with otsession.Server(api_key="778", api_secret="ab" * 20) as server:
        sid = server.create_session(e2ee=True)
        with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams):
            yield server, pub_s, sub_s, streams


def publish(pub_s, streams):
    pub = otsession.Publisher("e2ee", width=320, height=240, audio_source=AudioSource.TONE, tone_hz=440)
    pub_s.publish(pub)
    return pub, streams.get(timeout=10)


def test_same_secret_decodes_the_test_pattern(e2ee_pair):
    _, pub_s, sub_s, streams = e2ee_pair
    assert pub_s.is_end_to_end_encrypted and sub_s.is_end_to_end_encrypted
    pub_s.set_encryption_secret("python shared secret")
    sub_s.set_encryption_secret("python shared secret")
    pub, stream = publish(pub_s, streams)
    viewer = Viewer(stream)
    sub_s.subscribe(viewer)
    assert wait_until(lambda: len(viewer.frames) >= 15)
    stamped = [f.test_pattern[0] for f in viewer.frames if f.test_pattern]
    assert len(stamped) >= 10 and stamped == sorted(stamped)
    assert viewer.errors.empty()
    viewer.close()
    pub.close()


def test_other_secret_reports_mismatch_and_renders_nothing(e2ee_pair):
    _, pub_s, sub_s, streams = e2ee_pair
    pub_s.set_encryption_secret("the publisher secret")
    sub_s.set_encryption_secret("not the same secret")
    pub, stream = publish(pub_s, streams)
    viewer = Viewer(stream)
    sub_s.subscribe(viewer)
    code, message = viewer.errors.get(timeout=15)
    assert code == ErrorCode.ENCRYPTION_SECRET_MISMATCH == 1620 and "secret" in message
    assert viewer.frames == []
    viewer.close()
    pub.close()


def test_missing_and_invalid_secrets(e2ee_pair):
    server, pub_s, _, _ = e2ee_pair
    pub = otsession.Publisher("nosecret", width=160, height=120)
    with pytest.raises(OTError) as e:
        pub_s.publish(pub)
    assert e.value.code == ErrorCode.ENCRYPTION_SECRET_MISSING
    for bad in ("", "1234567", "x" * 257):
        with pytest.raises(OTError) as e:
            pub_s.set_encryption_secret(bad)
        assert e.value.code == ErrorCode.INVALID_ENCRYPTION_SECRET == 1030
    pub_s.set_encryption_secret("x" * 8)
    with pytest.raises(OTError) as e:
        server.create_session(relayed=True, e2ee=True)
    assert e.value.code == ErrorCode.INVALID_PARAM
    pub.close()
