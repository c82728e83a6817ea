import COTABI
import OTBase
import Synchronization

/// The library version as "MAJOR.MINOR.PATCH"; a static string.
@c(ot_version) public func ot_version() -> UnsafePointer<CChar> {
    CStrings.version
}

/// A static English message for a status code (never NULL; unknown codes get "unknown status code").
@c(ot_status_message) public func ot_status_message(_ status: ot_status) -> UnsafePointer<CChar> {
    CStrings.message(for: status)
}

/// Sets the most verbose level written to the log (OT_LOG_DISABLED .. OT_LOG_TRACE).
/// Returns OT_ERR_INVALID_PARAM for any other value.
@c(ot_log_set_level) public func ot_log_set_level(_ level: Int32) -> ot_status {
    guard let lvl = LogLevel(rawValue: level) else { return Status.invalidParam }
    Log.level = lvl
    Log.info("otsession", "log level set to \(lvl)")
    return Status.ok
}

/// Sends log lines to `callback` (with `user_data`) instead of stderr; NULL restores stderr.
/// The message is borrowed for the duration of the call, which comes on the logging thread.
@c(ot_log_set_callback) public func ot_log_set_callback(_ callback: ot_log_callback?, _ user_data: UnsafeMutableRawPointer?) -> ot_status {
    guard let callback else { Log.setSink(nil); return Status.ok }
    let ud = UnsafeSendable(user_data)
    Log.setSink { level, line in
        line.withCString { callback(level.rawValue, $0, ud.value) }
    }
    return Status.ok
}
