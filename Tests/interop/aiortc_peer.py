#!/usr/bin/env python3
"""aiortc peer for libotsession's interop test (driven by OTTransportTests.AiortcInteropTests).

Modes: (default) aiortc offers and we answer; `answer` we offer and aiortc answers; `media` aiortc offers
Opus + VP8 with known content and reports what it decoded of ours; `pair` two aiortc peers (setup-time reference). Protocol on stdin/stdout, one JSON object per line (the offering side's
description first):
  -> {"type": "offer", "sdp": ...}                 our offer (audio sendrecv, Opus), candidates on 127.0.0.1 only
  <- {"type": "answer", "sdp": ...}                from the test
  -> {"event": "connected", "ms": <offer->connected>}
  -> {"event": "stats", "packetsReceived": n, "packetsSent": n, "framesDecoded": n, "ssrc": n}
Exits after reporting stats, or after a timeout.
"""
import asyncio
import fractions
import json
import sys
import time

import aioice.ice
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack
import av
import numpy as np

# Loopback only: aioice leaves 127.0.0.1 out of host candidates by default.
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


class ToneTrack(MediaStreamTrack):
    """20 ms frames of a 440 Hz-ish square wave, 48 kHz mono s16."""
    kind = "audio"

    def __init__(self):
        super().__init__()
        self.pts = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        target = self.start + self.pts / 48000
        delay = target - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        frame = av.AudioFrame(format="s16", layout="mono", samples=960)
        samples = bytes(((i // 55) % 2) * 0x20 for i in range(960 * 2))
        frame.planes[0].update(samples)
        frame.sample_rate = 48000
        frame.pts = self.pts
        frame.time_base = fractions.Fraction(1, 48000)
        self.pts += 960
        return frame


class SineTrack(MediaStreamTrack):
    """20 ms frames of a 440 Hz sine, 48 kHz mono s16 (content the other side checks)."""
    kind = "audio"

    def __init__(self, hz=440.0):
        super().__init__()
        self.hz = hz
        self.pts = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        delay = self.start + self.pts / 48000 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        t = (np.arange(960) + self.pts) / 48000.0
        samples = (8000 * np.sin(2 * np.pi * self.hz * t)).astype(np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = 48000
        frame.pts = self.pts
        frame.time_base = fractions.Fraction(1, 48000)
        self.pts += 960
        return frame


class ColorTrack(MediaStreamTrack):
    """320x240 frames of one solid colour (Y=170, U=80, V=200) at 30 fps."""
    kind = "video"

    def __init__(self):
        super().__init__()
        self.count = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        delay = self.start + self.count / 30 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        w, h = 320, 240
        yuv = np.empty((h * 3 // 2, w), dtype=np.uint8)
        yuv[:h] = 170
        yuv[h:h + h // 4] = 80
        yuv[h + h // 4:] = 200
        frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
        frame.pts = self.count * 3000
        frame.time_base = fractions.Fraction(1, 90000)
        self.count += 1
        return frame


async def media(duration):
    """aiortc offers audio (440 Hz sine) and video (solid colour), both sendrecv, and measures what it decodes
    of ours: video frames and their mean luma, audio frames, RMS and frequency (zero crossings)."""
    pc = RTCPeerConnection()
    got = {"videoFrames": 0, "videoMeanY": -1.0, "audioFrames": 0, "samples": []}
    connected = asyncio.Event()

    @pc.on("track")
    def on_track(track):
        async def consume():
            while True:
                try:
                    frame = await track.recv()
                except Exception:
                    return
                if track.kind == "video":
                    got["videoFrames"] += 1
                    got["videoMeanY"] = float(frame.to_ndarray(format="yuv420p")[:frame.height].mean())
                else:
                    got["audioFrames"] += 1
                    arr = frame.to_ndarray().reshape(-1)
                    channels = len(frame.layout.channels)
                    got["samples"].extend(arr[::channels].tolist()[:960])
        asyncio.ensure_future(consume())

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected":
            connected.set()

    pc.addTransceiver(SineTrack(), direction="sendrecv")
    pc.addTransceiver(ColorTrack(), direction="sendrecv")
    t0 = time.monotonic()
    await pc.setLocalDescription(await pc.createOffer())
    emit({"type": "offer", "sdp": pc.localDescription.sdp})
    line = await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=json.loads(line)["sdp"], type="answer"))
    await asyncio.wait_for(connected.wait(), timeout=20)
    emit({"event": "connected", "ms": (time.monotonic() - t0) * 1000})
    await asyncio.sleep(duration)
    samples = np.array(got["samples"][-48000:], dtype=np.float64)
    rms = float(np.sqrt(np.mean(samples ** 2))) if len(samples) else 0.0
    crossings = int(np.sum((samples[:-1] < 0) & (samples[1:] >= 0))) if len(samples) > 1 else 0
    hz = crossings * 48000.0 / len(samples) if len(samples) else 0.0
    emit({"event": "media", "videoFrames": got["videoFrames"], "videoMeanY": got["videoMeanY"],
          "audioFrames": got["audioFrames"], "audioRMS": rms, "audioHz": hz})
    await pc.close()


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def pair():
    """Two aiortc peers in one process: offer -> both connected, and offer -> first decoded video frame at the
    answerer (a sends solid-colour VP8 video, b receives; audio sendrecv too)."""
    a, b = RTCPeerConnection(), RTCPeerConnection()
    done = {"a": asyncio.Event(), "b": asyncio.Event()}
    first_frame = asyncio.Event()
    for name, pc in (("a", a), ("b", b)):
        def handler(pc=pc, name=name):
            if pc.connectionState == "connected":
                done[name].set()
        pc.on("connectionstatechange", handler)

    @b.on("track")
    def on_track(track):
        if track.kind == "video":
            async def first():
                await track.recv()
                first_frame.set()
            asyncio.ensure_future(first())

    a.addTransceiver(ToneTrack(), direction="sendrecv")
    b.addTransceiver(ToneTrack(), direction="sendrecv")
    a.addTransceiver(ColorTrack(), direction="sendonly")
    t0 = time.monotonic()
    await a.setLocalDescription(await a.createOffer())
    await b.setRemoteDescription(a.localDescription)
    await b.setLocalDescription(await b.createAnswer())
    await a.setRemoteDescription(b.localDescription)
    await asyncio.wait_for(asyncio.gather(done["a"].wait(), done["b"].wait()), timeout=20)
    connected_ms = (time.monotonic() - t0) * 1000
    await asyncio.wait_for(first_frame.wait(), timeout=20)
    emit({"event": "pair", "ms": connected_ms, "firstFrameMs": (time.monotonic() - t0) * 1000})
    await a.close()
    await b.close()

async def answerer(duration):
    """aiortc answers our offer (audio sendrecv with a tone, video receive-only)."""
    pc = RTCPeerConnection()
    decoded = {"frames": 0}
    connected = asyncio.Event()

    @pc.on("track")
    def on_track(track):
        async def consume():
            while True:
                try:
                    await track.recv()
                except Exception:
                    return
                if track.kind == "audio":
                    decoded["frames"] += 1
        asyncio.ensure_future(consume())

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected":
            connected.set()

    emit({"event": "ready"})
    line = await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
    offer = json.loads(line)
    t0 = time.monotonic()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
    pc.addTrack(ToneTrack())
    await pc.setLocalDescription(await pc.createAnswer())
    emit({"type": "answer", "sdp": pc.localDescription.sdp})
    await asyncio.wait_for(connected.wait(), timeout=20)
    emit({"event": "connected", "ms": (time.monotonic() - t0) * 1000})
    await asyncio.sleep(duration)
    received = sent = 0
    ssrc = 0
    for s in (await pc.getStats()).values():
        if s.type == "inbound-rtp" and s.kind == "audio":
            received += s.packetsReceived
        if s.type == "outbound-rtp":
            sent += s.packetsSent
            ssrc = s.ssrc
    emit({"event": "stats", "packetsReceived": received, "packetsSent": sent, "framesDecoded": decoded["frames"], "ssrc": ssrc})
    await pc.close()


async def main():
    if len(sys.argv) > 1 and sys.argv[1] == "pair":
        await pair()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "media":
        await media(float(sys.argv[2]) if len(sys.argv) > 2 else 4.0)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "answer":
        await answerer(float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)
        return
    duration = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    pc = RTCPeerConnection()
    decoded = {"frames": 0}
    connected = asyncio.Event()

    @pc.on("track")
    def on_track(track):
        async def consume():
            while True:
                try:
                    await track.recv()
                except Exception:
                    return
                decoded["frames"] += 1
        asyncio.ensure_future(consume())

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected":
            connected.set()

    pc.addTransceiver(ToneTrack(), direction="sendrecv")
    t0 = time.monotonic()
    await pc.setLocalDescription(await pc.createOffer())
    emit({"type": "offer", "sdp": pc.localDescription.sdp})

    line = await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
    answer = json.loads(line)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
    await asyncio.wait_for(connected.wait(), timeout=20)
    emit({"event": "connected", "ms": (time.monotonic() - t0) * 1000})

    await asyncio.sleep(duration)
    received = sent = 0
    ssrc = 0
    stats = await pc.getStats()
    for s in stats.values():
        if s.type == "inbound-rtp":
            received += s.packetsReceived
        if s.type == "outbound-rtp":
            sent += s.packetsSent
            ssrc = s.ssrc
    emit({"event": "stats", "packetsReceived": received, "packetsSent": sent, "framesDecoded": decoded["frames"], "ssrc": ssrc})
    await pc.close()


if __name__ == "__main__":
    asyncio.run(main())
