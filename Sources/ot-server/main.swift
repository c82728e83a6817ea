// ot-server: the session server, a key generator and a token minter.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import OTBase
import OTServer
import OTTransport
import OTWire

let usage = """
usage:
  ot-server [--listen HOST:PORT] [--config FILE] [--project KEY:SECRET]... [--verbose]
            [--tls-cert FILE --tls-key FILE [--tls-allow-plain]]
            [--media-host IP] [--media-port PORT] [--media-advertise IP]
            [--ice-server URL]... [--turn-secret SECRET | --turn-secret-file FILE] [--turn-ttl SECONDS]
            [--max-connections N] [--max-connections-per-token N] [--max-streams-per-connection N]
            [--max-streams-per-session N] [--signal-rate N] [--reconnect-grace SECONDS]
            [--max-sockets N] [--max-sockets-per-address N] [--output-budget-mb N]
            [--request-timeout SECONDS] [--idle-timeout SECONDS] [--connect-timeout SECONDS]
            [--allowed-origin ORIGIN]... [--media-workers N]
      Serves the OpenTok REST API and WebSocket signaling (ws://HOST:PORT/v2/signaling), and routes
      media of routed sessions on one UDP port of --media-host (default: HOST, or 127.0.0.1 for 0.0.0.0, ::
      and localhost).
      HOST is an IPv4 or IPv6 address ([::] for every interface). Default listen: 127.0.0.1:8080.
      Projects (KEY:SECRET) come from FILE (one per line, # comments allowed; keep it mode 600), from the
      environment variable OT_SERVER_PROJECTS (separated by spaces, commas or newlines) and from --project
      (visible to every user of the machine in ps: for tests only).
      --tls-cert/--tls-key: HTTPS and WSS on the same port (PEM chain, leaf first, and its key; TLS 1.2 and
      1.3); SIGHUP reads them again (open sessions carry on). Plain HTTP on that port gets a 400 unless
      --tls-allow-plain.
      --media-port: the router's UDP port (default: any). --media-advertise: the IP clients are told for the
      router (1:1 NAT: the public address mapped to --media-host).
      --ice-server: STUN/TURN URLs each client gets in `connected` (stun:, turn:, turns:); TURN credentials
      are minted per connection with coturn's use-auth-secret secret (--turn-secret, or the first line of
      --turn-secret-file, or OT_SERVER_TURN_SECRET), valid for --turn-ttl (default 86400 s).
      --media-workers N: N media sockets, each with its own thread (one per core); each session's media goes
      through one of them (default 1; with --media-port P, worker i binds P + i).
      Deployment: docs/deploy.md. Limits and their defaults: docs/protocol.md, "Limits".
  ot-server keygen
      Prints a new KEY:SECRET pair (hex secret).
  ot-server token --session ID [--config FILE | --project KEY:SECRET] [--role R] [--data D] [--t1] [--ttl SECONDS]
      Prints a client token (JWT by default, T1 with --t1), signed with the project of the session's api key.
  ot-server create-session [--config FILE | --project KEY:SECRET] [--relayed] [--e2ee]
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

/// An integer flag in `range` (nil: any integer, its range checked by the settings it goes into); fails with a
/// message otherwise.
func intValue(_ args: inout Args, _ flag: String, _ range: ClosedRange<Int>?) -> Int? {
    guard args.contains(flag) else { return nil }
    let v = args.value(flag)
    guard let n = Int(v) else { fail("\(flag) must be an integer, not \(v)") }
    if let range, !range.contains(n) { fail("\(flag) must be an integer from \(range.lowerBound) to \(range.upperBound), not \(v)") }
    return n
}

/// The flags that set the server configuration's settings, for `SessionServer.Configuration.validate(naming:)`.
let flagNames = ["credentialLifetime": "--turn-ttl", "turnSecret": "--turn-secret", "workers": "--media-workers"]

/// Every project named by --project, --config FILE and OT_SERVER_PROJECTS.
func projects(_ args: inout Args) -> [Project] {
    var out = args.values("--project").map(project)
    if args.contains("--config") {
        let path = args.value("--config")
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
        for line in text.split(separator: "\n") {
            let l = line.trimmingCharacters(in: .whitespaces)
            if l.isEmpty || l.hasPrefix("#") { continue }
            out.append(project(l))
        }
    }
    if let env = ProcessInfo.processInfo.environment["OT_SERVER_PROJECTS"] {
        out += env.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\n" || $0 == "\t" }).map { project(String($0)) }
    }
    return out
}

var args = Args(list: Array(CommandLine.arguments.dropFirst()))

switch args.first {
case "keygen":
    let p = Project.generate()
    print("\(p.apiKey):\(p.secret)")
case "token":
    args.removeFirst()
    let session = args.value("--session")
    let known = projects(&args)
    guard let sidKey = try? SessionID.parse(session).apiKey else { fail("--session is not a session id") }
    guard let p = known.first(where: { $0.apiKey == sidKey }) else { fail("no project for api key \(sidKey) (--config, OT_SERVER_PROJECTS or --project)") }
    let roleName = args.contains("--role") ? args.value("--role") : "publisher"
    guard let role = SessionRole(rawValue: roleName) else { fail("unknown role \(roleName)") }
    let data = args.contains("--data") ? args.value("--data") : nil
    let ttl = Int64(intValue(&args, "--ttl", 1...Int(ClientToken.maxLifetime)) ?? Int(ClientToken.defaultLifetime))
    let format: TokenFormat = args.flag("--t1") ? .t1 : .jwt
    guard args.isEmpty else { fail("unexpected arguments: \(args.list)\n\(usage)") }
    let now = wallClockMillis() / 1000
    do {
        print(try ClientToken(apiKey: p.apiKey, sessionId: session, role: role, createTime: now, expireTime: now + ttl,
                              connectionData: data, format: format).mint(secret: p.secret))
    } catch { fail("\(error)") }
case "create-session":
    args.removeFirst()
    guard let p = projects(&args).first else { fail("a project is needed (--config, OT_SERVER_PROJECTS or --project)") }
    print(SessionID(apiKey: p.apiKey, createTimeMillis: wallClockMillis(), relayed: args.flag("--relayed"), e2ee: args.flag("--e2ee")).string)
case "-h", "--help", "help":
    print(usage, terminator: "")
default:
    let projects = projects(&args)
    let listen = args.contains("--listen") ? args.value("--listen") : "127.0.0.1:8080"
    var limits = ServerLimits()
    if let n = intValue(&args, "--max-connections", 1...1_000_000) { limits.maxConnectionsPerSession = n }
    if let n = intValue(&args, "--max-connections-per-token", 0...1_000_000) { limits.maxConnectionsPerToken = n }
    if let n = intValue(&args, "--max-streams-per-connection", 1...10_000) { limits.maxStreamsPerConnection = n }
    if let n = intValue(&args, "--max-streams-per-session", 1...1_000_000) { limits.maxStreamsPerSession = n }
    if let r = intValue(&args, "--signal-rate", 1...1_000_000) {
        limits.signalsPerSecond = Double(r); limits.signalBurst = 2 * Double(r)
    }
    if let g = intValue(&args, "--reconnect-grace", 0...3600) { limits.reconnectGrace = .seconds(g) }
    var sockets = TCPServerLimits()
    sockets.maxConnections = intValue(&args, "--max-sockets", 1...10_000_000)
    if let n = intValue(&args, "--max-sockets-per-address", 0...10_000_000) { sockets.maxConnectionsPerAddress = n }
    if let n = intValue(&args, "--output-budget-mb", 1...1_000_000) { sockets.outputBudget = n << 20 }
    var timeouts = SocketTimeouts()
    if let t = intValue(&args, "--request-timeout", 1...3600) { timeouts.request = .seconds(t) }
    if let t = intValue(&args, "--idle-timeout", 1...3600) { timeouts.keepAliveIdle = .seconds(t) }
    if let t = intValue(&args, "--connect-timeout", 1...3600) { timeouts.webSocketConnect = .seconds(t) }
    let origins = args.values("--allowed-origin")
    let mediaHost = args.contains("--media-host") ? args.value("--media-host") : nil
    let mediaWorkers = intValue(&args, "--media-workers", nil) ?? 1
    let mediaPort = UInt16(intValue(&args, "--media-port", 0...65535) ?? 0)
    let advertiseText = args.contains("--media-advertise") ? args.value("--media-advertise") : nil
    var tls: SessionServer.TLSSettings?
    let cert = args.contains("--tls-cert") ? args.value("--tls-cert") : nil
    let key = args.contains("--tls-key") ? args.value("--tls-key") : nil
    let allowPlain = args.flag("--tls-allow-plain")
    switch (cert, key) {
    case (let c?, let k?): tls = SessionServer.TLSSettings(certificateFile: c, keyFile: k, allowPlaintext: allowPlain)
    case (nil, nil): if allowPlain { fail("--tls-allow-plain needs --tls-cert and --tls-key") }
    default: fail("--tls-cert and --tls-key go together")
    }
    var ice = ICEServerPolicy(urls: args.values("--ice-server"))
    if args.contains("--turn-secret") { ice.turnSecret = args.value("--turn-secret") }
    if args.contains("--turn-secret-file") {
        let path = args.value("--turn-secret-file")
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
        ice.turnSecret = text.split(separator: "\n").first.map { $0.trimmingCharacters(in: .whitespaces) }
    }
    if ice.turnSecret == nil, let env = ProcessInfo.processInfo.environment["OT_SERVER_TURN_SECRET"], !env.isEmpty { ice.turnSecret = env }
    if let ttl = intValue(&args, "--turn-ttl", nil) { ice.credentialLifetime = .seconds(ttl) }
    if args.flag("--verbose") { Log.level = .info }
    guard args.isEmpty else { fail("unexpected arguments: \(args.list)\n\(usage)") }
    guard !projects.isEmpty else { fail("at least one project is needed (--config FILE, OT_SERVER_PROJECTS or --project)\n\(usage)") }
    guard let colon = listen.lastIndex(of: ":"), let port = UInt16(listen[listen.index(after: colon)...]) else { fail("bad --listen \(listen)") }
    var listenHost = String(listen[..<colon])
    if listenHost.hasPrefix("[") && listenHost.hasSuffix("]") { listenHost = String(listenHost.dropFirst().dropLast()) }
    var media = SessionServer.MediaSettings(port: mediaPort, workers: mediaWorkers)
    if let h = mediaHost {
        guard let ip = IPAddress(h) else { fail("bad --media-host \(h): an IP address clients can reach is needed") }
        media.host = ip
    }
    if let a = advertiseText {
        guard let ip = IPAddress(a) else { fail("bad --media-advertise \(a): an IP address is needed") }
        media.advertise = ip
    }
    let configuration = SessionServer.Configuration(host: listenHost, port: port, projects: projects, limits: limits, connectionLimits: sockets,
                                                    timeouts: timeouts, allowedOrigins: origins, tls: tls, iceServers: ice, media: media)
    do { try configuration.validate { flagNames[$0] ?? $0 } } catch { fail("\((error as? OTError)?.message ?? "\(error)")") }
    let server = SessionServer(configuration)
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
    // SIGHUP: the renewed certificate (e.g. after certbot), for new connections; sessions carry on.
    signal(SIGHUP, SIG_IGN)
    let hup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
    hup.setEventHandler {
        do {
            try server.reloadTLS()
            FileHandle.standardOutput.write(Data("ot-server: TLS certificate reloaded\n".utf8))
        } catch {
            FileOutput.stderr("ot-server: SIGHUP: \((error as? OTError)?.message ?? "\(error)")\n")
        }
    }
    hup.resume()
    sources.append(hup)
    // The server's threads (the media router's IO threads among them) start after the signal sources exist
    // (libdispatch must see SIGINT/SIGTERM).
    do { try server.start() } catch { fail("\((error as? OTError)?.message ?? "\(error)")") }
    FileHandle.standardOutput.write(Data("ot-server listening on \(server.apiURL) (signaling \(server.signalingURL))\n".utf8))
    if let router = server.mediaRouter {
        let shown = router.endpoint.advertisedAddress == router.endpoint.address ? "" : " (advertised as \(router.endpoint.advertisedAddress))"
        let ports = router.endpoints.map { "\($0.address)" }.joined(separator: ", ")
        FileHandle.standardOutput.write(Data("ot-server media router on udp \(ports)\(shown)\n".utf8))
    }
    stop.wait()
    server.stop()
    sources.forEach { $0.cancel() }
}
