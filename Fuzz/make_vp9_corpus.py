#!/usr/bin/env python3
"""Writes the seed corpus for the rtp_vp9 fuzz target (Fuzz/corpus/rtp_vp9/). Deterministic.

VP9 RTP packets (RFC 9628) with their descriptors as the senders we meet write them: our VP9Packetizer and
libwebrtc's single-layer stream (non-flexible, 15-bit picture id, SS with the resolution and a group of one frame on
a keyframe), Chromium's SVC in flexible mode (layer indices, P_DIFF references, SS of three spatial layers), libvpx's
non-flexible temporal layers (TL0PICIDX), a 7-bit picture id; the keyframes start with a VP9 uncompressed header
(profile 0, sync code, BT.601, 320x240). Then broken ones: truncated descriptors, a descriptor without data, four
references, an SS that runs past the end."""
import os, struct

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "rtp_vp9")
os.makedirs(out, exist_ok=True)

def rtp(payload, seq, ts=90000, marker=False, pt=98, ssrc=0x9999):
    return struct.pack("!BBHII", 0x80, (0x80 if marker else 0) | pt, seq, ts, ssrc) + payload

I, P, L, F, B, E, V, Z = 0x80, 0x40, 0x20, 0x10, 0x08, 0x04, 0x02, 0x01
def pid15(n): return bytes([0x80 | (n >> 8) & 0x7F, n & 0xFF])
def layer(tid, sid=0, u=False, d=False): return bytes([tid << 5 | (0x10 if u else 0) | sid << 1 | (1 if d else 0)])
def ss(sizes, group=None):
    b = bytes([(len(sizes) - 1) << 5 | 0x10 | (0x08 if group is not None else 0)])
    b += b"".join(struct.pack("!HH", w, h) for w, h in sizes)
    if group is not None:
        b += bytes([len(group)]) + b"".join(bytes([t << 5 | (0x10 if u else 0) | len(refs) << 2]) + bytes(refs)
                                           for t, u, refs in group)
    return b

key_header = bytes([0x82, 0x49, 0x83, 0x42, 0x20, 0x13, 0xF0, 0x0E, 0xF0])
key = key_header + bytes(range(60))
delta = bytes([0x86, 0x00]) + bytes(range(30))
seeds = {
    # Ours and libwebrtc's single layer: a keyframe in two packets, then a one-packet delta frame.
    "key_first_ss_group": rtp(bytes([I | B | V]) + pid15(300) + ss([(320, 240)], [(0, False, [1])]) + key[:40], seq=1),
    "key_last": rtp(bytes([I | E]) + pid15(300) + key[40:], seq=2, marker=True),
    "delta_single_packet": rtp(bytes([I | P | B | E]) + pid15(301) + delta, seq=3, ts=93000, marker=True),
    # Chromium SVC (flexible mode): an L3 keyframe's base layer with the SS of three layers, an upper layer that
    # depends on it, and a delta frame referencing two earlier pictures.
    "flexible_key_ss_3_layers": rtp(bytes([I | L | F | B | E | V]) + pid15(0x7FFF) + layer(0) +
                                    ss([(320, 180), (640, 360), (1280, 720)]) + key, seq=10, ts=180000),
    "flexible_upper_layer": rtp(bytes([I | L | F | B | E | Z]) + pid15(0x7FFF) + layer(0, sid=2, d=True) + key, seq=11,
                                ts=180000, marker=True),
    "flexible_delta_two_refs": rtp(bytes([I | P | L | F | B | E]) + pid15(1) + layer(2, u=True) + bytes([1 << 1 | 1, 2 << 1]) +
                                   delta, seq=12, ts=183000, marker=True),
    # libvpx's non-flexible temporal layers: layer indices and TL0PICIDX.
    "nonflexible_tl0picidx": rtp(bytes([I | P | L | B | E]) + pid15(7) + layer(1, u=True) + bytes([42]) + delta, seq=20,
                                 marker=True),
    "pid_7bit": rtp(bytes([I | P | B | E, 0x35]) + delta, seq=21, marker=True),
    "no_pid_middle_packet": rtp(bytes([P]) + delta, seq=22),
    # Broken.
    "descriptor_only": rtp(bytes([I | B]) + pid15(5), seq=30),
    "four_references": rtp(bytes([I | P | F | B | E]) + pid15(6) + bytes([3, 5, 7, 9]) + delta, seq=31),
    "ss_past_the_end": rtp(bytes([I | B | V]) + pid15(8) + bytes([0xF0 | 0x08, 0x05, 0x00]), seq=32),
    "group_past_the_end": rtp(bytes([I | B | V]) + pid15(9) + bytes([0x08, 0xFF, 0x0C]), seq=33),
    "truncated_pid": rtp(bytes([I | B, 0x81]), seq=34),
}
for name, data in seeds.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} files to {out}")
