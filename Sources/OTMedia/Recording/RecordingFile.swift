#if canImport(Glibc)
import Glibc
#endif
import OTBase

/// A binary output file for the recording writers: little-endian fields, patching of header
/// fields on close. Errors carry the path and the C library's reason.
/// Unchecked Sendable: the writers only touch it under their lock.
struct RecordingFile: @unchecked Sendable {
    let path: String
    private var file: UnsafeMutablePointer<FILE>?

    init(path: String) throws {
        guard let f = fopen(path, "wb") else {
            throw OTError(.invalidParameter, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.file = f
    }

    var isOpen: Bool { file != nil }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let file else { throw OTError(.illegalState, "\(path) is closed") }
        guard bytes.count > 0 else { return }
        guard fwrite(bytes.baseAddress, 1, bytes.count, file) == bytes.count else {
            throw OTError(.internalError, "writing \(path) failed: \(String(cString: strerror(errno)))")
        }
    }

    func write(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try write($0) } }

    /// Overwrites a little-endian UInt32 at `offset`, then returns to the end of the file.
    func patch32(at offset: Int, _ value: UInt32) throws {
        guard let file else { throw OTError(.illegalState, "\(path) is closed") }
        guard fseek(file, offset, SEEK_SET) == 0 else { throw OTError(.internalError, "seeking in \(path) failed") }
        try write(Self.le32(value))
        guard fseek(file, 0, SEEK_END) == 0 else { throw OTError(.internalError, "seeking in \(path) failed") }
    }

    /// Flushes and closes; a second call does nothing.
    mutating func close() throws {
        guard let f = file else { return }
        file = nil
        guard fclose(f) == 0 else { throw OTError(.internalError, "closing \(path) failed: \(String(cString: strerror(errno)))") }
    }

    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
}
