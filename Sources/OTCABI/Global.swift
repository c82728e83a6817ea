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

/// Runs the callbacks of poll-mode sessions (`OT_CALLBACK_POLL`: theirs, their publishers' and subscribers') on the
/// calling thread, in order: waits up to `timeout_ms` for one (0: not at all; -1: without limit), then runs every one
/// waiting. `ran` (may be NULL) gets how many ran. OT_ERR_ILLEGAL_STATE when called from inside a callback it runs;
/// OT_ERR_INVALID_PARAM for a timeout below -1. Concurrent callers take turns.
@c(ot_poll) public func ot_poll(_ timeout_ms: Int32, _ ran: UnsafeMutablePointer<UInt>?) -> ot_status {
    guard timeout_ms >= -1 else { return Status.invalidParam }
    guard !PollQueue.shared.isPollingThread else { return Status.of(.illegalState) }
    let n = PollQueue.shared.run(timeoutMillis: timeout_ms)
    ran?.pointee = UInt(n)
    return Status.ok
}

/// A file descriptor that is readable while poll-mode callbacks wait (an eventfd), for a host's own loop (epoll,
/// GLib, asyncio): when readable, call ot_poll(0, NULL). Owned by the library: do not read or close it.
/// OT_ERR_INTERNAL when the kernel gave none (ot_poll still works).
@c(ot_poll_get_fd) public func ot_poll_get_fd(_ fd: UnsafeMutablePointer<Int32>?) -> ot_status {
    guard let fd else { return Status.invalidParam }
    guard PollQueue.shared.fd >= 0 else { return Status.internalError }
    fd.pointee = PollQueue.shared.fd
    return Status.ok
}
