#!/usr/bin/env python3
"""aiortc peer that answers libotsession's offer and echoes its audio and video (driven by
OTMediaTests.PeerConnectionAiortcTests). aiortc decodes what we send (Opus, VP8) and encodes it again
towards us, so the test reads its own test-pattern counters and tone back through aiortc's codecs.

Protocol on stdin/stdout, one JSON object per line:
  <- {"type": "offer", "sdp": ...}        from the test (audio + video sendrecv)
  -> {"type": "answer", "sdp": ...}       candidates on 127.0.0.1 only
  -> {"event": "stats", "videoFrames": n, "width": w, "height": h, "audioFrames": n, "audioHz": f}
     after `duration` seconds (argv[1]) of media, measured on what aiortc decoded from us.

  pair [duration]: two aiortc peers in one process, A sends a video track to B;
  -> {"event": "pair", "ms": offer created -> B decoded its first video frame}
"""
import asyncio
import fractions
import json
import sys
import time

import aioice.ice
import numpy
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack, VideoStreamTrack

# Loopback only: aioice leaves 127.0.0.1 out of host candidates by default.
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Echo(MediaStreamTrack):
    """Passes the remote track's decoded frames back, recording what it saw."""

    def __init__(self, source, stats):
        super().__init__()
        self.kind = source.kind
        self.source = source
        self.stats = stats

    async def recv(self):
        frame = await self.source.recv()
        if self.kind == "video":
            self.stats["videoFrames"] += 1
            self.stats["width"], self.stats["height"] = frame.width, frame.height
        else:
            self.stats["audioFrames"] += 1
            pcm = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0]
            self.stats["pcm"].append(pcm.astype(numpy.float64))
        return frame


def dominant_hz(chunks, rate=48000):
    if len(chunks) < 20:
        return 0.0
    x = numpy.concatenate(chunks[len(chunks) // 2:])  # the settled second half
    spectrum = numpy.abs(numpy.fft.rfft(x * numpy.hanning(len(x))))
    return float(numpy.argmax(spectrum) * rate / len(x))


async def echo(duration):
    offer = json.loads(await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline))
    pc = RTCPeerConnection()
    stats = {"videoFrames": 0, "width": 0, "height": 0, "audioFrames": 0, "pcm": []}

    @pc.on("track")
    def on_track(track):
        pc.addTrack(Echo(track, stats))

    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
    await pc.setLocalDescription(await pc.createAnswer())
    emit({"type": "answer", "sdp": pc.localDescription.sdp})
    await asyncio.sleep(duration)
    emit({"event": "stats", "videoFrames": stats["videoFrames"], "width": stats["width"], "height": stats["height"],
          "audioFrames": stats["audioFrames"], "audioHz": dominant_hz(stats["pcm"])})
    await pc.close()


async def pair():
    """offer -> first decoded video frame for two aiortc peers (the same measure as our pair)."""
    a, b = RTCPeerConnection(), RTCPeerConnection()
    first = asyncio.Event()

    @b.on("track")
    def on_track(track):
        async def consume():
            await track.recv()
            first.set()
        asyncio.ensure_future(consume())

    a.addTrack(VideoStreamTrack())
    t0 = time.monotonic()
    await a.setLocalDescription(await a.createOffer())
    await b.setRemoteDescription(a.localDescription)
    await b.setLocalDescription(await b.createAnswer())
    await a.setRemoteDescription(b.localDescription)
    await asyncio.wait_for(first.wait(), timeout=20)
    emit({"event": "pair", "ms": (time.monotonic() - t0) * 1000})
    await a.close()
    await b.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pair":
        asyncio.run(pair())
    else:
        asyncio.run(echo(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0))
