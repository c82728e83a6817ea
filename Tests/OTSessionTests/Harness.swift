import Foundation
import OTServer
import OTSession
import OTTestSupport
import OTWire
import XCTest

/// An embedded server with one project, started on a free loopback port.
final class TestServer {
    let project = Project.generate()
    let server: SessionServer
    /// The media router of a `routed` server (its routed sessions' media goes through it); nil otherwise.
    let router: MediaRouter?
    init(limits: ServerLimits = ServerLimits(), routed: Bool = false) throws {
        server = SessionServer(.init(projects: [project], limits: limits))
        router = routed ? try MediaRouter() : nil
        server.mediaRouting = router
        try server.start()
    }
    deinit {
        router?.stop()
        server.stop()
    }

    func session(relayed: Bool = false) throws -> String { try server.createSession(apiKey: project.apiKey, relayed: relayed) }

    /// A connected client session with the given role, reaching the server through `proxy` when given.
    func client(_ sessionId: String, role: SessionRole = .publisher, data: String? = nil, suppressed: Bool = false, name: String = "",
                via proxy: TCPProxy? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> (Session, Recorder) {
        let rec = Recorder(name)
        let s = Session(apiKey: project.apiKey, sessionId: sessionId, delegate: rec,
                        settings: SessionSettings(serverURL: proxy?.url ?? server.signalingURL, connectionEventsSuppressed: suppressed))
        try s.connect(token: server.token(sessionId: sessionId, role: role, data: data))
        rec.waitFor(.connected, file: file, line: line)
        return (s, rec)
    }
}
