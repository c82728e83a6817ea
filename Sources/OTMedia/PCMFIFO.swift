import OTBase
import Synchronization

/// A bounded, thread-safe FIFO of PCM samples: a push-style producer (a decoder thread) writes,
/// the mixer pulls. When full, the oldest samples are dropped so playout latency stays bounded; with a backlog
/// limit, a pull that finds more than `limit` samples waiting first drops the oldest down to `target`, so a
/// device that started late or a producer that caught up after a stall does not add latency for good.
public final class PCMFIFO: AudioMixerInput {
    private struct State {
        var ring: [Int16]
        var head = 0
        var count = 0
        var dropped = 0
        var underrun = 0
    }
    private let state: Mutex<State>
    public let capacity: Int

    /// The backlog a pull trims (`limit`) and what it keeps (`target`), in samples.
    public let backlog: (limit: Int, target: Int)?

    /// `capacity` in samples (for example 200 ms: `settings.samples(millis: 200)`); `backlog`, when given, the
    /// waiting samples above which a pull drops the oldest down to its target (0 ≤ target ≤ limit).
    public init(capacity: Int, backlog: (limit: Int, target: Int)? = nil) {
        self.capacity = max(1, capacity)
        self.backlog = backlog.map { b in (max(0, b.limit), min(max(0, b.target), max(0, b.limit))) }
        state = Mutex(State(ring: [Int16](repeating: 0, count: max(1, capacity))))
    }

    /// Appends samples, dropping the oldest ones that no longer fit.
    public func write(_ samples: UnsafeBufferPointer<Int16>) {
        state.withLock { s in
            let cap = capacity
            var input = samples
            if input.count > cap {
                s.dropped += input.count - cap
                input = UnsafeBufferPointer(rebasing: input[(input.count - cap)...])
            }
            let overflow = s.count + input.count - cap
            if overflow > 0 {
                s.head = (s.head + overflow) % cap
                s.count -= overflow
                s.dropped += overflow
            }
            var tail = (s.head + s.count) % cap
            for v in input { s.ring[tail] = v; tail += 1; if tail == cap { tail = 0 } }
            s.count += input.count
        }
    }

    /// Appends samples from an array.
    public func write(_ samples: [Int16]) { samples.withUnsafeBufferPointer { write($0) } }

    /// Samples waiting.
    public var count: Int { state.withLock { $0.count } }
    /// Samples dropped on overflow and missing on underrun so far.
    public var counters: (dropped: Int, underrun: Int) { state.withLock { ($0.dropped, $0.underrun) } }

    public func pullAudio(into buffer: UnsafeMutableBufferPointer<Int16>, settings: AudioDeviceSettings) -> Int {
        state.withLock { s in
            if let backlog, s.count > backlog.limit {
                // Keep whole frames of `settings`' channels so the channels stay in step.
                let ch = max(1, settings.channels)
                let drop = (s.count - backlog.target) / ch * ch
                s.head = (s.head + drop) % capacity
                s.count -= drop
                s.dropped += drop
            }
            let n = min(buffer.count, s.count)
            for i in 0..<n { buffer[i] = s.ring[(s.head + i) % capacity] }
            s.head = (s.head + n) % capacity
            s.count -= n
            s.underrun += buffer.count - n
            return n
        }
    }
}
