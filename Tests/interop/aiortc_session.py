#!/usr/bin/env python3
"""An aiortc client that joins a libotsession session through the real session protocol (docs/protocol.md:
WebSocket signaling, then media through the server's router or peer to peer), as a user's Python bot would.
Driven by test_aiortc_session.py; one JSON object per line on stdout.

    aiortc_session.py publish   PORT API_KEY SESSION_ID TOKEN BUNDLE_POLICY SECONDS
    aiortc_session.py subscribe PORT API_KEY SESSION_ID TOKEN BUNDLE_POLICY SECONDS [moved-ids]

publish: publishes a stream (320x240 video whose frames carry libotsession's test-pattern stamp, and a 440 Hz
tone); routed sessions offer it to the router, relayed ones answer each subscriber's offer.
subscribe: subscribes to the first stream of the session and reports what it decoded (with `moved-ids`, its offer
puts the MID header extension at id 2, the audio level at id 7 and adds transport-cc at id 5, as other stacks
number them):
  -> {"event": "joined", "connectionId": ...}
  -> {"event": "published", "streamId": ...}                     (publish)
  -> {"event": "ice", "state": ...}                              (each connection-state change; with "connected", the
                                                                 SRTP profile DTLS agreed: "srtpProfile": "SRTP_...")
  -> {"event": "media", "videoFrames": n, "width": w, "height": h, "stamps": [...], "audioFrames": n, "audioHz": f}
                                                                 (subscribe, at the end)
aiortc keeps its default settings apart from the bundle policy (and host candidates on 127.0.0.1: aioice leaves
loopback out by default), unless the environment variable AIORTC_SRTP_PROFILES names the SRTP profiles it may offer
and accept (OpenSSL names, colon-separated, e.g. SRTP_AES128_CM_SHA1_80; aiortc's default is both AEAD_AES_GCM ones and
that one, and it picks AEAD_AES_128_GCM with us).
"""
import asyncio
import base64
import fractions
import hashlib
import json
import os
import struct
import sys
import time
import uuid

import av
import numpy as np
from aiortc import RTCBundlePolicy, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc import rtcdtlstransport
from aiortc.sdp import candidate_from_sdp

import pattern_stamp
from aiortc_peer import PacedTrack, SineTrack  # loopback host candidates only, as there



def restrict_srtp_profiles(names):
    """Keeps only the profiles `names` lists in aiortc's list (every DTLS transport made after this offers those)."""
    kept = [p for p in rtcdtlstransport.SRTP_PROFILES if p.openssl_profile.decode() in names]
    assert kept, f"aiortc has none of the SRTP profiles {names}"
    rtcdtlstransport.SRTP_PROFILES[:] = kept


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Signaling:
    """The client side of docs/protocol.md over asyncio: masked text frames out, pings answered."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.next_id = 1

    @classmethod
    async def open(cls, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET /v2/signaling HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        assert accept in head
        return cls(reader, writer)

    def _frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n) if n < 126 else struct.pack("!BBH", 0x80 | opcode, 0xFE, n)
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, obj):
        self._frame(1, json.dumps(obj).encode())

    def request(self, obj):
        obj = dict(obj, id=self.next_id)
        self.next_id += 1
        self.send(obj)
        return obj["id"]

    async def recv(self):
        """The next JSON message (pings are answered on the way)."""
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(n)
            op = b0 & 0x0F
            if op == 1:
                return json.loads(payload)
            if op == 9:
                self._frame(10, payload)
            elif op == 8:
                raise ConnectionError("server closed the socket")


class StampedTrack(PacedTrack):
    """320x240 frames at 30 fps carrying libotsession's test-pattern stamp (frame number, capture time)."""
    kind = "video"

    def __init__(self):
        super().__init__(1 / 30)

    def make(self, index):
        frame = av.VideoFrame.from_ndarray(pattern_stamp.render(320, 240, index, int(time.monotonic() * 1e6)), format="yuv420p")
        frame.pts, frame.time_base = index * 3000, fractions.Fraction(1, 90000)
        return frame


class Client:
    def __init__(self, sig, policy):
        self.sig = sig
        self.config = RTCConfiguration(bundlePolicy=RTCBundlePolicy(policy))
        self.pcs = {}       # peerId -> RTCPeerConnection
        self.replies = {}   # request id -> future
        self.answers = {}   # peerId -> future
        self.streams = asyncio.Queue()
        self.got = {"videoFrames": 0, "width": 0, "height": 0, "stamps": [], "audioFrames": 0, "audio": []}

    def new_pc(self, peer_id):
        pc = RTCPeerConnection(self.config)
        self.pcs[peer_id] = pc

        @pc.on("connectionstatechange")
        def on_state():
            event = {"event": "ice", "peerId": peer_id, "state": pc.connectionState}
            if pc.connectionState == "connected":
                dtls = pc.getTransceivers()[0].receiver.transport
                event["srtpProfile"] = dtls._ssl.get_selected_srtp_profile().decode()
            emit(event)

        @pc.on("track")
        def on_track(track):
            asyncio.ensure_future(self.consume(track))
        return pc

    async def consume(self, track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            if track.kind == "video":
                self.got["videoFrames"] += 1
                self.got["width"], self.got["height"] = frame.width, frame.height
                stamp = pattern_stamp.read(frame.to_ndarray(format="yuv420p"), frame.width, frame.height)
                if stamp is not None:
                    self.got["stamps"].append(stamp[0])
            else:
                self.got["audioFrames"] += 1
                self.got["audio"].append(frame.to_ndarray().reshape(-1)[::len(frame.layout.channels)].astype(np.float64))

    async def call(self, obj):
        rid = self.sig.request(obj)
        self.replies[rid] = asyncio.get_event_loop().create_future()
        try:
            reply = await asyncio.wait_for(self.replies[rid], 15)
        finally:
            del self.replies[rid]
        if "code" in reply:
            raise RuntimeError(f"{obj['type']} refused: {reply}")
        return reply

    async def pump(self):
        while True:
            m = await self.sig.recv()
            t = m.get("type")
            if t == "reply" and m.get("id") in self.replies:
                self.replies[m["id"]].set_result(m)
            elif t == "streamCreated":
                self.streams.put_nowait(m["stream"])
            elif t == "mediaAnswer" and m["peerId"] in self.answers:
                self.answers[m["peerId"]].set_result(m["sdp"])
            elif t == "mediaClose" and m.get("reason") == "refused" and m["peerId"] in self.answers:
                self.answers[m["peerId"]].set_exception(RuntimeError(f"mediaOffer refused by the publisher: {m}"))
            elif t == "mediaOffer":
                asyncio.ensure_future(self.answer_subscriber(m))
            elif t == "mediaCandidate" and m["peerId"] in self.pcs:
                await self.add_candidate(self.pcs[m["peerId"]], m)

    async def add_candidate(self, pc, m):
        if not m["candidate"]:
            return
        c = candidate_from_sdp(m["candidate"].split(":", 1)[1])
        c.sdpMid, c.sdpMLineIndex = m.get("sdpMid"), m.get("sdpMLineIndex")
        if c.sdpMid is None and c.sdpMLineIndex is None:
            c.sdpMLineIndex = 0
        await pc.addIceCandidate(c)

    async def offer(self, peer_id, stream_id, direction, pc, edit=lambda sdp: sdp):
        """Our offer (through `edit`) in a `mediaOffer`; the answer (from the router or the relayed publisher) is
        applied."""
        await pc.setLocalDescription(await pc.createOffer())
        self.answers[peer_id] = asyncio.get_event_loop().create_future()
        await self.call({"type": "mediaOffer", "peerId": peer_id, "streamId": stream_id, "direction": direction,
                         "sdp": edit(pc.localDescription.sdp)})
        sdp = await asyncio.wait_for(self.answers[peer_id], 15)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))

    async def answer_subscriber(self, m):
        """Relayed: a subscriber's offer to our stream; we answer with our tracks."""
        pc = self.new_pc(m["peerId"])
        await pc.setRemoteDescription(RTCSessionDescription(sdp=m["sdp"], type="offer"))
        pc.addTrack(SineTrack())
        pc.addTrack(StampedTrack())
        await pc.setLocalDescription(await pc.createAnswer())
        self.sig.send({"type": "mediaAnswer", "peerId": m["peerId"], "sdp": pc.localDescription.sdp})

    def media_report(self):
        audio = np.concatenate(self.got["audio"][len(self.got["audio"]) // 2:]) if len(self.got["audio"]) > 20 else np.zeros(0)
        hz = 0.0
        if len(audio):
            spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
            hz = float(np.argmax(spectrum[1:]) + 1) * 48000 / len(audio)
        return {"event": "media", "videoFrames": self.got["videoFrames"], "width": self.got["width"],
                "height": self.got["height"], "stamps": self.got["stamps"], "audioFrames": self.got["audioFrames"],
                "audioHz": hz}


def move_extension_ids(sdp):
    """MID at id 2, audio level at id 7, transport-cc added at id 5 (aiortc numbers them 1, 2 and has none)."""
    out = []
    for line in sdp.splitlines():
        if line.startswith("a=extmap:2 urn:ietf:params:rtp-hdrext:ssrc-audio-level"):
            line = line.replace("a=extmap:2 ", "a=extmap:7 ")
        elif line.startswith("a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid"):
            line = line.replace("a=extmap:1 ", "a=extmap:2 ")
            out.append("a=extmap:5 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01")
        out.append(line)
    return "\r\n".join(out) + "\r\n"


async def main(mode, port, api_key, session_id, token, policy, seconds, options):
    sig = await Signaling.open(port)
    sig.request({"type": "connect", "apiKey": api_key, "sessionId": session_id, "token": token, "eventsSuppressed": False})
    connected = await sig.recv()
    assert connected["type"] == "connected", connected
    emit({"event": "joined", "connectionId": connected["connection"]["id"]})
    client = Client(sig, policy)
    for s in connected["streams"]:
        client.streams.put_nowait(s)
    pump = asyncio.ensure_future(client.pump())
    if mode == "publish":
        reply = await client.call({"type": "publish", "stream": {"name": "aiortc", "hasAudio": True, "hasVideo": True,
                                                                 "videoType": "camera", "width": 320, "height": 240}})
        stream_id = reply["stream"]["id"]
        if not connected["relayed"]:
            peer_id = "aiortc-" + uuid.uuid4().hex
            pc = client.new_pc(peer_id)
            pc.addTrack(SineTrack())
            pc.addTrack(StampedTrack())
            await client.offer(peer_id, stream_id, "publish", pc)
        emit({"event": "published", "streamId": stream_id})
        await asyncio.sleep(seconds)
    else:
        stream = await asyncio.wait_for(client.streams.get(), 15)
        peer_id = "aiortc-" + uuid.uuid4().hex
        pc = client.new_pc(peer_id)
        pc.addTransceiver("audio", direction="recvonly")
        pc.addTransceiver("video", direction="recvonly")
        try:
            await client.offer(peer_id, stream["id"], "subscribe", pc, move_extension_ids if "moved-ids" in options else lambda s: s)
        except RuntimeError as e:
            if "refusable" not in options:
                raise
            emit({"event": "refused", "message": str(e)})
        else:
            await asyncio.sleep(seconds)
            emit(client.media_report())
    pump.cancel()
    for pc in client.pcs.values():
        await pc.close()
    sig.send({"type": "disconnect"})


if __name__ == "__main__":
    mode, port, api_key, session_id, token, policy, seconds = sys.argv[1:8]
    if os.environ.get("AIORTC_SRTP_PROFILES"):
        restrict_srtp_profiles(os.environ["AIORTC_SRTP_PROFILES"].split(":"))
    asyncio.run(main(mode, int(port), api_key, session_id, token, policy, float(seconds), sys.argv[8:]))
