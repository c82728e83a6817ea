import Foundation
import Glibc
import OTBase
import OTWire

/// A Janus Gateway process (Debian package `janus`) started by the benchmark as a baseline SFU: only the
/// VideoRoom plugin and the plain-HTTP transport, configured in a temporary directory (the system's
/// /etc/janus is not read), HTTP on 127.0.0.1, no STUN/TURN, libnice debugging off, warnings-only log.
///
/// Janus never gathers ICE candidates on a loopback interface (its gathering skips IFF_LOOPBACK), so it runs
/// in `BenchNamespace` and gathers on that namespace's one non-loopback address only.
final class JanusGateway {
    static let binary = "/usr/bin/janus"
    static let libraries = "/usr/lib/x86_64-linux-gnu/janus"

    /// Whether the janus binary and the two modules the benchmark loads are installed.
    static var isInstalled: Bool {
        let fm = FileManager.default
        return fm.isExecutableFile(atPath: binary)
            && fm.fileExists(atPath: "\(libraries)/plugins/libjanus_videoroom.so")
            && fm.fileExists(atPath: "\(libraries)/transports/libjanus_http.so")
    }

    let process = Process()
    let dir: URL
    let api: JanusAPI

    init() throws {
        guard Self.isInstalled else { throw BenchError("janus is not installed (apt-get install janus)") }
        let fm = FileManager.default
        dir = fm.temporaryDirectory.appendingPathComponent("ot-bench-janus-\(getpid())")
        try? fm.removeItem(at: dir)
        for sub in ["conf", "plugins", "transports", "none"] {
            try fm.createDirectory(at: dir.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        // Folders holding only the modules we want, so that no other plugin or transport is loaded.
        try fm.createSymbolicLink(atPath: dir.appendingPathComponent("plugins/libjanus_videoroom.so").path,
                                  withDestinationPath: "\(Self.libraries)/plugins/libjanus_videoroom.so")
        try fm.createSymbolicLink(atPath: dir.appendingPathComponent("transports/libjanus_http.so").path,
                                  withDestinationPath: "\(Self.libraries)/transports/libjanus_http.so")
        let port = try freeLoopbackTCPPort()
        let conf = dir.appendingPathComponent("conf")
        try """
            general: {
                configs_folder = "\(conf.path)"
                plugins_folder = "\(dir.path)/plugins"
                transports_folder = "\(dir.path)/transports"
                events_folder = "\(dir.path)/none"
                loggers_folder = "\(dir.path)/none"
                interface = "127.0.0.1"
                debug_level = 3
                session_timeout = 0
            }
            media: {
                ipv6 = false
            }
            nat: {
                nice_debug = false
                full_trickle = false
                ice_lite = false
                ice_tcp = false
                ice_enforce_list = "\(BenchNamespace.janusInterface)"
            }
            plugins: {}
            transports: {}
            loggers: {}
            events: {}
            """.write(to: conf.appendingPathComponent("janus.jcfg"), atomically: true, encoding: .utf8)
        try """
            general: {
                json = "plain"
                base_path = "/janus"
                http = true
                port = \(port)
                ip = "127.0.0.1"
                https = false
            }
            admin: {
                admin_http = false
                admin_https = false
            }
            """.write(to: conf.appendingPathComponent("janus.transport.http.jcfg"), atomically: true, encoding: .utf8)
        try "general: {\n}\n".write(to: conf.appendingPathComponent("janus.plugin.videoroom.jcfg"), atomically: true, encoding: .utf8)

        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["-C", conf.appendingPathComponent("janus.jcfg").path, "-F", conf.path, "-o", "-N",
                             "-L", dir.appendingPathComponent("janus.log").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        api = JanusAPI(port: port)
        // Wait until the HTTP transport answers.
        let deadline = monotonicSeconds() + 15
        while true {
            if let info = try? api.request("GET", "/janus/info"), info["janus"]?.stringValue == "server_info" { break }
            guard process.isRunning, monotonicSeconds() < deadline else {
                let log = logTail()
                stop()
                throw BenchError("janus did not start (log: \(log))")
            }
            usleep(50_000)
        }
    }

    var pid: pid_t { process.processIdentifier }

    /// The last lines of Janus's log, for error messages.
    func logTail(_ lines: Int = 12) -> String {
        guard let log = try? String(contentsOf: dir.appendingPathComponent("janus.log"), encoding: .utf8) else { return "none" }
        return log.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: dir)
    }

    deinit { stop() }
}

/// A private network namespace for the Janus comparison: its only interfaces are `lo` and a veth pair with
/// both ends inside it, `otb0` (198.18.0.1/30, where Janus gathers) and `otb0p` (198.18.0.2/30, where the
/// clients bind), from the RFC 2544 benchmarking range, so no packet can leave it. libnice pins Janus's
/// sockets to their interface (IP_UNICAST_IF), so Janus's packets cross the veth; the clients' packets to
/// Janus go through the namespace's loopback device. `ot-bench` runs itself again inside it (root only;
/// this kernel has no `dummy` link type).
enum BenchNamespace {
    static let environmentKey = "OT_BENCH_NETNS"
    static let janusInterface = "otb0"
    static let janusAddress = "198.18.0.1"
    static let clientAddress = "198.18.0.2"

    /// Whether this process runs inside a namespace made by `runInside`.
    static var isInside: Bool { ProcessInfo.processInfo.environment[environmentKey] != nil }

    /// Makes a fresh namespace, runs this executable with `arguments` inside it (output passes through),
    /// deletes the namespace and returns the child's exit status.
    static func runInside(_ arguments: [String]) throws -> Int32 {
        let name = "otbench\(getpid())"
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        try run("/usr/sbin/ip", ["netns", "add", name])
        defer { _ = try? run("/usr/sbin/ip", ["netns", "del", name]) }
        let peer = janusInterface + "p"
        try run("/usr/sbin/ip", ["-n", name, "link", "set", "lo", "up"])
        try run("/usr/sbin/ip", ["-n", name, "link", "add", janusInterface, "type", "veth", "peer", "name", peer])
        try run("/usr/sbin/ip", ["-n", name, "addr", "add", "\(janusAddress)/30", "dev", janusInterface])
        try run("/usr/sbin/ip", ["-n", name, "addr", "add", "\(clientAddress)/30", "dev", peer])
        try run("/usr/sbin/ip", ["-n", name, "link", "set", peer, "up"])
        try run("/usr/sbin/ip", ["-n", name, "link", "set", janusInterface, "up"])
        // Packets from Janus arrive on the veth with a source address of this namespace: accept them.
        try run("/usr/sbin/ip", ["netns", "exec", name, "sysctl", "-q", "-w", "net.ipv4.conf.\(peer).accept_local=1"])
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        p.arguments = ["netns", "exec", name, exe] + arguments
        p.environment = ProcessInfo.processInfo.environment.merging([environmentKey: name]) { $1 }
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    private static func run(_ tool: String, _ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw BenchError("\(tool) \(args.joined(separator: " ")) failed (status \(p.terminationStatus); the Janus comparison needs root for a network namespace)")
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and released).
func freeLoopbackTCPPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
    }
    guard ok else { throw BenchError("bind: errno \(errno)") }
    return UInt16(bigEndian: addr.sin_port)
}

/// Janus's JSON API over HTTP on 127.0.0.1 (responses read with `OTWire.HTTPParser`, one connection per request).
struct JanusAPI {
    let port: UInt16

    /// One request; returns the JSON body. `timeout` bounds the whole exchange (long polls take up to 30 s).
    func request(_ method: String, _ path: String, _ body: JSONValue? = nil, timeout: Double = 40) throws -> JSONValue {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
        defer { close(fd) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { throw BenchError("janus HTTP connect to port \(port): errno \(errno)") }
        // HTTP/1.0, so that libmicrohttpd answers without chunked encoding and closes after the body.
        let bytes = body?.serialized() ?? []
        var head = "\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n"
        if body != nil { head += "Content-Type: application/json\r\nContent-Length: \(bytes.count)\r\n" }
        let out = Array((head + "\r\n").utf8) + bytes
        var sentBytes = 0
        while sentBytes < out.count {
            let n = out[sentBytes...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw BenchError("janus HTTP send: errno \(errno)") }
            sentBytes += n
        }
        var received: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else { throw BenchError("janus HTTP \(method) \(path): timed out or failed (errno \(errno))") }
            received += buf[0..<n]
        }
        var parser = HTTPParser(kind: .response, maxBodyBytes: 4 << 20)
        parser.append(received)
        guard let response = try parser.nextResponse() else { throw BenchError("janus HTTP \(method) \(path): incomplete response") }
        guard response.status == 200 else { throw BenchError("janus HTTP \(method) \(path): status \(response.status)") }
        // Without Content-Length the body runs to the end of the connection.
        return try JSONValue.parse(response.headers["Content-Length"] != nil ? response.body : parser.takeLeftover())
    }
}

/// One Janus session: handles attached to the VideoRoom plugin, plugin messages, and the session's events
/// (long-polled), matched to the message that caused them by transaction.
final class JanusSession {
    let api: JanusAPI
    let id: Int64
    private var nextTransaction = 0
    private var events: [JSONValue] = []

    init(_ api: JanusAPI) throws {
        self.api = api
        let r = try api.request("POST", "/janus", ["janus": "create", "transaction": "create"])
        guard case .int(let id)? = r["data"]?["id"] else { throw BenchError("janus create: \(String(decoding: r.serialized(), as: UTF8.self))") }
        self.id = id
    }

    private func transaction() -> String { nextTransaction += 1; return "t\(nextTransaction)" }

    /// Attaches a handle to the VideoRoom plugin.
    func attachVideoRoom() throws -> Int64 {
        let r = try api.request("POST", "/janus/\(id)", ["janus": "attach", "plugin": "janus.plugin.videoroom", "transaction": .string(transaction())])
        guard case .int(let handle)? = r["data"]?["id"] else { throw BenchError("janus attach: \(String(decoding: r.serialized(), as: UTF8.self))") }
        return handle
    }

    /// A plugin request answered at once (e.g. `create`): returns its `plugindata.data`.
    func syncMessage(_ handle: Int64, _ body: JSONValue) throws -> JSONValue {
        let r = try api.request("POST", "/janus/\(id)/\(handle)", ["janus": "message", "body": body, "transaction": .string(transaction())])
        guard r["janus"]?.stringValue == "success", let data = r["plugindata"]?["data"], data["error"] == nil else {
            throw BenchError("janus request \(String(decoding: body.serialized(), as: UTF8.self)): \(String(decoding: r.serialized(), as: UTF8.self))")
        }
        return data
    }

    /// A plugin request answered by an event (e.g. `joinandconfigure`, `start`): returns the event
    /// (`plugindata.data` and the `jsep`, if any).
    func asyncMessage(_ handle: Int64, _ body: JSONValue, jsep: JSONValue? = nil, timeout: Double = 20) throws -> (data: JSONValue, jsep: JSONValue?) {
        let t = transaction()
        var msg: [String: JSONValue] = ["janus": "message", "body": body, "transaction": .string(t)]
        if let jsep { msg["jsep"] = jsep }
        let ack = try api.request("POST", "/janus/\(id)/\(handle)", .object(msg))
        guard ack["janus"]?.stringValue == "ack" else { throw BenchError("janus message: \(String(decoding: ack.serialized(), as: UTF8.self))") }
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline {
            if let i = events.firstIndex(where: { $0["transaction"]?.stringValue == t && $0["janus"]?.stringValue == "event" }) {
                let e = events.remove(at: i)
                guard let data = e["plugindata"]?["data"], data["error"] == nil else {
                    throw BenchError("janus request \(String(decoding: body.serialized(), as: UTF8.self)): \(String(decoding: e.serialized(), as: UTF8.self))")
                }
                return (data, e["jsep"])
            }
            try poll()
        }
        throw BenchError("janus: no answer to \(String(decoding: body.serialized(), as: UTF8.self)) in \(Int(timeout)) s")
    }

    /// Takes the session's pending events (a long poll: waits up to 30 s for the first).
    func poll() throws {
        let r = try api.request("GET", "/janus/\(id)?maxev=20")
        switch r {
        case .array(let list): events += list.filter { $0["janus"]?.stringValue != "keepalive" }
        default: if r["janus"]?.stringValue != "keepalive" { events.append(r) }
        }
    }

    /// Waits (bounded) for an event not claimed by a request, e.g. `webrtcup`; returns and removes it.
    func waitEvent(_ timeout: Double = 20, _ pred: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline {
            if let i = events.firstIndex(where: pred) { return events.remove(at: i) }
            try poll()
        }
        throw BenchError("janus: an awaited event did not come in \(Int(timeout)) s")
    }

    func destroy() { _ = try? api.request("POST", "/janus/\(id)", ["janus": "destroy", "transaction": .string(transaction())]) }
}
