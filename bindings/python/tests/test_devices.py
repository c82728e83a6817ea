"""Devices through the Python binding (and so the C ABI): PulseAudio microphones and speakers against a private
daemon with null sinks, and the V4L2 camera stand-in (Tests/fixtures/fake-v4l2) in a child process."""
import array
import math
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import wave

import pytest

import otsession
from otsession import AudioSource, DeviceKind, VideoSource
from session_recorder import SubscriberRecorder, publisher_and_viewer, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def pulse(monkeypatch):
    """A PulseAudio daemon in a private runtime directory with null sinks "tone_in" and "speaker"; PULSE_SERVER points
    this process (and the tools) at it. Killed after the test."""
    if not (shutil.which("pulseaudio") and shutil.which("pactl")):
        pytest.skip("pulseaudio and pulseaudio-utils are not installed (tools/setup.sh installs them)")
    d = pathlib.Path(tempfile.mkdtemp(prefix="ot-pulse-py-"))
    for sub in ("runtime", "state", "home"):
        (d / sub).mkdir()
    socket = d / "native"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(d / "home"), "XDG_RUNTIME_DIR": str(d),
           "PULSE_RUNTIME_PATH": str(d / "runtime"), "PULSE_STATE_PATH": str(d / "state"), "PULSE_SERVER": f"unix:{socket}"}
    args = ["pulseaudio", "-n", "--daemonize=yes", "--use-pid-file=yes", "--exit-idle-time=-1", "--system=no",
            "--realtime=no", "--high-priority=no", "--disable-shm=yes", "--log-level=error",
            "-L", f"module-native-protocol-unix socket={socket} auth-anonymous=1"]
    for sink in ("tone_in", "speaker"):
        args += ["-L", f"module-null-sink sink_name={sink} rate=48000 channels=1"]
    subprocess.run(args, env=env, check=True, timeout=30, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int((d / "runtime" / "pid").read_text().strip())
    monkeypatch.setenv("PULSE_SERVER", env["PULSE_SERVER"])
    try:
        assert wait_until(lambda: subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0, 15)
        yield env
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not pathlib.Path(f"/proc/{pid}").exists(), 5)
        shutil.rmtree(d, ignore_errors=True)


def frequency(samples):
    """Dominant frequency of a clean tone from its rising zero crossings (48 kHz)."""
    crossings = [i for i in range(1, len(samples)) if samples[i - 1] < 0 <= samples[i]]
    return 48000 * (len(crossings) - 1) / (crossings[-1] - crossings[0]) if len(crossings) > 2 else 0


def assert_tone(samples, hz=440, seconds=0.5):
    """The recording holds `seconds` of a clean `hz` tone (within 10 Hz), judged in 20 ms windows over its loud part:
    under load a late packet becomes a concealed or silent stretch, which spoils the windows it falls in, not the
    pitch of the others. A wrong rate or a garbled stream fails every window."""
    loud = [i for i, s in enumerate(samples) if abs(s) > 4000]
    assert loud, f"no tone ({len(samples)} samples recorded)"
    windows = [frequency(samples[i:i + 960]) for i in range(loud[0], loud[-1] - 960, 960)]
    clean = [f for f in windows if abs(f - hz) < 10]
    assert len(clean) * 0.02 >= seconds, f"{len(clean)} of {len(windows)} 20 ms windows at {hz} Hz: {windows}"


def test_the_tone_check_tolerates_gaps_and_never_a_wrong_pitch():
    """assert_tone, unit-tested: 440 Hz with what a loaded machine records (15 ms of silence every 70 ms, 7 ms of the
    tone dropped every 110 ms) passes; a tone 15 Hz off, an octave off or at the wrong rate fails, gaps or not."""
    def tone(hz):
        return [int(16000 * math.sin(2 * math.pi * hz * i / 48000)) for i in range(48000)]

    def with_gaps(clean):
        return [0 if i % 3360 < 720 else s for i, s in enumerate(clean) if i % 5280 >= 336]

    assert_tone(tone(440))
    assert_tone(with_gaps(tone(440)))
    for hz in (425, 455, 880, 479):
        for samples in (tone(hz), with_gaps(tone(hz))):
            with pytest.raises(AssertionError):
                assert_tone(samples)


def test_audio_devices_are_listed(pulse):
    speakers = otsession.devices(DeviceKind.SPEAKER)
    assert [d.id for d in speakers] == ["tone_in", "speaker"]
    assert all(d.kind == DeviceKind.SPEAKER and d.name for d in speakers)
    assert sum(d.is_default for d in speakers) == 1
    microphones = otsession.devices(DeviceKind.MICROPHONE)
    assert {d.id for d in microphones} == {"tone_in.monitor", "speaker.monitor"}
    assert all(d.is_monitor for d in microphones)


def test_without_a_sound_server_audio_devices_fall_back(server, monkeypatch):
    monkeypatch.setenv("PULSE_SERVER", "unix:/nonexistent/otsession-test")
    with pytest.raises(otsession.OTError) as e:
        otsession.devices(DeviceKind.MICROPHONE)
    assert e.value.code == 9100
    sid = server.create_session()
    with publisher_and_viewer(server, sid) as (pub_s, _sub_s, streams):
        errors = queue.Queue()
        pub = otsession.Publisher(video_source=VideoSource.NONE, audio_source=AudioSource.MICROPHONE)
        pub.on("device_error", lambda kind, code, message: errors.put((kind, code)))
        pub_s.publish(pub)
        streams.get(timeout=10)
        assert errors.get(timeout=10) == (DeviceKind.MICROPHONE, 9100)
        assert wait_until(lambda: pub.stats["audio_packets_sent"] > 25), "silence is sent instead"
        pub.close()


def test_microphone_to_speaker_through_a_session_then_unplugged(server, pulse):
    sid = server.create_session()
    with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams), tempfile.TemporaryDirectory() as tmp:
        speaker_errors = queue.Queue()
        sub_s.on("device_error", lambda kind, code, message: speaker_errors.put((kind, code)))
        sub_s.set_speaker("speaker")
        pub = otsession.Publisher(video_source=VideoSource.NONE, audio_source=AudioSource.MICROPHONE,
                                  microphone="tone_in.monitor")
        pub_s.publish(pub)
        sub = SubscriberRecorder(streams.get(timeout=10))
        audio = []
        sub.on("audio_data", lambda pcm, rate, ch: audio.append(len(pcm)))
        sub_s.subscribe(sub)
        sub.expect("connected")
        assert wait_until(lambda: len(audio) >= 25)
        out = pathlib.Path(tmp) / "speaker.raw"
        tone = array.array("h", (int(16000 * math.sin(2 * math.pi * 440 * i / 48000)) for i in range(96000)))
        with open(out, "wb") as f:
            parec = subprocess.Popen(["parec", "--raw", "--rate=48000", "--channels=1", "--format=s16le", "--device=speaker.monitor"],
                                     env=pulse, stdout=f)
            subprocess.run(["pacat", "--playback", "--raw", "--rate=48000", "--channels=1", "--format=s16le", "--device=tone_in"],
                           env=pulse, input=tone.tobytes(), timeout=30, check=True)
            time.sleep(0.5)
            parec.send_signal(signal.SIGINT)
            parec.wait(timeout=10)
        assert_tone(array.array("h", out.read_bytes()[: (out.stat().st_size // 2) * 2]))

        subprocess.run(["pactl", "unload-module", "module-null-sink"], env=pulse, check=False)  # both sinks go
        assert speaker_errors.get(timeout=10) == (DeviceKind.SPEAKER, 9101)
        n = len(audio)
        assert wait_until(lambda: len(audio) >= n + 25), "audio still arrives after the devices went"
        assert sub_s.status == otsession.SessionStatus.CONNECTED
        pub.close()
        sub.close()


def test_camera_stand_in_through_a_session_then_unplugged(tmp_path):
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the V4L2 stand-in")
    shim = tmp_path / "fake_v4l2.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(ROOT / "Tests/fixtures/fake-v4l2/fake_v4l2.c"),
                    "-ldl", "-ljpeg", "-lpthread"], check=True)
    env = dict(os.environ, LD_PRELOAD=str(shim), FAKE_V4L2_DEVICE="/dev/video77", FAKE_V4L2_FORMATS="MJPG,YUYV",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.run([sys.executable, str(HERE / "camera_child.py")], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and "camera child ok" in child.stdout, child.stdout[-3000:] + child.stderr[-3000:]


def test_demo_with_camera_microphone_and_speaker(pulse, tmp_path):
    """`ot-demo --camera --microphone SOURCE --speaker SINK` under the camera stand-in and the private sound server:
    it passes, says which devices it used, and the WAV it wrote holds the tone pacat played into the source."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the V4L2 stand-in")
    demo = os.environ.get("OT_DEMO_BIN")
    if not demo:
        subprocess.run(["swift", "build", "--product", "ot-demo"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        demo = os.path.join(subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True,
                                           text=True).stdout.strip(), "ot-demo")
    shim = tmp_path / "fake_v4l2.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(ROOT / "Tests/fixtures/fake-v4l2/fake_v4l2.c"),
                    "-ldl", "-ljpeg", "-lpthread"], check=True)
    env = dict(os.environ, LD_PRELOAD=str(shim), FAKE_V4L2_DEVICE="/dev/video77", FAKE_V4L2_FORMATS="YUYV",
               FAKE_V4L2_SIZES="320x240", PULSE_SERVER=pulse["PULSE_SERVER"])
    tone = array.array("h", (int(16000 * math.sin(2 * math.pi * 440 * i / 48000)) for i in range(48000 * 6)))
    run = subprocess.Popen([demo, "--camera", "--microphone", "tone_in.monitor", "--speaker", "speaker", "--resolution", "320x240",
                            "--fps", "15", "--duration", "4", "--out", str(tmp_path / "out")],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    subprocess.run(["pacat", "--playback", "--raw", "--rate=48000", "--channels=1", "--format=s16le", "--device=tone_in"],
                   env=pulse, input=tone.tobytes(), timeout=30)
    out, _ = run.communicate(timeout=60)
    assert run.returncode == 0, out
    assert "camera Fake Camera (/dev/video77), YUY2 320x240 at 15 fps" in out, out
    assert "microphone tone_in.monitor" in out and "playing the received audio on speaker" in out, out
    with wave.open(str(tmp_path / "out" / "received.wav"), "rb") as w:
        pcm = array.array("h", w.readframes(w.getnframes()))
    assert_tone(pcm)
