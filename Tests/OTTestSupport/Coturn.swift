import Foundation
import OTTransport
import OTWire
import Synchronization
import XCTest

/// A coturn `turnserver` started by the test on 127.0.0.1 (lt-cred-mech, no TLS, no CLI, no daemon), stopped after.
public final class Coturn {
    let process = Process()
    public let port: UInt16
    let dir: URL
    public static let user = "otuser", password = "otpass", realm = "otsession.test"

    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/turnserver") else { throw XCTSkip("coturn is not installed") }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ot-coturn-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        port = UInt16.random(in: 20000 ... 29999)
        let minPort = Int.random(in: 0 ..< 300) * 50 + 30000
        let conf = """
            listening-ip=127.0.0.1
            relay-ip=127.0.0.1
            listening-port=\(port)
            min-port=\(minPort)
            max-port=\(minPort + 49)
            lt-cred-mech
            user=\(Self.user):\(Self.password)
            realm=\(Self.realm)
            allow-loopback-peers
            no-tls
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
