import Foundation
import Glibc
import OTBase
import OTServer
import OTSession

/// `ot-bench connect [--rounds 40]`: what TLS adds to connecting a session. One embedded server per certificate
/// kind (ECDSA P-256 and RSA 2048, signed by a CA made here with the `openssl` command) and a plain one; a client
/// connects (`connect` to `sessionDidConnect`: TCP, TLS handshake with certificate and name checks against the CA
/// file, WebSocket upgrade, token check, `connected`) and disconnects, `--rounds` times per server, the servers
/// taken in turn so that machine load falls on all alike. Prints median and 90th percentile per server and the
/// median's difference to plain.
func runConnectBenchmark(_ args: [String]) throws {
    let rounds = try intOption(args, "--rounds", 40)
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ot-bench-ca-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let ca = dir.appendingPathComponent("ca").path
    try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca + ".key",
                 "-out", ca + ".pem", "-days", "1", "-subj", "/CN=ot-bench CA",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    func issue(_ label: String, _ keyArgs: [String]) throws -> SessionServer.TLSSettings {
        let base = dir.appendingPathComponent(label).path
        try "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n".write(toFile: base + ".ext", atomically: true, encoding: .utf8)
        try openssl(["req", "-newkey"] + keyArgs + ["-nodes", "-keyout", base + ".key", "-out", base + ".csr", "-subj", "/CN=localhost"])
        try openssl(["x509", "-req", "-in", base + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-set_serial", "\(label.count)",
                     "-out", base + ".pem", "-days", "1", "-extfile", base + ".ext"])
        return SessionServer.TLSSettings(certificateFile: base + ".pem", keyFile: base + ".key")
    }
    let kinds: [(name: String, tls: SessionServer.TLSSettings?)] = [
        ("ws:// (plain)", nil),
        ("wss:// ECDSA P-256", try issue("ecdsa", ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])),
        ("wss:// RSA 2048", try issue("rsa", ["rsa:2048"])),
    ]
    let project = Project.generate()
    var servers: [(name: String, server: SessionServer, url: String, sid: String)] = []
    defer { servers.forEach { $0.server.stop() } }
    for k in kinds {
        let s = SessionServer(.init(projects: [project], tls: k.tls))
        _ = try s.start()
        // TLS: reached by the name its certificate carries.
        let url = k.tls == nil ? s.signalingURL : "wss://localhost:\(s.port)"
        servers.append((k.name, s, url, try s.createSession(apiKey: project.apiKey, relayed: false)))
    }
    print("connect: \(rounds) connects per server (connect -> sessionDidConnect, then disconnect), servers in turn, loopback")
    var times = Array(repeating: [Double](), count: servers.count)
    for round in 0..<(rounds + 2) {   // two warm-up rounds, not counted
        for (i, s) in servers.enumerated() {
            let d = BenchSessionDelegate()
            let session = Session(apiKey: project.apiKey, sessionId: s.sid, delegate: d,
                                  settings: SessionSettings(serverURL: s.url, tlsCAFile: s.url.hasPrefix("wss") ? ca + ".pem" : nil))
            let t = monotonicSeconds()
            try session.connect(token: s.server.token(sessionId: s.sid))
            guard waitUntil(15, { d.connected || d.failure != nil }), d.failure == nil else {
                throw BenchError("\(s.name): did not connect: \(d.failure.map { "\($0)" } ?? "timed out")")
            }
            if round >= 2 { times[i].append((monotonicSeconds() - t) * 1000) }
            try session.disconnect()
            waitUntil(5) { d.disconnected }
        }
    }
    let plain = median(times[0])
    print("\n| server | median ms | p90 ms | median − plain ms |\n|---|---|---|---|")
    for (i, s) in servers.enumerated() {
        let sorted = times[i].sorted()
        let p90 = sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.9))]
        print("| \(s.name) | \(fmt(median(sorted), 2)) | \(fmt(p90, 2)) | \(i == 0 ? "–" : fmt(median(sorted) - plain, 2)) |")
    }
}

private func openssl(_ args: [String]) throws {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    p.arguments = args
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw BenchError("openssl \(args.first ?? "") failed (is the openssl command installed?)") }
}
