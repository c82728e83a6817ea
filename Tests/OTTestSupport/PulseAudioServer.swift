import Foundation
import XCTest

/// A PulseAudio daemon started by the test in a private runtime directory (its own socket, cookie and state; no
/// default script, so only the modules given here; never exits on idle), with mono 48 kHz null sinks. Works as root,
/// as CI runs: the daemon only warns then. Stopped (and its directory removed) on deinit.
public final class PulseAudioServer {
    let dir: URL
    /// The address libpulse clients take ("unix:/…/native").
    public let server: String
    /// The daemon's process id (it runs detached: pulseaudio closes every inherited descriptor at start, which
    /// Foundation's Process would take for an exit and then block reaping a child that is still running).
    let pid: pid_t

    /// Starts the daemon with one null sink per name (each has a monitor source "NAME.monitor").
    public init(sinks: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/pactl") else {
            throw XCTSkip("pulseaudio and pulseaudio-utils are not installed (tools/setup.sh installs them)")
        }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ot-pulse-\(UInt32.random(in: 0 ... .max))")
        for sub in ["runtime", "state", "home"] {
            try FileManager.default.createDirectory(at: dir.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        let socket = dir.appendingPathComponent("native").path
        server = "unix:" + socket
        var args = ["-n", "--daemonize=yes", "--use-pid-file=yes", "--exit-idle-time=-1", "--system=no", "--realtime=no",
                    "--high-priority=no", "--disable-shm=yes", "--log-target=stderr", "--log-level=error",
                    "-L", "module-native-protocol-unix socket=\(socket) auth-anonymous=1"]
        for name in sinks { args += ["-L", "module-null-sink sink_name=\(name) rate=48000 channels=1"] }
        // The foreground process returns once the daemon has started (or failed to).
        let launcher = Process()
        launcher.executableURL = URL(fileURLWithPath: "/usr/bin/pulseaudio")
        launcher.arguments = args
        launcher.environment = Self.environment(dir: dir, server: server)
        launcher.standardOutput = FileHandle.nullDevice
        launcher.standardError = FileHandle.nullDevice
        try launcher.run()
        launcher.waitUntilExit()
        let pidText = (try? String(contentsOf: dir.appendingPathComponent("runtime/pid"), encoding: .utf8)) ?? ""
        guard launcher.terminationStatus == 0, let pid = pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            try? FileManager.default.removeItem(at: dir)
            throw XCTSkip("the PulseAudio daemon did not start (exit \(launcher.terminationStatus))")
        }
        self.pid = pid
        let deadline = Date().addingTimeInterval(15)
        while (try? pactl(["info"])) == nil {
            guard Date() < deadline else { throw XCTSkip("the PulseAudio daemon did not answer") }
            usleep(50_000)
        }
    }

    /// The environment of the daemon and of the pactl/pacat/parec the test runs: the private directories only.
    public var environment: [String: String] { Self.environment(dir: dir, server: server) }

    private static func environment(dir: URL, server: String) -> [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": dir.appendingPathComponent("home").path, "XDG_RUNTIME_DIR": dir.path,
         "PULSE_RUNTIME_PATH": dir.appendingPathComponent("runtime").path,
         "PULSE_STATE_PATH": dir.appendingPathComponent("state").path, "PULSE_SERVER": server]
    }

    /// Runs pactl against this server and returns its output; throws when it fails.
    @discardableResult
    public func pactl(_ args: [String]) throws -> String {
        let p = tool("/usr/bin/pactl", args)
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw NSError(domain: "pactl", code: Int(p.terminationStatus)) }
        return String(decoding: data, as: UTF8.self)
    }

    /// A PulseAudio tool (pacat, parec, …) set up to run against this server; the caller runs it.
    public func tool(_ path: String, _ args: [String]) -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.environment = environment
        p.standardError = FileHandle.nullDevice
        return p
    }

    /// The index of the module that made the null sink `name` (for `pactl unload-module`).
    public func moduleIndex(ofSink name: String) throws -> String? {
        try pactl(["list", "short", "modules"]).split(separator: "\n").first { $0.contains("sink_name=\(name) ") }
            .map { String($0.split(separator: "\t")[0]) }
    }

    /// Removes the null sink `name` (and its monitor), as unplugging a sound card would.
    public func unplug(sink name: String) throws {
        guard let index = try moduleIndex(ofSink: name) else { throw NSError(domain: "pactl: no sink \(name)", code: 1) }
        try pactl(["unload-module", index])
    }

    /// Writes mono 48 kHz s16le `samples` to a raw file in the server's directory and returns its path.
    public func rawFile(_ name: String, _ samples: [Int16]) throws -> String {
        let url = dir.appendingPathComponent(name)
        try samples.withUnsafeBytes { try Data($0).write(to: url) }
        return url.path
    }

    /// Plays a raw file into a sink with pacat; returns the running process.
    public func play(_ path: String, into sink: String) throws -> Process {
        let p = tool("/usr/bin/pacat", ["--playback", "--raw", "--rate=48000", "--channels=1", "--format=s16le",
                                        "--latency-msec=20", "--device=\(sink)"])
        p.standardInput = FileHandle(forReadingAtPath: path)
        try p.run()
        return p
    }

    /// Records a source into a raw file with parec until `stop` (SIGINT) is called on the returned process.
    public func record(_ source: String, to name: String) throws -> (process: Process, path: String) {
        let path = dir.appendingPathComponent(name).path
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let p = tool("/usr/bin/parec", ["--raw", "--rate=48000", "--channels=1", "--format=s16le", "--latency-msec=10",
                                        "--device=\(source)"])
        p.standardOutput = FileHandle(forWritingAtPath: path)
        try p.run()
        return (p, path)
    }

    /// Mono s16le samples of a raw file.
    public static func samples(at path: String) -> [Int16] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// Whether the daemon still runs (a zombie left for an init that does not reap counts as gone).
    private var running: Bool {
        guard kill(pid, 0) == 0 else { return false }
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return !(stat.split(separator: ")").last?.trimmingCharacters(in: .whitespaces).hasPrefix("Z") ?? false)
    }

    deinit {
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while running && Date() < deadline { usleep(20_000) }
        if running { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(at: dir)
    }
}
