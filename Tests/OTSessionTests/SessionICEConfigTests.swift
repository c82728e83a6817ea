import OTBase
import OTSession
import OTTransport
import OTWire
import XCTest

/// `SessionICEConfig` (OTSessionICEConfig): ICE server URLs are validated when added; STUN and TURN servers come out.
final class SessionICEConfigTests: XCTestCase {
    func testURLsParse() throws {
        let stun = try ICEServerURL(parsing: "stun:198.51.100.7")
        XCTAssertEqual(stun.scheme, .stun)
        XCTAssertEqual(stun.address, TransportAddress("198.51.100.7:3478"))
        let turn = try ICEServerURL(parsing: "turn:[2001:db8::1]:5349?transport=tcp")
        XCTAssertEqual(turn.scheme, .turn)
        XCTAssertEqual(turn.address, TransportAddress(ip: try XCTUnwrap(IPAddress("2001:db8::1")), port: 5349))
        XCTAssertEqual(turn.transport, .tcp)
        XCTAssertEqual(try ICEServerURL(parsing: "TURN:localhost:3479?transport=udp").host, "localhost")
        XCTAssertNil(try ICEServerURL(parsing: "TURN:localhost:3479?transport=udp").address, "names are resolved when used")
        let named = try ICEServerURL(parsing: "stun:stun.example.org")
        XCTAssertEqual(named.host, "stun.example.org")
        XCTAssertEqual(named.port, 3478)
        let turns = try ICEServerURL(parsing: "turns:turn.example.org")
        XCTAssertEqual(turns.scheme, .turns)
        XCTAssertEqual(turns.port, 5349)
        XCTAssertEqual(turns.transport, .tls)
        XCTAssertEqual(try ICEServerURL(parsing: "turns:198.51.100.7:443?transport=tcp").transport, .tls)
    }

    func testBadURLsAreInvalidParameters() {
        for url in ["", "stun", "http://1.2.3.4", "stuns:1.2.3.4", "turns:1.2.3.4?transport=udp", "stun:", "stun:1.2.3.4:0",
                    "stun:1.2.3.4:70000", "stun:1.2.3.4?transport=udp", "turn:1.2.3.4?transport=sctp", "stun:exa mple.com",
                    "stun:2001:db8::1", "stun:[2001:db8::1", "stun://1.2.3.4", "turn:[::1]x", "turn:h\u{0}st", "stun:[example.com]"] {
            XCTAssertThrowsError(try ICEServerURL(parsing: url), url) { e in
                XCTAssertEqual((e as? OTError)?.code, .invalidParameter, url)
                XCTAssertTrue((e as? OTError)?.message.contains("ICE server URL") == true, url)
            }
        }
    }

    func testAddingServersValidatesAndSplitsSTUNAndTURN() throws {
        var c = SessionICEConfig()
        try c.addICEServer(url: "stun:198.51.100.7:3478")
        try c.addICEServer(url: "turn:198.51.100.8?transport=udp", username: "u", credential: "p")
        try c.addICEServer(url: "turn:198.51.100.9?transport=tcp", username: "u2", credential: "p2")
        XCTAssertThrowsError(try c.addICEServer(url: "turn:198.51.100.9?transport=sctp")) {
            XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter)
        }
        XCTAssertEqual(c.customServers.count, 3)
        // UDP TURN servers answer Binding requests too: both are STUN servers for server-reflexive candidates
        // (the TCP one is not: server-reflexive candidates are UDP).
        XCTAssertEqual(c.stunServers, [TransportAddress("198.51.100.7:3478")!, TransportAddress("198.51.100.8:3478")!])
        let turn = try XCTUnwrap(c.turnServers.first)
        XCTAssertEqual(c.turnServers.count, 2)
        XCTAssertEqual(turn.transport, .udp)
        XCTAssertEqual(c.turnServers.last?.transport, .tcp)
        XCTAssertEqual(c.turnServers.last?.server, TransportAddress("198.51.100.9:3478"))
        XCTAssertEqual(c.turnServers.last?.username, "u2")
        XCTAssertEqual(turn.server, TransportAddress("198.51.100.8:3478"))
        XCTAssertEqual(turn.username, "u")
        XCTAssertEqual(turn.password, "p")
        XCTAssertThrowsError(try SessionICEConfig(customServers: [IceServer(urls: [])]))
    }

    /// Names are resolved by the session; with their addresses the servers come out, the session server's first
    /// unless `includeServers` is `.custom`.
    func testNamedAndProvidedServers() throws {
        var c = try SessionICEConfig(customServers: [IceServer(urls: ["turns:turn.example.org", "stun:stun.example.org:3479"],
                                                               username: "u", credential: "p")])
        XCTAssertEqual(c.hostNames, ["turn.example.org", "stun.example.org"])
        XCTAssertTrue(c.stunServers.isEmpty && c.turnServers.isEmpty, "unresolved names give no server")
        let provided = [IceServer(urls: ["turn:198.51.100.1?transport=tcp"], username: "1700000000:cid", credential: "x")]
        let addresses: [String: [IPAddress]] = ["turn.example.org": [IPAddress("2001:db8::5")!, IPAddress("203.0.113.5")!],
                                                "stun.example.org": [IPAddress("203.0.113.6")!]]
        let all = c.servers(adding: provided, addresses: addresses)
        XCTAssertEqual(all.turn.map(\.server), [TransportAddress("198.51.100.1:3478")!, TransportAddress("203.0.113.5:5349")!],
                       "the provided server first; a name's IPv4 address is preferred")
        XCTAssertEqual(all.turn.map(\.username), ["1700000000:cid", "u"])
        XCTAssertEqual(all.turn.last?.serverName, "turn.example.org")
        XCTAssertEqual(all.turn.last?.transport, .tls)
        XCTAssertEqual(all.stun, [TransportAddress("203.0.113.6:3479")!])
        c.includeServers = .custom
        XCTAssertEqual(c.servers(adding: provided, addresses: addresses).turn.map(\.username), ["u"])
    }
}
