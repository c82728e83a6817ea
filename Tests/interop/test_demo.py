"""The demo as a smoke check: `ot-demo --duration 3 --out DIR`, routed and relayed, must exit 0 and leave a PNG of
the right size, an IVF of VP8 (or, with --codec VP9, VP9) frames and a WAV holding the 440 Hz tone."""
import re
import struct
import subprocess
import wave

import pytest


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(33)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature"
    length, kind = struct.unpack(">I4s", head[8:16])
    assert kind == b"IHDR" and length == 13
    width, height, depth, color = struct.unpack(">IIBB", head[16:26])
    assert depth == 8
    return width, height


def ivf_frames(path, fourcc=b"VP80"):
    """The IVF header's size and the frames actually stored (walking the 12-byte frame headers)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"DKIF", "IVF signature"
    header_len, found, width, height = struct.unpack("<H4sHH", data[6:16])
    assert found == fourcc and header_len == 32
    frames, pos, stamps = 0, 32, []
    while pos + 12 <= len(data):
        size, ts = struct.unpack("<IQ", data[pos:pos + 12])
        assert size > 0 and pos + 12 + size <= len(data), "truncated frame"
        if frames == 0:
            # VP8: the P bit; VP9 (profile 0): the frame-type bit after the marker, profile and show-existing bits.
            assert data[pos + 12] & (1 if fourcc == b"VP80" else 0x04) == 0, "the first frame is a keyframe"
        stamps.append(ts)
        pos += 12 + size
        frames += 1
    assert pos == len(data)
    assert stamps == sorted(stamps)
    return (width, height), frames


def tone_frequency(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        rate, n = w.getframerate(), w.getnframes()
        samples = struct.unpack(f"<{n}h", w.readframes(n))
    tail = samples[len(samples) // 2:]  # past the start-up
    rising = [i for i in range(1, len(tail)) if tail[i - 1] < 0 <= tail[i]]
    assert len(rising) > 10, "no tone in the recording"
    return (len(rising) - 1) * rate / (rising[-1] - rising[0]), n / rate


@pytest.mark.parametrize("mode,codec", [("--routed", "VP8"), ("--relayed", "VP8"), ("--routed", "VP9")])
def test_demo_runs_and_records(ot_demo, tmp_path, mode, codec):
    out = tmp_path / "out"
    run = subprocess.run([ot_demo, "--duration", "3", mode, "--codec", codec, "--resolution", "320x240", "--fps", "15",
                          "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^\[\s*\d+\.\ds\] video [\d.]+ fps \d+ kbit/s .*latency", run.stdout, re.M), run.stdout
    decoded = re.search(r"video frames: sent (\d+) .*decoded (\d+)", run.stdout)
    assert decoded and int(decoded.group(2)) > 10, run.stdout
    assert re.search(r"counters: \d+ read back, .*in order", run.stdout), run.stdout
    assert png_size(out / "snapshot.png") == (320, 240)
    assert f"{codec} frames)" in run.stdout, run.stdout
    size, frames = ivf_frames(out / "received.ivf", codec.encode() + b"0")
    assert size == (320, 240)
    assert frames > 10
    try:
        import av  # PyAV, installed with aiortc: an independent VP8/VP9 decoder (ffmpeg's)
    except ImportError:
        av = None
    if av is not None:
        with av.open(str(out / "received.ivf")) as container:
            pictures = [(p.width, p.height) for p in container.decode(video=0)]
        assert pictures == [(320, 240)] * frames
    freq, seconds = tone_frequency(str(out / "received.wav"))
    assert seconds > 1.5
    assert abs(freq - 440) < 15, freq


def test_demo_joins_an_external_server(ot_demo, ot_server, tmp_path):
    """`--server URL --project KEY:SECRET` against a running ot-server: the session is created through the REST API,
    and `--session ID` (a relayed session made by the OpenTok Python SDK) keeps that session's mode."""
    from opentok import Client, MediaModes

    project = f"{ot_server.key}:{ot_server.secret}"
    created = subprocess.run([ot_demo, "--duration", "2", "--relayed", "--resolution", "320x240", "--fps", "15",
                              "--server", ot_server.api_url, "--project", project, "--out", str(tmp_path / "a")],
                             capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stdout + created.stderr
    assert "(external), session 1_" in created.stdout and "(created)" in created.stdout
    assert png_size(tmp_path / "a" / "snapshot.png") == (320, 240)

    sid = Client(ot_server.key, ot_server.secret, api_url=ot_server.api_url).create_session(
        media_mode=MediaModes.relayed).session_id
    joined = subprocess.run([ot_demo, "--duration", "2", "--resolution", "320x240", "--fps", "15",
                             "--server", f"ws://127.0.0.1:{ot_server.port}/v2/signaling", "--project", project,
                             "--session", sid, "--out", str(tmp_path / "b")], capture_output=True, text=True, timeout=60)
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert f"session {sid}\n" in joined.stdout and "summary (relayed," in joined.stdout


def test_bad_flags_exit_with_usage(ot_demo):
    for args in (["--bogus"], ["--resolution", "12"], ["--fps"], ["--routed", "--relayed"], ["--server", "http://127.0.0.1:1"],
                 ["--codec", "H264"]):
        run = subprocess.run([ot_demo, *args], capture_output=True, text=True, timeout=10)
        assert run.returncode == 2, args
        assert "usage: ot-demo" in run.stderr, run.stderr
