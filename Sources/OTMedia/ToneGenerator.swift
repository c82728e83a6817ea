import OTBase

#if canImport(Glibc)
import Glibc
#endif

/// A phase-continuous sine generator.
public struct ToneGenerator: Sendable {
    public let frequency: Double
    /// Peak amplitude as a fraction of full scale (0…1).
    public let amplitude: Double
    public let settings: AudioDeviceSettings
    private var phase: Double = 0

    public init(frequency: Double, amplitude: Double, settings: AudioDeviceSettings) {
        self.frequency = frequency; self.amplitude = min(max(amplitude, 0), 1); self.settings = settings
    }

    /// Writes the next samples (every channel gets the same value).
    public mutating func fill(_ buffer: UnsafeMutableBufferPointer<Int16>) {
        let step = 2 * Double.pi * frequency / Double(settings.sampleRate)
        let peak = amplitude * 32767
        let ch = settings.channels
        var i = 0
        while i + ch <= buffer.count {
            let s = Int16(clamping: Int((sin(phase) * peak).rounded()))
            for c in 0..<ch { buffer[i + c] = s }
            phase += step
            if phase >= 2 * Double.pi { phase -= 2 * Double.pi }
            i += ch
        }
    }
}
