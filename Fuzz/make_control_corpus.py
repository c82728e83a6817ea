#!/usr/bin/env python3
"""Writes the seed corpus of the control-plane fuzz target (Fuzz/corpus/control/): HTTP requests (with the framing
vectors of RFC 9112), WebSocket frames, signaling messages, JWT claims and T1 data with extreme numbers, session ids.
Every input goes through every control-plane parser (OTWire.FuzzHarness.control). Deterministic."""
import json
import os
import struct

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "control")
os.makedirs(out, exist_ok=True)


def frame(opcode, payload, mask=b"\x01\x02\x03\x04", fin=True):
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    mbit = 0x80 if mask else 0
    head = struct.pack("!BB", b0, mbit | n) if n < 126 else (
        struct.pack("!BBH", b0, mbit | 126, n) if n < 65536 else struct.pack("!BBQ", b0, mbit | 127, n))
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if mask else payload
    return head + (mask or b"") + body


SID = "1_MX4xMjM0NTY3OH5-MTc5NjA0NTI1NjU0NH5hMDhmNGZlNThjNjJhYmFmMDYzOThjOWR-Un5-"
claims = {"iss": "12345678", "ist": "project", "iat": 1796045258, "exp": 1796100000, "session_id": SID,
          "role": "moderator", "scope": "session.connect", "nonce": 409288, "connection_data": "name=a"}
seeds = {
    "http_post.txt": b"POST /session/create HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-OPENTOK-AUTH: a.b.c\r\n\r\nabc",
    "http_pipelined.txt": b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/stats HTTP/1.0\r\nConnection: close\r\n\r\n",
    "http_dup_cl.txt": b"POST /x HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 39\r\n\r\nGET /admin HTTP/1.1\r\nHost: x\r\n\r\n",
    "http_te.txt": b"POST /x HTTP/1.1\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "http_cl_sign.txt": b"POST /x HTTP/1.1\r\nContent-Length: +2\r\n\r\nab",
    "http_cl_huge.txt": b"POST /x HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n",
    "http_response.txt": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n",
    "ws_text.bin": frame(1, json.dumps({"type": "signal", "id": 1, "signalType": "a", "data": "b"}).encode()),
    "ws_fragmented_ping.bin": frame(1, b'{"type":', fin=False) + frame(9, b"p") + frame(0, b'"disconnect"}'),
    "ws_close_reason.bin": frame(8, b"\x03\xe8bye"),
    "ws_huge_length.bin": b"\x82\xff\x7f\xff\xff\xff\xff\xff\xff\xff",
    "ws_server_frame.bin": frame(1, b'{"type":"reply","id":1}', mask=None),
    "connect.json": json.dumps({"type": "connect", "id": 1, "apiKey": "12345678", "sessionId": SID, "token": "T1==x",
                                "eventsSuppressed": False}).encode(),
    "publish.json": json.dumps({"type": "publish", "id": 9223372036854775807, "stream": {
        "name": "cam", "hasAudio": True, "hasVideo": True, "videoType": "camera", "width": 1e19, "height": -1}}).encode(),
    "update.json": b'{"type":"updateStream","id":1,"streamId":"s","width":18446744073709551616,"height":1e300}',
    "connected.json": json.dumps({"type": "connected", "id": 1, "connection": {"id": "c", "creationTime": 1, "data": "d" * 300},
                                  "role": "publisher", "resumeToken": "r", "muteForced": False, "resumed": False,
                                  "relayed": False, "e2ee": False, "streams": [],
                                  "connections": [{"id": f"c{i}", "creationTime": i, "data": "x" * 100} for i in range(8)]}).encode(),
    "roster.json": b'{"type":"roster","connections":[],"streams":[],"last":true}',
    "claims.json": json.dumps(claims).encode(),
    "claims_exp_huge.json": json.dumps(dict(claims, exp=1e19)).encode(),
    "claims_exp_nan.json": json.dumps(dict(claims, exp="nan")).encode(),
    "claims_expire_time.json": json.dumps({k: v for k, v in dict(claims, expire_time="1e300").items() if k != "exp"}).encode(),
    "claims_iat_int_min.json": json.dumps(dict(claims, iat=-9223372036854775808)).encode(),
    "project_auth.json": b'{"ist":"project","iss":"12345678","iat":1796045258,"exp":1e400}',
    "t1_data.txt": f"session_id={SID}&create_time=1796045258&expire_time=1796100000&role=publisher&nonce=1&connection_data=a".encode(),
    "t1_data_huge.txt": f"session_id={SID}&create_time=1e19&expire_time=99999999999999999999&role=publisher".encode(),
    "session_id.txt": SID.encode(),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} files to {out}")
