import COTAllocCounter
import Glibc
import OTMedia

/// Wall-clock and this thread's CPU time, in seconds.
struct Stopwatch {
    private var wall0 = timespec(), cpu0 = timespec()
    init() {
        clock_gettime(CLOCK_MONOTONIC, &wall0)
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0)
    }
    private static func seconds(_ a: timespec, _ b: timespec) -> Double {
        Double(b.tv_sec - a.tv_sec) + Double(b.tv_nsec - a.tv_nsec) / 1e9
    }
    func elapsed() -> (wall: Double, cpu: Double) {
        var w = timespec(), c = timespec()
        clock_gettime(CLOCK_MONOTONIC, &w)
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c)
        return (Self.seconds(wall0, w), Self.seconds(cpu0, c))
    }
}

/// The monotonic clock in seconds (vDSO, cheap enough to call per packet).
@inline(__always) func monotonicSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// Heap allocations since start (the COTAllocCounter interposer).
func allocations() -> UInt64 { UInt64(ot_alloc_count()) }

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return 0 }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func fmt(_ x: Double, _ digits: Int = 1) -> String {
    var p = 1.0
    for _ in 0..<digits { p *= 10 }
    let r = (x * p).rounded() / p
    var s = "\(r)"
    if let dot = s.firstIndex(of: ".") {
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        if decimals < digits { s += String(repeating: "0", count: digits - decimals) }
    }
    return s
}

func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }

/// A private moving test picture (scrolling diagonal gradient and a moving box), as I420 and as NV12.
struct SyntheticClip {
    let width: Int, height: Int
    var i420: [VideoFrame] = []
    var nv12: [(y: [UInt8], uv: [UInt8])] = []

    init(width: Int, height: Int, frames: Int) {
        self.width = width; self.height = height
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        for t in 0..<frames {
            var f = VideoFrame(width: width, height: height, timestampMicros: Int64(t) * 33_333)
            let bx = (t * 9) % (width - 64), by = (t * 5) % (height - 64)
            for y in 0..<height {
                let row = y * width
                for x in 0..<width {
                    let inBox = x >= bx && x < bx + 64 && y >= by && y < by + 64
                    f.y[row + x] = inBox ? 235 : UInt8(16 + (x + 2 * y + 6 * t) % 200)
                }
            }
            var uv = [UInt8](repeating: 0, count: cw * ch * 2)
            for y in 0..<ch {
                for x in 0..<cw {
                    let u = UInt8(64 + (x + 2 * t) % 128), v = UInt8(64 + (2 * y + t) % 128)
                    f.u[y * cw + x] = u; f.v[y * cw + x] = v
                    uv[2 * (y * cw + x)] = u; uv[2 * (y * cw + x) + 1] = v
                }
            }
            i420.append(f)
            nv12.append((f.y, uv))
        }
    }
}

/// A 48 kHz tone with a slow vibrato, interleaved, in 20 ms frames.
func syntheticAudio(channels: Int, frames: Int) -> [[Int16]] {
    (0..<frames).map { i in
        var out = [Int16](repeating: 0, count: 960 * channels)
        for n in 0..<960 {
            let t = Double(i * 960 + n) / 48_000
            let s = Int16(6000 * sin(2 * Double.pi * (440 + 40 * sin(2 * Double.pi * 0.5 * t)) * t))
            for c in 0..<channels { out[n * channels + c] = s }
        }
        return out
    }
}
