#!/usr/bin/env python3
"""aiortc peer for libotsession's interop test (driven by OTTransportTests.AiortcInteropTests).

Modes: (default) aiortc offers and we answer; `answer` we offer and aiortc answers; `pair` two aiortc peers
(setup-time reference); its tracks also serve aiortc_session.py. Protocol on stdin/stdout, one JSON object per
line (the offering side's description first):
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


class PacedTrack(MediaStreamTrack):
    """Delivers `make(index)` in real time, one frame every `period` seconds."""

    def __init__(self, period):
        super().__init__()
        self.period = period
        self.index = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        delay = self.start + self.index * self.period - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        frame = self.make(self.index)
        self.index += 1
        return frame


def audio_frame(samples, index):
    """A 20 ms 48 kHz mono s16 frame holding `samples` (960 int16), numbered `index`."""
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = 48000
    frame.pts = index * 960
    frame.time_base = fractions.Fraction(1, 48000)
    return frame


class ToneTrack(PacedTrack):
    """20 ms frames of an 870 Hz square wave, 48 kHz mono s16."""
    kind = "audio"

    def __init__(self):
        super().__init__(960 / 48000)

    def make(self, index):
        return audio_frame(((np.arange(960) * 2 // 55) % 2 * 0x2000).astype(np.int16), index)


class SineTrack(PacedTrack):
    """20 ms frames of a 440 Hz sine, 48 kHz mono s16 (content the other side checks)."""
    kind = "audio"

    def __init__(self, hz=440.0):
        super().__init__(960 / 48000)
        self.hz = hz

    def make(self, index):
        t = (np.arange(960) + index * 960) / 48000.0
        return audio_frame((8000 * np.sin(2 * np.pi * self.hz * t)).astype(np.int16), index)


class ColorTrack(PacedTrack):
    """320x240 frames of one solid colour (Y=170, U=80, V=200) at 30 fps."""
    kind = "video"

    def __init__(self):
        super().__init__(1 / 30)

    def make(self, index):
        w, h = 320, 240
        yuv = np.empty((h * 3 // 2, w), dtype=np.uint8)
        yuv[:h] = 170
        yuv[h:h + h // 4] = 80
        yuv[h + h // 4:] = 200
        frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
        frame.pts = index * 3000
        frame.time_base = fractions.Fraction(1, 90000)
        return frame


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def read_message():
    """The next JSON line from the test on stdin."""
    return json.loads(await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline))


def when_connected(pc):
    """An event set once `pc` reaches the connected state."""
    event = asyncio.Event()

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected":
            event.set()
    return event


def consume_tracks(pc, on_frame):
    """Reads every remote track to its end, calling `on_frame(track, frame)` for each frame."""
    @pc.on("track")
    def on_track(track):
        async def consume():
            while True:
                try:
                    frame = await track.recv()
                except Exception:
                    return
                on_frame(track, frame)
        asyncio.ensure_future(consume())


async def emit_stats(pc, frames, inbound_kind=None):
    """Reports packets received (of `inbound_kind`, or all), packets sent and our sending SSRC."""
    received = sent = ssrc = 0
    for s in (await pc.getStats()).values():
        if s.type == "inbound-rtp" and inbound_kind in (None, s.kind):
            received += s.packetsReceived
        if s.type == "outbound-rtp":
            sent += s.packetsSent
            ssrc = s.ssrc
    emit({"event": "stats", "packetsReceived": received, "packetsSent": sent, "framesDecoded": frames, "ssrc": ssrc})


async def pair():
    """Two aiortc peers in one process: offer -> both connected, and offer -> first decoded video frame at the
    answerer (a sends solid-colour VP8 video, b receives; audio sendrecv too)."""
    a, b = RTCPeerConnection(), RTCPeerConnection()
    connected = [when_connected(a), when_connected(b)]
    first_frame = asyncio.Event()
    consume_tracks(b, lambda track, frame: first_frame.set() if track.kind == "video" else None)

    a.addTransceiver(ToneTrack(), direction="sendrecv")
    b.addTransceiver(ToneTrack(), direction="sendrecv")
    a.addTransceiver(ColorTrack(), direction="sendonly")
    t0 = time.monotonic()
    await a.setLocalDescription(await a.createOffer())
    await b.setRemoteDescription(a.localDescription)
    await b.setLocalDescription(await b.createAnswer())
    await a.setRemoteDescription(b.localDescription)
    await asyncio.wait_for(asyncio.gather(*(c.wait() for c in connected)), timeout=20)
    connected_ms = (time.monotonic() - t0) * 1000
    await asyncio.wait_for(first_frame.wait(), timeout=20)
    emit({"event": "pair", "ms": connected_ms, "firstFrameMs": (time.monotonic() - t0) * 1000})
    await a.close()
    await b.close()


async def answerer(duration):
    """aiortc answers our offer (audio sendrecv with a tone, video receive-only)."""
    pc = RTCPeerConnection()
    decoded = {"frames": 0}
    connected = when_connected(pc)
    consume_tracks(pc, lambda track, frame: decoded.update(frames=decoded["frames"] + (track.kind == "audio")))

    emit({"event": "ready"})
    offer = await read_message()
    t0 = time.monotonic()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
    pc.addTrack(ToneTrack())
    await pc.setLocalDescription(await pc.createAnswer())
    emit({"type": "answer", "sdp": pc.localDescription.sdp})
    await asyncio.wait_for(connected.wait(), timeout=20)
    emit({"event": "connected", "ms": (time.monotonic() - t0) * 1000})
    await asyncio.sleep(duration)
    await emit_stats(pc, decoded["frames"], inbound_kind="audio")
    await pc.close()


async def offerer(duration):
    """aiortc offers audio sendrecv with a tone; we answer."""
    pc = RTCPeerConnection()
    decoded = {"frames": 0}
    connected = when_connected(pc)
    consume_tracks(pc, lambda track, frame: decoded.update(frames=decoded["frames"] + 1))

    pc.addTransceiver(ToneTrack(), direction="sendrecv")
    t0 = time.monotonic()
    await pc.setLocalDescription(await pc.createOffer())
    emit({"type": "offer", "sdp": pc.localDescription.sdp})
    await pc.setRemoteDescription(RTCSessionDescription(sdp=(await read_message())["sdp"], type="answer"))
    await asyncio.wait_for(connected.wait(), timeout=20)
    emit({"event": "connected", "ms": (time.monotonic() - t0) * 1000})
    await asyncio.sleep(duration)
    await emit_stats(pc, decoded["frames"])
    await pc.close()


async def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "pair":
        await pair()
    elif mode == "answer":
        await answerer(float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)
    else:
        await offerer(float(mode) if mode else 3.0)


if __name__ == "__main__":
    asyncio.run(main())
