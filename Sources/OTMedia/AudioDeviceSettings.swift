import OTBase

/// Sample rate and channel count of one direction of an audio device.
public struct AudioDeviceSettings: Sendable, Equatable {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int = 48_000, channels: Int = 1) {
        self.sampleRate = sampleRate; self.channels = channels
    }

    /// Throws `invalidParameter` unless the rate is 8–192 kHz and there are 1 or 2 channels.
    public func validate() throws {
        guard (8_000...192_000).contains(sampleRate), (1...2).contains(channels) else {
            throw OTError(.invalidParameter, "audio settings \(sampleRate) Hz × \(channels) channels are not supported")
        }
    }

    /// Interleaved samples in `millis` milliseconds.
    public func samples(millis: Int) -> Int { sampleRate * millis / 1000 * channels }
}
