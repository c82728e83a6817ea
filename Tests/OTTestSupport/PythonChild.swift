import Foundation
import Synchronization

/// A Python script a test runs as a child (the aiortc peers of Tests/interop): its stdin, the JSON lines it prints on
/// stdout, and its stderr (read when it fails).
public struct PythonChild {
    public let process: Process
    public let stdin: Pipe
    public let output: JSONLines
    public let stderr: Pipe

    /// Starts `python3 script args…`.
    public init(_ script: URL, _ args: [String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path] + args
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin; process.standardOutput = stdout; process.standardError = stderr
        try process.run()
        self.stdin = stdin; self.stderr = stderr
        output = JSONLines(stdout.fileHandleForReading)
    }

    /// Stops a child that failed and returns what it wrote on stderr (read to its end once it has exited: reading
    /// a running child's stderr would wait for it forever).
    public static func stopAndReadStderr(_ process: Process, _ stderr: Pipe) -> String {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

/// The lines a child prints, read on a background queue, searched as JSON objects.
public final class JSONLines: @unchecked Sendable {
    public let lines = Mutex<[String]>([])
    private var partial = ""
    public init(_ handle: FileHandle) {
        handle.readabilityHandler = { [self] h in
            let data = h.availableData
            if data.isEmpty { h.readabilityHandler = nil; return }
            partial += String(decoding: data, as: UTF8.self)
            while let nl = partial.firstIndex(of: "\n") {
                let line = String(partial[..<nl])
                partial = String(partial[partial.index(after: nl)...])
                lines.withLock { $0.append(line) }
            }
        }
    }

    /// The first line that is a JSON object whose `key` is the string `value`, waiting up to `timeout` seconds.
    public func json(where key: String, is value: String, timeout: Double = 20) -> [String: Any]? {
        let end = Date().addingTimeInterval(timeout)
        repeat {
            for l in lines.withLock({ $0 }) {
                if let o = try? JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any], o[key] as? String == value { return o }
            }
            usleep(5000)
        } while Date() < end
        return nil
    }
}
