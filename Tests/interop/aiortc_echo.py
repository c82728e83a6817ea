#!/usr/bin/env python3
"""Two aiortc peers in one process, the reference for OTMediaTests.PeerConnectionAiortcTests's setup time:

  pair: A sends a video track to B;
  -> {"event": "pair", "ms": offer created -> B decoded its first video frame}
"""
import asyncio
import json
import sys
import time

import aioice.ice
from aiortc import RTCPeerConnection
from aiortc.mediastreams import VideoStreamTrack

# Loopback only: aioice leaves 127.0.0.1 out of host candidates by default.
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


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
    asyncio.run(pair())
