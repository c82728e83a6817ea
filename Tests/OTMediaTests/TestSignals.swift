import Foundation
@testable import OTMedia

/// A moving test picture: a diagonal gradient that scrolls and a bright square that moves, at a given time index.
func movingPicture(width: Int, height: Int, t: Int) -> VideoFrame {
    var f = VideoFrame(width: width, height: height, timestampMicros: Int64(t) * 33_333)
    let c = VideoFrame.chromaSize(width: width, height: height)
    let bx = (t * 7) % max(width - 32, 1), by = (t * 3) % max(height - 32, 1)
    for y in 0..<height {
        for x in 0..<width {
            var v = 16 + ((x + 2 * y + 4 * t) % 200)
            if x >= bx && x < bx + 32 && y >= by && y < by + 32 { v = 235 }
            f.y[y * width + x] = UInt8(v)
        }
    }
    for y in 0..<c.height {
        for x in 0..<c.width {
            f.u[y * c.width + x] = UInt8(64 + (x + t) % 128)
            f.v[y * c.width + x] = UInt8(64 + (y * 2 + t) % 128)
        }
    }
    return f
}

/// The same picture as NV12 planes (Y, interleaved UV).
func nv12Planes(_ f: VideoFrame) -> (y: [UInt8], uv: [UInt8]) {
    var uv: [UInt8] = []
    uv.reserveCapacity(f.u.count * 2)
    for i in 0..<f.u.count { uv.append(f.u[i]); uv.append(f.v[i]) }
    return (f.y, uv)
}

/// PSNR in dB of one plane (tight strides assumed for `ref`; `test` read with its stride).
func planePSNR(_ ref: [UInt8], _ test: [UInt8], width: Int, height: Int, refStride: Int, testStride: Int) -> Double {
    var se = 0.0
    for y in 0..<height {
        for x in 0..<width {
            let d = Double(ref[y * refStride + x]) - Double(test[y * testStride + x])
            se += d * d
        }
    }
    let mse = se / Double(width * height)
    return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
}

/// Luma PSNR of a decoded frame against its source.
func lumaPSNR(_ ref: VideoFrame, _ test: VideoFrame) -> Double {
    guard ref.width == test.width, ref.height == test.height else { return 0 }
    return planePSNR(ref.y, test.y, width: ref.width, height: ref.height, refStride: ref.strideY, testStride: test.strideY)
}

/// Interleaved sine tones, one frequency per channel, at amplitude 8000.
func tone(frequencies: [Double], sampleRate: Int = 48_000, startSample: Int, count: Int) -> [Int16] {
    var out: [Int16] = []
    out.reserveCapacity(count * frequencies.count)
    for i in 0..<count {
        for f in frequencies {
            out.append(Int16(8000 * sin(2 * Double.pi * f * Double(startSample + i) / Double(sampleRate))))
        }
    }
    return out
}

/// Relative power at one frequency (Goertzel) of one channel of interleaved samples.
func goertzel(_ samples: [Int16], channels: Int = 1, channel: Int = 0, frequency: Double, sampleRate: Int = 48_000) -> Double {
    let k = 2 * cos(2 * Double.pi * frequency / Double(sampleRate))
    var s1 = 0.0, s2 = 0.0
    var n = 0
    var i = channel
    while i < samples.count {
        let s = Double(samples[i]) + k * s1 - s2
        s2 = s1; s1 = s
        i += channels; n += 1
    }
    return (s1 * s1 + s2 * s2 - k * s1 * s2) / Double(max(n, 1))
}

/// Frequency estimated from positive-going zero crossings.
func zeroCrossingFrequency(_ samples: [Int16], channels: Int = 1, channel: Int = 0, sampleRate: Int = 48_000) -> Double {
    var crossings = 0
    var prev = samples[channel]
    var i = channel + channels
    var n = 1
    while i < samples.count {
        if prev < 0 && samples[i] >= 0 { crossings += 1 }
        prev = samples[i]; i += channels; n += 1
    }
    return Double(crossings) * Double(sampleRate) / Double(n)
}
