import OTBase
import Synchronization

/// One input of the `AudioMixer`: a subscriber's decoded audio, pulled at playout time.
public protocol AudioMixerInput: AnyObject, Sendable {
    /// Writes up to `buffer.count` interleaved samples in `settings` and returns how many it wrote;
    /// the mixer treats the rest as silence.
    func pullAudio(into buffer: UnsafeMutableBufferPointer<Int16>, settings: AudioDeviceSettings) -> Int
}

/// Mixes several subscribers' PCM for playout: each render call pulls the same number of samples
/// from every input and adds them with saturation (clipping at ±32767/−32768, never wrapping).
/// It is the render source of the audio device.
public final class AudioMixer: AudioRenderSource {
    private struct State {
        var inputs: [(id: Int, input: any AudioMixerInput)] = []
        var scratch: [Int16] = []
        var accumulator: [Int32] = []
    }
    private let state = Mutex(State())

    public init() {}

    /// Adds or replaces the input with this id (a subscriber's id).
    public func setInput(_ input: any AudioMixerInput, id: Int) {
        state.withLock { s in
            s.inputs.removeAll { $0.id == id }
            s.inputs.append((id, input))
        }
    }

    /// Removes the input with this id; unknown ids are ignored.
    public func removeInput(id: Int) { state.withLock { $0.inputs.removeAll { $0.id == id } } }

    public var inputCount: Int { state.withLock { $0.inputs.count } }

    /// Mixes every input into `buffer`; returns the longest real-audio count of any input.
    public func renderAudio(into buffer: UnsafeMutableBufferPointer<Int16>, settings: AudioDeviceSettings) -> Int {
        state.withLock { s in
            let n = buffer.count
            if s.scratch.count < n { s.scratch = [Int16](repeating: 0, count: n); s.accumulator = [Int32](repeating: 0, count: n) }
            var longest = 0
            s.accumulator.withUnsafeMutableBufferPointer { acc in
                for i in 0..<n { acc[i] = 0 }
                s.scratch.withUnsafeMutableBufferPointer { scratchAll in
                    guard let base = scratchAll.baseAddress else { return }
                    let scratch = UnsafeMutableBufferPointer(start: base, count: n)
                    for (_, input) in s.inputs {
                        let got = min(max(input.pullAudio(into: scratch, settings: settings), 0), n)
                        longest = max(longest, got)
                        for i in 0..<got { acc[i] &+= Int32(scratch[i]) }
                    }
                }
                for i in 0..<n { buffer[i] = Int16(clamping: acc[i]) }
            }
            return longest
        }
    }

    /// Saturating mix of whole buffers (the shorter ones count as silence past their end).
    public static func mix(_ inputs: [[Int16]]) -> [Int16] {
        let n = inputs.map(\.count).max() ?? 0
        var acc = [Int32](repeating: 0, count: n)
        for input in inputs { for (i, v) in input.enumerated() { acc[i] &+= Int32(v) } }
        return acc.map { Int16(clamping: $0) }
    }
}
