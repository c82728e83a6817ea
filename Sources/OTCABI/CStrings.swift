import COTABI
import OTBase

/// Process-lifetime C strings for version and status messages.
enum CStrings {
    static let versionString = "0.1.0"
    nonisolated(unsafe) static let version: UnsafePointer<CChar> = intern(versionString)
    nonisolated(unsafe) private static let unknown: UnsafePointer<CChar> = intern("unknown status code")
    nonisolated(unsafe) private static let okMessage: UnsafePointer<CChar> = intern("ok")
    nonisolated(unsafe) private static let messages: [Int32: UnsafePointer<CChar>] = {
        var m: [Int32: UnsafePointer<CChar>] = [:]
        for code in OTErrorCode.allCases { m[code.rawValue] = intern(code.summary) }
        return m
    }()

    static func message(for status: ot_status) -> UnsafePointer<CChar> {
        if status == 0 { return okMessage }
        return messages[status] ?? unknown
    }

    /// A copy of `s` that lives as long as the process.
    static func intern(_ s: String) -> UnsafePointer<CChar> {
        let utf8 = Array(s.utf8CString)
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
        p.initialize(from: utf8, count: utf8.count)
        return UnsafePointer(p)
    }
}
