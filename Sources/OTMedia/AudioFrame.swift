/// Interleaved signed 16-bit PCM audio.
public struct AudioFrame: Sendable {
    public var samples: [Int16]
    public var sampleRate: Int
    public var channels: Int
    /// Capture time in microseconds.
    public var timestampMicros: Int64

    /// Samples per channel.
    public var frameCount: Int { channels > 0 ? samples.count / channels : 0 }

    public init(samples: [Int16], sampleRate: Int, channels: Int, timestampMicros: Int64 = 0) {
        self.samples = samples; self.sampleRate = sampleRate; self.channels = channels
        self.timestampMicros = timestampMicros
    }
}
