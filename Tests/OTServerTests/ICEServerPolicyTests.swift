import OTBase
@testable import OTServer
import OTTransport
import OTWire
import XCTest

/// The STUN/TURN servers a server hands its clients in `connected`, with coturn's use-auth-secret credentials.
final class ICEServerPolicyTests: XCTestCase {
    let project = Project(apiKey: "100", secret: "abcdef0123456789")
    let ms: Int64 = 1_800_000_000_000

    /// The credentials coturn checks: username `<expiry>:<user>`, password base64(HMAC-SHA1(secret, username)) (the
    /// expected password computed with Python's hmac module).
    func testCredentialsAreCoturnsSharedSecretScheme() {
        let c = ICEServerPolicy.credentials(secret: "north-wind", connectionId: "0a1b", expiry: 1_800_086_400)
        XCTAssertEqual(c.username, "1800086400:0a1b")
        XCTAssertEqual(c.password, "s77lnA4n8MOnusCbWRy8ero07W0=")
    }

    func testEachConnectionGetsItsOwnTimeLimitedCredentials() throws {
        let policy = ICEServerPolicy(urls: ["stun:stun.example.org", "turn:turn.example.org?transport=udp", "turns:turn.example.org:443"],
                                     turnSecret: "north-wind", credentialLifetime: .seconds(3600))
        try policy.validate()
        let r = SignalingRouter(projects: [project])
        r.iceServers = { policy.servers(connectionId: $0, nowMillis: $1) }
        let sid = try r.createSession(apiKey: project.apiKey, nowMillis: ms)
        var seen: [String] = []
        for socket in 1...2 {
            let out = try connectSocket(r, project, sid: sid, socket: socket, nowMillis: ms)
            guard case .send(_, .connected(let info))? = out.first, let ice = info.iceServers else { return XCTFail("\(out)") }
            XCTAssertEqual(ice.count, 2)
            XCTAssertEqual(ice[0], ICEServerInfo(urls: ["stun:stun.example.org"]))
            XCTAssertEqual(ice[1].urls, ["turn:turn.example.org?transport=udp", "turns:turn.example.org:443"])
            let username = try XCTUnwrap(ice[1].username)
            XCTAssertEqual(username, "\(ms / 1000 + 3600):\(info.connection.id)")
            XCTAssertEqual(ice[1].credential, ICEServerPolicy.credentials(secret: "north-wind", connectionId: info.connection.id,
                                                                          expiry: ms / 1000 + 3600).password)
            seen.append(username)
            // The wire form is RTCIceServer's (what otsession.js hands its RTCPeerConnection).
            let text = SignalingCodec.encode(ServerMessage.connected(info))
            XCTAssertTrue(text.contains("\"iceServers\":[{\"urls\":[\"stun:stun.example.org\"]}"), text)
        }
        XCTAssertNotEqual(seen[0], seen[1])
    }

    func testNoServersNoField() throws {
        let r = SignalingRouter(projects: [project])
        let sid = try r.createSession(apiKey: project.apiKey, nowMillis: ms)
        let out = try connectSocket(r, project, sid: sid, socket: 1, nowMillis: ms)
        guard case .send(_, .connected(let info))? = out.first else { return XCTFail() }
        XCTAssertNil(info.iceServers)
        XCTAssertFalse(SignalingCodec.encode(ServerMessage.connected(info)).contains("iceServers"))
    }

    func testPoliciesThatClientsWouldRefuseAreRefused() {
        let bad: [ICEServerPolicy] = [
            ICEServerPolicy(urls: ["turn:turn.example.org"]),                        // TURN without a secret
            ICEServerPolicy(urls: ["stuns:stun.example.org"]),
            ICEServerPolicy(urls: ["turn:1.2.3.4?transport=sctp"], turnSecret: "s"),
            ICEServerPolicy(urls: ["stun:s"], turnSecret: ""),
            ICEServerPolicy(urls: ["turn:t"], turnSecret: "s", credentialLifetime: .seconds(5)),
        ]
        for p in bad { XCTAssertThrowsError(try p.validate(), "\(p)") { XCTAssertEqual(($0 as? OTError)?.code, .invalidParameter) } }
        XCTAssertNoThrow(try ICEServerPolicy(urls: ["stun:stun.example.org"]).validate())
        // The server refuses to start with such a policy.
        let server = SessionServer(.init(projects: [project], iceServers: ICEServerPolicy(urls: ["turn:t"])))
        XCTAssertThrowsError(try server.start())
        server.stop()
    }

    /// The configuration's ranges (TURN credential lifetime, media workers) are checked in one place, which names the
    /// setting as its caller does (a Swift property by default; the C ABI and ot-server pass their own names) and
    /// says the value and the range; the media router refuses the same counts with the same check; the bounds pass.
    func testConfigurationRangesNameTheSettingAsTheCallerCallsIt() throws {
        func message(_ c: SessionServer.Configuration, _ name: @escaping (String) -> String = { $0 }) -> String? {
            do { try c.validate(naming: name); return nil } catch { return (error as? OTError)?.message }
        }
        let flags = ["credentialLifetime": "--turn-ttl", "workers": "--media-workers"]
        let ttl = SessionServer.Configuration(projects: [project], iceServers: ICEServerPolicy(credentialLifetime: .seconds(59)))
        XCTAssertEqual(message(ttl), "credentialLifetime 59 s is not 60..2592000 s")
        XCTAssertEqual(message(ttl) { flags[$0] ?? $0 }, "--turn-ttl 59 s is not 60..2592000 s")
        let huge = SessionServer.Configuration(projects: [project], iceServers: ICEServerPolicy(credentialLifetime: .seconds(Int64.max)))
        XCTAssertEqual(message(huge), "credentialLifetime \(Int64.max) s is not 60..2592000 s")
        for n in [0, -1, MediaRouter.maxWorkers + 1] {
            let c = SessionServer.Configuration(projects: [project], media: .init(workers: n))
            XCTAssertEqual(message(c) { flags[$0] ?? $0 }, "--media-workers \(n) is not 1..64")
            XCTAssertThrowsError(try MediaRouter(workers: n)) { XCTAssertEqual(($0 as? OTError)?.message, "workers \(n) is not 1..64") }
        }
        for (seconds, workers) in [(Int64(60), 1), (30 * 86_400, MediaRouter.maxWorkers)] {
            XCTAssertNil(message(.init(projects: [project], iceServers: ICEServerPolicy(credentialLifetime: .seconds(seconds)),
                                       media: .init(workers: workers))))
        }
    }
}
