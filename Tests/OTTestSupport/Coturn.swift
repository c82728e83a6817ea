import Foundation
import OTTransport
import OTWire
import Synchronization
import XCTest

/// A coturn `turnserver` started by the test on 127.0.0.1 (no CLI, no daemon), stopped after: long-term
/// credentials (`user`/`password`), or with `authSecret` the shared-secret scheme (`use-auth-secret`) whose
/// credentials `ot-server --turn-secret` mints; TLS on `tlsPort` with `tls` (certificate and key files).
public final class Coturn {
    let process = Process()
    public let port: UInt16
    /// The TURN-over-TLS port (`turns:`), with `tls`.
    public let tlsPort: UInt16?
    let dir: URL
    public static let user = "otuser", password = "otpass", realm = "otsession.test"

    public init(authSecret: String? = nil, tls: (cert: String, key: String)? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/turnserver") else { throw XCTSkip("coturn is not installed") }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ot-coturn-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        port = UInt16.random(in: 20000 ... 29998)
        tlsPort = tls == nil ? nil : port + 1
        let minPort = Int.random(in: 0 ..< 300) * 50 + 30000
        let auth = authSecret.map { "use-auth-secret\nstatic-auth-secret=\($0)" } ?? "lt-cred-mech\nuser=\(Self.user):\(Self.password)"
        let tlsLines = tls.map { "tls-listening-port=\(port + 1)\ncert=\($0.cert)\npkey=\($0.key)\nno-tlsv1\nno-tlsv1_1" } ?? "no-tls"
        let conf = """
            listening-ip=127.0.0.1
            relay-ip=127.0.0.1
            listening-port=\(port)
            min-port=\(minPort)
            max-port=\(minPort + 49)
            \(auth)
            realm=\(Self.realm)
            allow-loopback-peers
            \(tlsLines)
            no-dtls
            no-cli
            no-rfc5780
            no-stdout-log
            log-file=\(dir.path)/turn.log
            pidfile=\(dir.path)/turn.pid
            userdb=\(dir.path)/turndb
            """
        try conf.write(to: dir.appendingPathComponent("turnserver.conf"), atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/turnserver")
        process.arguments = ["-c", dir.appendingPathComponent("turnserver.conf").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try waitReady()
    }

    public var address: TransportAddress { TransportAddress(ip: .v4(0x7F00_0001), port: port) }

    /// Polls with STUN Binding requests until the server answers (bounded).
    private func waitReady() throws {
        let got = Mutex(false)
        let d = try UDPDriver { e in if case .datagram = e { got.withLock { $0 = true } } }
        defer { d.stop() }
        let local = try d.bind(TransportAddress("127.0.0.1:0")!)
        d.start()
        let deadline = Date().addingTimeInterval(10)
        while !got.withLock({ $0 }) && Date() < deadline {
            d.send(STUNMessage(method: .binding, messageClass: .request).encode(), from: local, to: address)
            usleep(50_000)
        }
        if !got.withLock({ $0 }) { throw XCTSkip("turnserver did not answer on \(address)") }
    }

    deinit {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: dir)
    }
}
