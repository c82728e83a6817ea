import Foundation
import OTBase
import OTMedia

/// Collects what an audio device captures, with the monotonic time each chunk arrived.
public final class TimedAudioRecorder: AudioCaptureSink, @unchecked Sendable {
    private let lock = NSLock()
    private var _samples: [Int16] = []
    private var chunks: [(at: Int64, count: Int)] = []
    public init() {}

    public var samples: [Int16] { lock.withLock { _samples } }
    public var chunkCount: Int { lock.withLock { chunks.count } }

    /// The first chunk of mono samples whose RMS exceeds `threshold`: the index of its first sample and when it
    /// arrived (µs, monotonic clock); nil while there is none.
    public func onset(rmsAbove threshold: Double) -> (sample: Int, arrivalMicros: Int64)? {
        lock.withLock {
            var start = 0
            for c in chunks {
                let slice = _samples[start..<(start + c.count)]
                let rms = (slice.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(c.count, 1))).squareRoot()
                if rms > threshold { return (start, c.at) }
                start += c.count
            }
            return nil
        }
    }

    public func audioCaptured(_ samples: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings) {
        let now = MonotonicClock.now().micros
        lock.withLock {
            _samples.append(contentsOf: samples)
            chunks.append((now, samples.count))
        }
    }
}
