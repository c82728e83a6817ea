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
    /// The server's own media router, when it runs one (`routed`, or `media` given): routed sessions' media goes
    /// through it.
    var router: MediaRouter? { server.mediaRouter }
    init(limits: ServerLimits = ServerLimits(), routed: Bool = false, media: SessionServer.MediaSettings? = nil) throws {
        server = SessionServer(.init(projects: [project], limits: limits, media: media ?? (routed ? .init() : nil)))
        try server.start()
    }
    deinit { server.stop() }

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
