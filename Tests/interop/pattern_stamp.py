"""libotsession's test-pattern stamp (Sources/OTMedia/TestPatternSource.swift) in numpy, for peers that are not
libotsession: a grid of 13 x 8 square cells one cell in from the top-left corner, one bit each (32-bit frame counter,
56-bit capture time in microseconds, CRC-16/CCITT-FALSE of both), dark 32 / light 224 luma."""
import numpy as np

COLUMNS, ROWS, DARK, LIGHT = 13, 8, 32, 224


def cell_size(width, height):
    """The cell side for a picture size (None: too small to carry the code)."""
    c = min(width // (2 * COLUMNS), height // (2 * ROWS + 4))
    if c >= 16:
        c -= c % 16
    elif c >= 8:
        c -= c % 8
    return c if c >= 4 else None


def crc16(data):
    crc = 0xFFFF
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def _bits(frame_number, micros):
    payload = (frame_number & 0xFFFFFFFF).to_bytes(4, "big") + (micros & (2 ** 56 - 1)).to_bytes(7, "big")
    data = payload + crc16(payload).to_bytes(2, "big")
    return [(b >> (7 - i)) & 1 for b in data for i in range(8)]


def render(width, height, frame_number, micros):
    """A yuv420p picture (numpy, height*3/2 rows of width) of grey with a moving bar and the stamp."""
    yuv = np.full((height * 3 // 2, width), 128, dtype=np.uint8)
    yuv[:height] = 100
    x = (frame_number * 4) % max(1, width - 32)
    yuv[height // 2:height, x:x + 32] = 200
    c = cell_size(width, height)
    if c:
        for i, bit in enumerate(_bits(frame_number, micros)):
            x0, y0 = c + (i % COLUMNS) * c, c + (i // COLUMNS) * c
            yuv[y0:y0 + c, x0:x0 + c] = LIGHT if bit else DARK
    return yuv


def read(yuv, width, height):
    """(frame number, capture time in µs) from a decoded yuv420p picture, or None when no valid code is there."""
    c = cell_size(width, height)
    if not c:
        return None
    inset, threshold = c // 4, (DARK + LIGHT) / 2
    bits = []
    for i in range(COLUMNS * ROWS):
        x0, y0 = c + (i % COLUMNS) * c + inset, c + (i // COLUMNS) * c + inset
        bits.append(1 if yuv[y0:y0 + c - 2 * inset, x0:x0 + c - 2 * inset].mean() > threshold else 0)
    data = bytes(int("".join(map(str, bits[k:k + 8])), 2) for k in range(0, len(bits), 8))
    if crc16(data[:11]) != int.from_bytes(data[11:13], "big"):
        return None
    return int.from_bytes(data[:4], "big"), int.from_bytes(data[4:11], "big")
