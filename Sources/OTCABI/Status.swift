import COTABI
import OTBase

/// Status values handed back to C.
enum Status {
    static let ok = ot_status(OT_OK.rawValue)
    static let invalidParam = ot_status(OT_ERR_INVALID_PARAM.rawValue)
    static let invalidHandle = ot_status(OT_ERR_INVALID_HANDLE.rawValue)
    static let bufferTooSmall = ot_status(OT_ERR_BUFFER_TOO_SMALL.rawValue)
    static let internalError = ot_status(OT_ERR_INTERNAL.rawValue)

    static func of(_ code: OTErrorCode) -> ot_status { ot_status(code.rawValue) }

    /// The code of a thrown error; a message that says more than the code's summary (which setting, which file) is
    /// logged at warning level, since only the code crosses the C boundary.
    static func of(_ error: OTError) -> ot_status {
        if error.message != error.code.summary { Log.warn("capi", error.description) }
        return of(error.code)
    }

    /// Runs a throwing body; any error becomes its OpenTok code (unknown errors: internal error).
    static func catching(_ body: () throws -> Void) -> ot_status {
        do { try body(); return ok } catch let e as OTError { return of(e) } catch { return internalError }
    }
}

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

/// Carries a C pointer (user_data) into a Sendable closure; the C caller owns what it points to.
struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
