import Foundation
import XCTest

/// A certificate authority made at test time with the `openssl` command (ECDSA P-256, valid two days), and server
/// certificates it signs. Its directory goes when it is released.
public final class TestCA {
    public let dir: URL
    /// The CA certificate (PEM): what a client given `tlsCAFile` trusts.
    public let caFile: String
    private let keyFile: String
    private var serial = 1

    public init(name: String = "otsession test CA") throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else { throw XCTSkip("the openssl command is not installed") }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ot-ca-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        caFile = dir.appendingPathComponent("ca.pem").path
        keyFile = dir.appendingPathComponent("ca.key").path
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", keyFile,
                          "-out", caFile, "-days", "2", "-subj", "/CN=\(name)",
                          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    }

    /// A server certificate for `names` (DNS names and IP addresses, as subjectAltName) and its key; files named `label`.
    public func issue(_ names: [String], label: String = "server") throws -> (cert: String, key: String) {
        let key = dir.appendingPathComponent("\(label).key").path
        let csr = dir.appendingPathComponent("\(label).csr").path
        let cert = dir.appendingPathComponent("\(label).pem").path
        let ext = dir.appendingPathComponent("\(label).ext")
        let san = names.map { IPv4Address($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        try "subjectAltName=\(san)\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
            .write(to: ext, atomically: true, encoding: .utf8)
        try Self.openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                          "-subj", "/CN=\(names.first ?? "server")"])
        serial += 1
        try Self.openssl(["x509", "-req", "-in", csr, "-CA", caFile, "-CAkey", keyFile, "-set_serial", "\(serial)", "-out", cert,
                          "-days", "2", "-extfile", ext.path])
        return (cert, key)
    }

    private func IPv4Address(_ s: String) -> Bool { s.split(separator: ".").count == 4 && s.allSatisfy { $0.isNumber || $0 == "." } }

    private static func openssl(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        let err = Pipe()
        p.standardError = err
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw NSError(domain: "openssl", code: Int(p.terminationStatus), userInfo: [NSLocalizedDescriptionKey: "openssl \(args.first ?? ""): \(text)"])
        }
    }

    deinit { try? FileManager.default.removeItem(at: dir) }
}
