#if canImport(Glibc)
import Glibc
#endif
import OTBase
import Synchronization

/// A synthetic camera that plays a file of raw I420 frames (tightly packed Y, U, V planes, one
/// frame after the other, as written by `ffmpeg -pix_fmt yuv420p -f rawvideo`), looping at the end.
public final class RawFileSource: Sendable {
    public let width: Int
    public let height: Int
    /// Frames in the file.
    public let frameCount: Int
    private let fd: Int32
    private let frameBytes: Int

    /// Opens `path`. Throws `invalidParameter` when the file cannot be opened, is empty, or its
    /// size is not a whole number of `width`×`height` I420 frames.
    public init(path: String, width: Int, height: Int) throws {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw OTError(.invalidParameter, "raw frame size \(width)x\(height) is out of range 1...8192")
        }
        let c = VideoFrame.chromaSize(width: width, height: height)
        let frameBytes = width * height + 2 * c.width * c.height
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw OTError(.invalidParameter, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { close(fd); throw OTError(.invalidParameter, "cannot stat \(path)") }
        let size = Int(st.st_size)
        guard size > 0, size % frameBytes == 0 else {
            close(fd)
            throw OTError(.invalidParameter,
                          "\(path) holds \(size) bytes: not a whole number of \(width)x\(height) I420 frames (\(frameBytes) bytes each)")
        }
        self.width = width; self.height = height
        self.fd = fd; self.frameBytes = frameBytes; self.frameCount = size / frameBytes
    }

    deinit { close(fd) }

    /// Frame `index` modulo the frame count, stamped with `timestampMicros`.
    /// Throws `internalError` if the file can no longer be read (for example it was truncated).
    public func frame(at index: Int64, timestampMicros: Int64) throws -> VideoFrame {
        let n = Int64(frameCount)
        let i = ((index % n) + n) % n
        var bytes = [UInt8](repeating: 0, count: frameBytes)
        var done = 0
        while done < frameBytes {
            let got = bytes.withUnsafeMutableBytes { buf -> Int in
                guard let base = buf.baseAddress else { return -1 }
                return pread(fd, base + done, frameBytes - done, off_t(i * Int64(frameBytes) + Int64(done)))
            }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { throw OTError(.internalError, "raw video file read failed at frame \(i)") }
            done += got
        }
        let ySize = width * height
        let c = VideoFrame.chromaSize(width: width, height: height)
        let cSize = c.width * c.height
        return VideoFrame(width: width, height: height, y: Array(bytes[0..<ySize]),
                          u: Array(bytes[ySize..<(ySize + cSize)]), v: Array(bytes[(ySize + cSize)...]),
                          strideY: width, strideU: c.width, strideV: c.width, timestampMicros: timestampMicros)
    }

    /// A capturer that plays the file at `fps`, looping; a read failure stops delivery and is logged once.
    public func capturer(fps: Int = 30, clock: any TimeSource = MonotonicClock()) -> TimedVideoCapturer {
        let failed = Mutex(false)
        return TimedVideoCapturer(settings: VideoCaptureSettings(format: .i420, width: width, height: height, fps: fps),
                                  clock: clock) { [self] index, ts in
            do {
                return CapturedFrame(try frame(at: index, timestampMicros: ts))
            } catch {
                if failed.withLock({ f in defer { f = true }; return !f }) { Log.error("capture", "\(error)") }
                return nil
            }
        }
    }
}
