import Foundation
import OTServer
import OTSession
import OTWire
import XCTest

/// Records a session's delegate messages, in order, for assertions.
final class Recorder: SessionDelegate, @unchecked Sendable {
    enum Event: Equatable {
        case connected, disconnected, failed(Int32)
        case connectionCreated(String), connectionDestroyed(String)
        case streamCreated(StreamInfo), streamDestroyed(String)
        case changed(String, StreamPropertyChange)
        case signal(String, String, String?)
        case muteForced(Bool, String?)
    }
    private let lock = NSLock()
    private var _events: [Event] = []
    let cond = NSCondition()
    let name: String
    init(_ name: String = "") { self.name = name }

    var events: [Event] { lock.withLock { _events } }
    private func add(_ e: Event) {
        lock.withLock { _events.append(e) }
        cond.lock(); cond.broadcast(); cond.unlock()
    }
    /// Waits (up to 10 s, a generous bound for a loaded machine) until `pred` holds on the events.
    @discardableResult
    func wait(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ pred: ([Event]) -> Bool) -> [Event] {
        let deadline = Date().addingTimeInterval(10)
        cond.lock(); defer { cond.unlock() }
        while !pred(events) {
            if !cond.wait(until: deadline) { break }
        }
        let ev = events
        XCTAssertTrue(pred(ev), "\(name): timed out waiting for \(what); events: \(ev)", file: file, line: line)
        return ev
    }
    func waitFor(_ e: Event, file: StaticString = #filePath, line: UInt = #line) {
        wait("\(e)", file: file, line: line) { $0.contains(e) }
    }
    func clear() { lock.withLock { _events = [] } }

    func sessionDidConnect(_ session: Session) { add(.connected) }
    func sessionDidDisconnect(_ session: Session) { add(.disconnected) }
    func session(_ session: Session, didFailWithError error: OTError) { add(.failed(error.code.rawValue)) }
    func session(_ session: Session, connectionCreated connection: ConnectionInfo) { add(.connectionCreated(connection.id)) }
    func session(_ session: Session, connectionDestroyed connection: ConnectionInfo) { add(.connectionDestroyed(connection.id)) }
    func session(_ session: Session, streamCreated stream: StreamInfo) { add(.streamCreated(stream)) }
    func session(_ session: Session, streamDestroyed stream: StreamInfo) { add(.streamDestroyed(stream.id)) }
    func session(_ session: Session, stream: StreamInfo, didChange change: StreamPropertyChange) { add(.changed(stream.id, change)) }
    func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {
        add(.signal(type, data, connection?.id))
    }
    func session(_ session: Session, muteForced info: MuteForcedInfo) { add(.muteForced(info.active, info.streamId)) }
}

/// Waits for a completion's value.
final class Box<T>: @unchecked Sendable {
    private let sem = DispatchSemaphore(value: 0)
    private var value: T?
    func put(_ v: T) { value = v; sem.signal() }
    func get(file: StaticString = #filePath, line: UInt = #line) -> T? {
        if sem.wait(timeout: .now() + 10) == .timedOut { XCTFail("no completion", file: file, line: line); return nil }
        return value
    }
}

/// An embedded server with one project, started on a free loopback port.
final class TestServer {
    let project = Project.generate()
    let server: SessionServer
    init(limits: ServerLimits = ServerLimits()) throws {
        server = SessionServer(.init(projects: [project], limits: limits))
        try server.start()
    }
    deinit { server.stop() }

    func session(relayed: Bool = false) throws -> String { try server.createSession(apiKey: project.apiKey, relayed: relayed) }

    /// A connected client session with the given role.
    func client(_ sessionId: String, role: SessionRole = .publisher, data: String? = nil, suppressed: Bool = false, name: String = "",
                file: StaticString = #filePath, line: UInt = #line) throws -> (Session, Recorder) {
        let rec = Recorder(name)
        let s = Session(apiKey: project.apiKey, sessionId: sessionId, delegate: rec,
                        settings: SessionSettings(serverURL: server.signalingURL, connectionEventsSuppressed: suppressed))
        try s.connect(token: server.token(sessionId: sessionId, role: role, data: data))
        rec.waitFor(.connected, file: file, line: line)
        return (s, rec)
    }
}
