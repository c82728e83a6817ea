import COTABI
import Glibc

/// Reading C arguments and writing C results, without ever trapping.
enum CArg {
    /// A required C string argument (nil when NULL or not UTF-8).
    static func string(_ p: UnsafePointer<CChar>?) -> String? {
        guard let p else { return nil }
        return String(validatingCString: p)
    }

    /// Copies `s` and a NUL into `buf` of `size` bytes.
    static func copy(_ s: String, to buf: UnsafeMutablePointer<CChar>?, size: UInt) -> ot_status {
        guard let buf, size > 0 else { return Status.invalidParam }
        let utf8 = Array(s.utf8)
        guard utf8.count < size else { return Status.bufferTooSmall }
        for (i, byte) in utf8.enumerated() { buf[i] = CChar(bitPattern: byte) }
        buf[utf8.count] = 0
        return Status.ok
    }

    static func bool(_ b: Bool) -> ot_bool { b ? 1 : 0 }
}

/// A NUL-terminated copy of a string, owned by a handle object and freed with it.
final class OwnedCString: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<CChar>
    init(_ s: String) {
        if let p = strdup(s) { pointer = p } else {
            pointer = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
            pointer.initialize(to: 0)
        }
    }
    deinit { free(pointer) }
}
