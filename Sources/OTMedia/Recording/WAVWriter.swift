import OTBase
import Synchronization

/// Writes interleaved 16-bit PCM into a WAV (RIFF) file; the sizes in the header are filled in by
/// `close()`. Safe to use from any thread.
public final class WAVWriter: Sendable {
    private struct State {
        var file: RecordingFile
        var dataBytes: UInt64 = 0
    }
    private let state: Mutex<State>
    public let sampleRate: Int
    public let channels: Int

    /// Creates (or truncates) `path`.
    public init(path: String, sampleRate: Int, channels: Int) throws {
        guard (1...384_000).contains(sampleRate), (1...8).contains(channels) else {
            throw OTError(.invalidParameter, "WAV needs a rate in 1...384000 Hz and 1...8 channels")
        }
        self.sampleRate = sampleRate; self.channels = channels
        let file = try RecordingFile(path: path)
        let blockAlign = UInt16(channels * 2)
        var header: [UInt8] = Array("RIFF".utf8) + RecordingFile.le32(36) + Array("WAVE".utf8)
        header += Array("fmt ".utf8) + RecordingFile.le32(16)
        header += RecordingFile.le16(1)  // PCM
        header += RecordingFile.le16(UInt16(channels))
        header += RecordingFile.le32(UInt32(sampleRate))
        header += RecordingFile.le32(UInt32(sampleRate) * UInt32(blockAlign))
        header += RecordingFile.le16(blockAlign) + RecordingFile.le16(16)
        header += Array("data".utf8) + RecordingFile.le32(0)
        try file.write(header)
        state = Mutex(State(file: file))
    }

    /// Appends interleaved samples (a whole number of frames is expected; any count is written).
    public func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        try state.withLock { s in
            guard s.dataBytes + UInt64(samples.count * 2) <= UInt64(UInt32.max - 36) else {
                throw OTError(.invalidParameter, "WAV files are limited to 4 GiB")
            }
            var le = [UInt8](repeating: 0, count: samples.count * 2)
            for (i, v) in samples.enumerated() {
                let u = UInt16(bitPattern: v)
                le[2 * i] = UInt8(u & 0xFF); le[2 * i + 1] = UInt8(u >> 8)
            }
            try s.file.write(le)
            s.dataBytes += UInt64(le.count)
        }
    }

    /// Appends interleaved samples held in an array.
    public func write(_ samples: [Int16]) throws { try samples.withUnsafeBufferPointer { try write($0) } }

    /// Sample frames (samples per channel) written so far.
    public var frameCount: Int { state.withLock { Int($0.dataBytes) / (2 * channels) } }

    /// Writes the sizes into the header and closes the file; later writes throw.
    public func close() throws {
        try state.withLock { s in
            guard s.file.isOpen else { return }
            try s.file.patch32(at: 4, UInt32(36 + s.dataBytes))
            try s.file.patch32(at: 40, UInt32(s.dataBytes))
            try s.file.close()
        }
    }

    deinit { try? close() }
}
