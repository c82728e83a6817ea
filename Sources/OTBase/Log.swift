import Synchronization

/// Severity of a log line; raw values match the C ABI's `ot_log_level`.
public enum LogLevel: Int32, Sendable, Comparable {
    case disabled = 0, error = 1, warn = 2, info = 3, debug = 4, trace = 5
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// The process-wide logger. Lines at or below `level` go to `sink`
/// (stderr when none is set). Cheap when a level is off: the message closure is not evaluated.
public enum Log {
    public typealias Sink = @Sendable (LogLevel, String) -> Void

    private static let state = Mutex<(level: LogLevel, sink: Sink?)>((.warn, nil))

    /// The most verbose level that is written.
    public static var level: LogLevel {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }

    /// Replaces where log lines go; `nil` restores stderr.
    public static func setSink(_ sink: Sink?) { state.withLock { $0.sink = sink } }

    public static func error(_ tag: String, _ message: @autoclosure () -> String) { write(.error, tag, message) }
    public static func warn(_ tag: String, _ message: @autoclosure () -> String) { write(.warn, tag, message) }
    public static func info(_ tag: String, _ message: @autoclosure () -> String) { write(.info, tag, message) }
    public static func debug(_ tag: String, _ message: @autoclosure () -> String) { write(.debug, tag, message) }
    public static func trace(_ tag: String, _ message: @autoclosure () -> String) { write(.trace, tag, message) }

    /// `s` made safe to write into a log line: control characters (C0, DEL, C1, the Unicode line and paragraph
    /// separators and the bidirectional overrides) are written as `\u{..}` escapes (backslashes doubled), so no input can forge a line or drive a
    /// terminal; cut to `max` characters with `…`.
    public static func escaped(_ s: String, max: Int = 1000) -> String {
        var out = ""
        var n = 0
        for u in s.unicodeScalars {
            if n >= max { out += "…"; break }
            n += 1
            switch u.value {
            case 0x5C: out += "\\\\"
            case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: out += "\\u{" + String(u.value, radix: 16) + "}"
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }

    private static func write(_ lvl: LogLevel, _ tag: String, _ message: () -> String) {
        let (current, sink) = state.withLock { ($0.level, $0.sink) }
        guard lvl != .disabled, lvl <= current else { return }
        let line = "[\(tag)] \(message())"
        if let sink { sink(lvl, line) } else { FileOutput.stderr("otsession \(lvl): \(line)\n") }
    }
}
