"""Run by test_devices.py with the V4L2 stand-in preloaded: lists the fake camera, publishes it through the binding,
checks the known picture at the subscriber, pulls the cable."""
import ctypes
import queue

import otsession
from otsession import AudioSource, DeviceKind, PixelFormat, VideoSource
from session_recorder import SubscriberRecorder, publisher_and_viewer, wait_until

# BT.601 (Y, U, V) of the stand-in's quadrants: red, green / blue, yellow.
COLOURS = [(81, 90, 240), (145, 54, 34), (41, 240, 110), (210, 16, 146)]


def quadrant_means(f):
    out = []
    for q in range(4):
        x0, y0 = (q % 2) * f.width // 2 + f.width // 8, (q // 2) * f.height // 2 + f.height // 8
        ys = [f.y[y * f.stride_y + x] for y in range(y0, y0 + f.height // 4) for x in range(x0, x0 + f.width // 4)]
        cs = [(y // 2) * f.stride_u + x // 2 for y in range(y0, y0 + f.height // 4, 2) for x in range(x0, x0 + f.width // 4, 2)]
        out.append((sum(ys) / len(ys), sum(f.u[i] for i in cs) / len(cs), sum(f.v[i] for i in cs) / len(cs)))
    return out


cameras = otsession.devices(DeviceKind.CAMERA)
camera = next(d for d in cameras if d.id == "/dev/video77")
assert camera.name == "Fake Camera" and camera.is_default, camera
assert {m.pixel_format for m in camera.modes} == {PixelFormat.MJPEG, PixelFormat.YUY2}, camera.modes
assert {(m.width, m.height) for m in camera.modes} == {(640, 480), (320, 240)}

with otsession.Server(api_key="4711", api_secret="ab" * 20) as server:
    sid = server.create_session()
    with publisher_and_viewer(server, sid) as (pub_s, sub_s, streams):
        errors = queue.Queue()
        pub = otsession.Publisher(video_source=VideoSource.CAMERA, camera="/dev/video77", width=320, height=240, fps=15,
                                  audio_source=AudioSource.NONE)
        pub.on("device_error", lambda kind, code, message: errors.put((kind, code)))
        pub_s.publish(pub)
        sub = SubscriberRecorder(streams.get(timeout=10))
        sub_s.subscribe(sub)
        assert wait_until(lambda: len(sub.frames) >= 15), f"{len(sub.frames)} frames"
        frame = sub.frames[-1]
        assert (frame.width, frame.height) == (320, 240)
        means = quadrant_means(frame)
        worst = max(abs(m - c) for mean, colour in zip(means, COLOURS) for m, c in zip(mean, colour))
        assert worst <= 12, means

        ctypes.CDLL(None).fake_v4l2_unplug()
        assert errors.get(timeout=10) == (DeviceKind.CAMERA, 9101)
        assert wait_until(lambda: sum(sub.frames[-1].y) / len(sub.frames[-1].y) < 24), "black frames follow"
        assert sub_s.status == otsession.SessionStatus.CONNECTED
        pub.close()
        sub.close()
print("camera child ok")
