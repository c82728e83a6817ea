#!/usr/bin/env python3
"""Writes the seed corpus for the rtp_vp8 fuzz target (Fuzz/corpus/rtp_vp8/). Deterministic."""
import os, struct

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "rtp_vp8")
os.makedirs(out, exist_ok=True)

def rtp(pt=96, seq=1, ts=3000, ssrc=0x1234, marker=False, csrcs=(), ext=None, payload=b"", pad=0):
    b0 = 0x80 | len(csrcs) | (0x20 if pad else 0) | (0x10 if ext else 0)
    h = struct.pack("!BBHII", b0, (0x80 if marker else 0) | pt, seq, ts, ssrc)
    h += b"".join(struct.pack("!I", c) for c in csrcs)
    if ext:
        profile, data = ext
        data += b"\0" * (-len(data) % 4)
        h += struct.pack("!HH", profile, len(data) // 4) + data
    body = h + payload
    if pad:
        body += b"\0" * (pad - 1) + bytes([pad])
    return body

key = bytes([0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01]) + bytes(range(40))
delta = bytes([0x11, 0x40, 0x00]) + bytes(range(20))
seeds = {
    "key_15bit_pid_onebyte_ext": rtp(seq=100, ext=(0xBEDE, bytes([0x32, 1, 2, 3, 0x51, 0xBE, 0xEF])),
                                    payload=bytes([0x90, 0x80, 0x81, 0x23]) + key),
    "delta_7bit_pid_marker": rtp(seq=101, marker=True, payload=bytes([0x90, 0x80, 0x24]) + delta),
    "continuation_no_ext": rtp(seq=102, payload=bytes([0x00]) + delta),
    "temporal_layers": rtp(seq=103, marker=True, payload=bytes([0x90, 0xE0, 0x81, 0x25, 0x07, 0xA0]) + delta),
    "twobyte_ext_csrc_padding": rtp(seq=104, csrcs=(1, 2), ext=(0x1000, bytes([20, 3, 0x61, 0x75, 0x64, 9, 1, 0x7F])),
                                    payload=bytes([0x10]) + delta, pad=4),
    "opus_payload": rtp(pt=111, seq=7, payload=bytes([0xF8, 0xFF, 0xFE, 0x01, 0x02])),
    "truncated_header": rtp(seq=5)[:9],
    "ext_overrun": rtp(seq=6, ext=(0xBEDE, bytes([0x1F, 0, 0, 0]))),
    "padding_overflow": bytes([0xA0]) + rtp(seq=8, payload=bytes([0x10, 0x11]))[1:-1] + bytes([0xFF]),
    "descriptor_only": rtp(seq=9, payload=bytes([0x90, 0x80, 0x80])),
}
for name, data in seeds.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} files to {out}")
