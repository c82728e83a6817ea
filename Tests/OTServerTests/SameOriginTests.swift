@testable import OTServer
import XCTest

/// `HTTPServer.isSameOrigin`: an Origin naming the host and port of the request's Host header (a page the server
/// serves) passes the origin list.
final class SameOriginTests: XCTestCase {
    func testHostAndPortDecideWithTheSchemesDefaultPort() {
        let cases: [(String, String?, Bool)] = [
            ("http://127.0.0.1:8080", "127.0.0.1:8080", true),
            ("HTTPS://OT.Example.com", "ot.example.com", true),
            ("https://ot.example.com", "ot.example.com:443", true),
            ("http://ot.example.com", "ot.example.com:80", true),
            ("https://ot.example.com", "ot.example.com:80", false),
            ("http://[::1]:8080", "[::1]:8080", true),
            ("http://[::1]", "[::1]:80", true),
            ("http://[::1]:8080", "[::1]:8081", false),
            ("http://127.0.0.1:8080", "127.0.0.1:8081", false),
            ("http://evil.example.com:8080", "127.0.0.1:8080", false),
            ("http://127.0.0.1:8080", nil, false),
            ("null", "127.0.0.1:8080", false),
            ("ws://127.0.0.1:8080", "127.0.0.1:8080", false),
            ("http://user@127.0.0.1:8080", "127.0.0.1:8080", false),
            ("http://127.0.0.1:8080/x", "127.0.0.1:8080", false),
            ("http://127.0.0.1:", "127.0.0.1:", false),
            ("http://127.0.0.1:+80", "127.0.0.1:+80", false),
            ("http://", "", false),
            ("http://[::1", "[::1", false),
        ]
        for (origin, host, same) in cases {
            XCTAssertEqual(HTTPServer.isSameOrigin(origin, host: host), same, "\(origin) vs \(host ?? "no Host")")
        }
    }
}
