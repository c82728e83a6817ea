import Foundation
import OTBase
import OTTestSupport
import OTTransport
import OTWire
import XCTest

/// The sans-IO TLS layer (`TLSStream`) and HTTP CONNECT tunnel, stacked as drivers stack them, with bytes carried by
/// hand between the two sides; certificates from a CA made by the test.
final class TLSStreamTests: XCTestCase {
    private var ca: TestCA!
    private var server: TLSServerContext!

    override func setUpWithError() throws {
        ca = try TestCA()
        let (cert, key) = try ca.issue(["localhost", "127.0.0.1"])
        server = try TLSServerContext(certificateFile: cert, keyFile: key)
    }

    /// Carries what each side has for the other until neither has anything; returns what each side's application got.
    @discardableResult
    private func shuttle(_ client: StreamStack, _ server: StreamStack, rounds: Int = 20) throws -> (client: [UInt8], server: [UInt8]) {
        var got: ([UInt8], [UInt8]) = ([], [])
        for _ in 0..<rounds {
            let c2s = client.takeOutgoing(), s2c = server.takeOutgoing()
            if c2s.isEmpty && s2c.isEmpty { break }
            try c2s.withUnsafeBytes { try server.receive($0) }
            try s2c.withUnsafeBytes { try client.receive($0) }
            got.0 += client.takeIncoming()
            got.1 += server.takeIncoming()
        }
        return got
    }

    private func pair(host: String = "localhost", caFile: String? = nil) throws -> (StreamStack, StreamStack, TLSStream) {
        let tls = try TLSStream(client: TLSClientContext(caFile: caFile ?? ca.caFile), host: host)
        let client = StreamStack([tls])
        let srv = StreamStack([try TLSStream(server: server)])
        try srv.start()
        try client.start()
        return (client, srv, tls)
    }

    func testHandshakeThenDataBothWays() throws {
        let (client, srv, tls) = try pair()
        try client.write(Array("GET / HTTP/1.1\r\n\r\n".utf8))  // written before the handshake: held, then sent
        XCTAssertFalse(client.isOpen)
        let got = try shuttle(client, srv)
        XCTAssertTrue(client.isOpen && srv.isOpen)
        XCTAssertEqual(String(decoding: got.server, as: UTF8.self), "GET / HTTP/1.1\r\n\r\n")
        XCTAssertEqual(tls.protocolVersion, "TLSv1.3")
        XCTAssertNotNil(tls.cipher)
        let big = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try srv.write(big)
        XCTAssertEqual(try shuttle(client, srv).client, big)
        // close_notify: the other side sees an orderly end.
        client.shutdown()
        try shuttle(client, srv)
        XCTAssertTrue(srv.peerClosed)
    }

    func testAnIPAddressIsMatchedAgainstTheCertificatesAddresses() throws {
        let (client, srv, _) = try pair(host: "127.0.0.1")
        try shuttle(client, srv)
        XCTAssertTrue(client.isOpen)
        let (other, srv2, _) = try pair(host: "127.0.0.2")
        XCTAssertThrowsError(try shuttle(other, srv2)) { e in
            XCTAssertEqual((e as? OTError)?.code, .tlsCertificateRejected)
        }
    }

    func testAServerOfAnotherCAIsRejectedWithItsOwnCode() throws {
        let other = try TestCA(name: "another CA")
        let (client, srv, _) = try pair(caFile: other.caFile)
        XCTAssertThrowsError(try shuttle(client, srv)) { e in
            let err = e as? OTError
            XCTAssertEqual(err?.code, .tlsCertificateRejected)
            XCTAssertEqual(err?.code.rawValue, 9200)
            XCTAssertTrue(err?.message.contains("unable to get local issuer certificate") == true, "\(String(describing: err))")
        }
        XCTAssertFalse(client.isOpen)
    }

    func testAnotherHostNameIsRejectedWithItsOwnCode() throws {
        let (client, srv, _) = try pair(host: "otsession.test")
        XCTAssertThrowsError(try shuttle(client, srv)) { e in
            let err = e as? OTError
            XCTAssertEqual(err?.code, .tlsCertificateRejected)
            XCTAssertTrue(err?.message.contains("hostname mismatch") == true, "\(String(describing: err))")
            XCTAssertTrue(err?.message.contains("otsession.test") == true, "\(String(describing: err))")
        }
    }

    func testGarbageAfterAHandshakeByteFailsTheServerSide() throws {
        let srv = StreamStack([try TLSStream(server: server)])
        try srv.start()
        let junk: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x05] + Array("hello".utf8)
        XCTAssertThrowsError(try junk.withUnsafeBytes { try srv.receive($0) }) { e in
            XCTAssertEqual((e as? OTError)?.code, .connectionFailed)
        }
        // A plain HTTP request is no TLS either.
        let srv2 = StreamStack([try TLSStream(server: server)])
        XCTAssertThrowsError(try Array("GET / HTTP/1.1\r\n\r\n".utf8).withUnsafeBytes { try srv2.receive($0) })
    }

    /// A CONNECT tunnel, then TLS inside it: the proxy sees the request (with Basic credentials), answers 200 with the
    /// tunnel's first bytes right behind its head, and the TLS handshake runs end to end through it.
    func testTLSThroughACONNECTTunnel() throws {
        let tls = try TLSStream(client: TLSClientContext(caFile: ca.caFile), host: "localhost")
        let client = StreamStack([HTTPConnectTunnel(host: "localhost", port: 8443, credentials: "u:p w"), tls])
        try client.start()
        try client.write(Array("hello".utf8))
        let request = String(decoding: client.takeOutgoing(), as: UTF8.self)
        XCTAssertEqual(request, "CONNECT localhost:8443 HTTP/1.1\r\nHost: localhost:8443\r\nProxy-Authorization: Basic dTpwIHc=\r\n\r\n")
        let srv = StreamStack([try TLSStream(server: server)])
        try srv.start()
        // The proxy's answer arrives in two pieces; nothing passes before its head is complete.
        try Array("HTTP/1.1 200 Connection est".utf8).withUnsafeBytes { try client.receive($0) }
        XCTAssertTrue(client.takeOutgoing().isEmpty)
        try Array("ablished\r\nVia: test\r\n\r\n".utf8).withUnsafeBytes { try client.receive($0) }
        let got = try shuttle(client, srv)
        XCTAssertTrue(client.isOpen)
        XCTAssertEqual(String(decoding: got.server, as: UTF8.self), "hello")
    }

    func testAProxysRefusalNamesItsStatus() throws {
        let client = StreamStack([HTTPConnectTunnel(host: "10.0.0.1", port: 443)])
        try client.start()
        XCTAssertTrue(String(decoding: client.takeOutgoing(), as: UTF8.self).hasPrefix("CONNECT 10.0.0.1:443 HTTP/1.1\r\n"))
        XCTAssertThrowsError(try Array("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n".utf8).withUnsafeBytes { try client.receive($0) }) { e in
            XCTAssertEqual((e as? OTError)?.code, .connectionFailed)
            XCTAssertTrue((e as? OTError)?.message.contains("407 Proxy Authentication Required") == true)
        }
        let endless = StreamStack([HTTPConnectTunnel(host: "h", port: 1)])
        try endless.start()
        XCTAssertThrowsError(try [UInt8](repeating: 0x41, count: HTTPConnectTunnel.maxHeadBytes + 1).withUnsafeBytes { try endless.receive($0) })
    }

    func testProxyURLs() throws {
        XCTAssertEqual(try ProxyEndpoint.parse("http://proxy.example:3128"), ProxyEndpoint(host: "proxy.example", port: 3128))
        XCTAssertEqual(try ProxyEndpoint.parse("http://u%40x:p%3Aw@[::1]:8080/"), ProxyEndpoint(host: "::1", port: 8080, credentials: "u@x:p:w"))
        XCTAssertEqual(try ProxyEndpoint.parse("HTTP://10.1.2.3").port, 80)
        for bad in ["https://p:1", "socks5://p:1", "http://", "http://p:0", "http://p:99999", "http://p:1/path", "http://nopass@p:1",
                    "http://u:%zz@p:1", "http://a b:1", "http://[::1:80"] {
            XCTAssertThrowsError(try ProxyEndpoint.parse(bad), bad) { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter, bad) }
        }
    }

    /// A reload reads the files again for new connections; an unusable file keeps the old certificate.
    func testServerCredentialsReload() throws {
        let (cert, key) = try ca.issue(["localhost"], label: "reloaded")
        let creds = try TLSServerCredentials(certificateFile: cert, keyFile: key)
        let before = creds.context
        try creds.reload()
        XCTAssertFalse(creds.context === before)
        try "not a certificate".write(toFile: cert, atomically: true, encoding: .utf8)
        let current = creds.context
        XCTAssertThrowsError(try creds.reload()) { e in
            XCTAssertEqual((e as? OTError)?.code, .invalidParameter)
            XCTAssertTrue((e as? OTError)?.message.contains(cert) == true)
        }
        XCTAssertTrue(creds.context === current)
        XCTAssertThrowsError(try TLSServerContext(certificateFile: ca.caFile, keyFile: key)) { e in
            XCTAssertTrue((e as? OTError)?.message.contains("mismatch") == true, "\(e)")
        }
    }

    func testHostNamesResolveOffTheCallersThread() throws {
        let done = expectation(description: "resolved")
        let caller = pthread_self()
        HostResolver.resolve("localhost", port: 80) { r in
            XCTAssertEqual(pthread_equal(caller, pthread_self()), 0, "resolved on the caller's thread")
            XCTAssertTrue((try? r.get())?.allSatisfy { $0.ip.isLoopback && $0.port == 80 } == true, "\(r)")
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        if case .success = HostResolver.resolveNow("no-such-host.invalid", port: 1) { XCTFail(".invalid resolved") }
        // Literals need no lookup and answer at once.
        let before = HostResolver.lookups(of: "::1")
        HostResolver.resolve("[::1]", port: 5) { XCTAssertEqual(try? $0.get(), [TransportAddress("[::1]:5")!]) }
        XCTAssertEqual(HostResolver.lookups(of: "::1"), before)
    }
}
