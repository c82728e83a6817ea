import OTBase
import Synchronization

/// Writes VP8 frames into an IVF file (the container of libvpx's tools and `ffmpeg -f ivf`):
/// a 32-byte "DKIF" header, then per frame a 12-byte header (size, 64-bit timestamp) and the
/// frame. The frame count in the header is filled in by `close()`. Safe to use from any thread.
public final class IVFWriter: Sendable {
    private struct State {
        var file: RecordingFile
        var frames: UInt32 = 0
    }
    private let state: Mutex<State>
    public let width: Int
    public let height: Int
    /// Timestamps are in units of `timebaseNumerator / timebaseDenominator` seconds.
    public let timebaseNumerator: UInt32
    public let timebaseDenominator: UInt32

    /// Creates (or truncates) `path` for frames of `codec` ("VP8" or "VP9": the header's fourcc VP80 or VP90). The
    /// default timebase 1/90000 s matches RTP video timestamps.
    public init(path: String, width: Int, height: Int, codec: String = "VP8", timebaseNumerator: UInt32 = 1,
                timebaseDenominator: UInt32 = 90_000) throws {
        guard (1...65_535).contains(width), (1...65_535).contains(height), timebaseNumerator > 0, timebaseDenominator > 0,
              ["VP8", "VP9"].contains(codec) else {
            throw OTError(.invalidParameter, "IVF needs VP8 or VP9, a size in 1...65535 and a positive timebase")
        }
        self.width = width; self.height = height
        self.timebaseNumerator = timebaseNumerator; self.timebaseDenominator = timebaseDenominator
        let file = try RecordingFile(path: path)
        var header: [UInt8] = Array("DKIF".utf8)
        header += RecordingFile.le16(0)  // version
        header += RecordingFile.le16(32)  // header size
        header += Array((codec + "0").utf8)
        header += RecordingFile.le16(UInt16(width)) + RecordingFile.le16(UInt16(height))
        header += RecordingFile.le32(timebaseDenominator) + RecordingFile.le32(timebaseNumerator)
        header += RecordingFile.le32(0)  // frame count, patched on close
        header += RecordingFile.le32(0)  // unused
        try file.write(header)
        state = Mutex(State(file: file))
    }

    /// Appends one encoded frame with its timestamp (in timebase units).
    public func write(frame: UnsafeRawBufferPointer, timestamp: UInt64) throws {
        guard frame.count > 0, frame.count <= Int(UInt32.max) else { throw OTError(.invalidParameter, "IVF frame size \(frame.count)") }
        try state.withLock { s in
            try s.file.write(RecordingFile.le32(UInt32(frame.count)) + RecordingFile.le64(timestamp))
            try s.file.write(frame)
            s.frames += 1
        }
    }

    /// Appends one encoded frame held in an array.
    public func write(frame: [UInt8], timestamp: UInt64) throws {
        try frame.withUnsafeBytes { try write(frame: $0, timestamp: timestamp) }
    }

    /// Frames written so far.
    public var frameCount: Int { state.withLock { Int($0.frames) } }

    /// Writes the frame count into the header and closes the file; later writes throw.
    public func close() throws {
        try state.withLock { s in
            guard s.file.isOpen else { return }
            try s.file.patch32(at: 24, s.frames)
            try s.file.close()
        }
    }

    deinit { try? close() }
}
