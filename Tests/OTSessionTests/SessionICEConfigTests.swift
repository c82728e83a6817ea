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
        XCTAssertEqual(try ICEServerURL(parsing: "TURN:localhost:3479?transport=udp").address, TransportAddress("127.0.0.1:3479"))
    }

    func testBadURLsAreInvalidParameters() {
        for url in ["", "stun", "http://1.2.3.4", "stuns:1.2.3.4", "turns:1.2.3.4:5349", "stun:", "stun:1.2.3.4:0",
                    "stun:1.2.3.4:70000", "stun:1.2.3.4?transport=udp", "turn:1.2.3.4?transport=sctp", "stun:example.com",
                    "stun:2001:db8::1", "stun:[2001:db8::1", "stun://1.2.3.4", "turn:[::1]x"] {
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
        XCTAssertThrowsError(try c.addICEServer(url: "stun:stun.example.org"))
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
}
