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
