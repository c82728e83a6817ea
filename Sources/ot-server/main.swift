// ot-server: the session server, a key generator and a token minter.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import OTBase
import OTServer
import OTWire

let usage = """
usage:
  ot-server [--listen HOST:PORT] (--project KEY:SECRET)... [--config FILE] [--max-connections N]
            [--signal-rate N] [--reconnect-grace SECONDS] [--media-host IP] [--verbose]
      Serves the OpenTok REST API and WebSocket signaling (ws://HOST:PORT/v2/signaling), and routes
      media of routed sessions on one UDP port of --media-host (default: HOST, or 127.0.0.1 for 0.0.0.0).
      FILE holds one KEY:SECRET per line (# comments allowed). Default listen: 127.0.0.1:8080.
  ot-server keygen
      Prints a new KEY:SECRET pair (hex secret).
  ot-server token --project KEY:SECRET --session ID [--role R] [--data D] [--t1] [--ttl SECONDS]
      Prints a client token (JWT by default, T1 with --t1).
  ot-server create-session --project KEY:SECRET [--relayed] [--e2ee]
      Prints a well-formed session id (not registered anywhere: use the REST API for a live server).

"""

func fail(_ message: String) -> Never {
    FileOutput.stderr("ot-server: \(message)\n")
    exit(2)
}

/// The command line, consumed flag by flag.
struct Args {
    var list: [String]
    var first: String? { list.first }
    var isEmpty: Bool { list.isEmpty }
    func contains(_ f: String) -> Bool { list.contains(f) }
    mutating func removeFirst() { list.removeFirst() }
    mutating func value(_ flag: String) -> String {
        guard let i = list.firstIndex(of: flag), i + 1 < list.count else { fail("\(flag) needs a value\n\(usage)") }
        let v = list[i + 1]
        list.removeSubrange(i...(i + 1))
        return v
    }
    mutating func values(_ flag: String) -> [String] {
        var out: [String] = []
        while list.contains(flag) { out.append(value(flag)) }
        return out
    }
    mutating func flag(_ f: String) -> Bool {
        guard let i = list.firstIndex(of: f) else { return false }
        list.remove(at: i)
        return true
    }
}

func project(_ s: String) -> Project {
    do { return try Project.parse(s) } catch { fail("\(error)") }
}

var args = Args(list: Array(CommandLine.arguments.dropFirst()))

switch args.first {
case "keygen":
    let p = Project.generate()
    print("\(p.apiKey):\(p.secret)")
case "token":
    args.removeFirst()
    let p = project(args.value("--project"))
    let session = args.value("--session")
    let roleName = args.contains("--role") ? args.value("--role") : "publisher"
    guard let role = SessionRole(rawValue: roleName) else { fail("unknown role \(roleName)") }
    let data = args.contains("--data") ? args.value("--data") : nil
    let ttl = args.contains("--ttl") ? Int64(args.value("--ttl")) ?? 0 : ClientToken.defaultLifetime
    let format: TokenFormat = args.flag("--t1") ? .t1 : .jwt
    guard args.isEmpty else { fail("unexpected arguments: \(args.list)\n\(usage)") }
    let now = wallClockMillis() / 1000
    do {
        print(try ClientToken(apiKey: p.apiKey, sessionId: session, role: role, createTime: now, expireTime: now + ttl,
                              connectionData: data, format: format).mint(secret: p.secret))
    } catch { fail("\(error)") }
case "create-session":
    args.removeFirst()
    let p = project(args.value("--project"))
    print(SessionID(apiKey: p.apiKey, createTimeMillis: wallClockMillis(), relayed: args.flag("--relayed"), e2ee: args.flag("--e2ee")).string)
case "-h", "--help", "help":
    print(usage, terminator: "")
default:
    var projects = args.values("--project").map(project)
    if args.contains("--config") {
        let path = args.value("--config")
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
        for line in text.split(separator: "\n") {
            let l = line.trimmingCharacters(in: .whitespaces)
            if l.isEmpty || l.hasPrefix("#") { continue }
            projects.append(project(l))
        }
    }
    let listen = args.contains("--listen") ? args.value("--listen") : "127.0.0.1:8080"
    var limits = ServerLimits()
    if args.contains("--max-connections") { limits.maxConnectionsPerSession = Int(args.value("--max-connections")) ?? limits.maxConnectionsPerSession }
    if args.contains("--signal-rate") {
        let r = Double(args.value("--signal-rate")) ?? limits.signalsPerSecond
        limits.signalsPerSecond = r; limits.signalBurst = 2 * r
    }
    if args.contains("--reconnect-grace") { limits.reconnectGrace = .seconds(Int(args.value("--reconnect-grace")) ?? 10) }
    let mediaHost = args.contains("--media-host") ? args.value("--media-host") : nil
    if args.flag("--verbose") { Log.level = .info }
    guard args.isEmpty else { fail("unexpected arguments: \(args.list)\n\(usage)") }
    guard !projects.isEmpty else { fail("at least one --project KEY:SECRET (or --config FILE) is needed\n\(usage)") }
    guard let colon = listen.lastIndex(of: ":"), let port = UInt16(listen[listen.index(after: colon)...]) else { fail("bad --listen \(listen)") }
    let server = SessionServer(.init(host: String(listen[..<colon]), port: port, projects: projects, limits: limits))
    do {
        let bound = try server.start()
        FileHandle.standardOutput.write(Data("ot-server listening on http://\(listen[..<colon]):\(bound) (signaling ws://\(listen[..<colon]):\(bound)\(SessionServer.signalingPath))\n".utf8))
    } catch { fail("\(error)") }
    signal(SIGPIPE, SIG_IGN)
    let stop = DispatchSemaphore(value: 0)
    var sources: [DispatchSourceSignal] = []
    for sig in [SIGINT, SIGTERM] {
        signal(sig, SIG_IGN)
        let src = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        src.setEventHandler { stop.signal() }
        src.resume()
        sources.append(src)
    }
    // The media router's IO thread starts after the signal sources exist (libdispatch must see SIGINT/SIGTERM).
    let host = mediaHost ?? (listen[..<colon] == "0.0.0.0" ? "127.0.0.1" : String(listen[..<colon]))
    guard let ip = IPAddress(host) else { fail("bad --media-host \(host): an IP address clients can reach is needed") }
    do {
        let router = try MediaRouter(bind: TransportAddress(ip: ip, port: 0))
        server.mediaRouting = router
        FileHandle.standardOutput.write(Data("ot-server media router on udp \(router.endpoint.address)\n".utf8))
    } catch { fail("media router: \(error)") }
    stop.wait()
    server.stop()
    sources.forEach { $0.cancel() }
}
