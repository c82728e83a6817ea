import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import XCTest

/// Test support shared by the server and session tests.

/// Records a session's delegate messages, in order, for assertions.
public final class Recorder: SessionDelegate, @unchecked Sendable {
    public enum Event: Equatable {
        case connected, disconnected, failed(Int32)
        case connectionCreated(String), connectionDestroyed(String)
        case streamCreated(StreamInfo), streamDestroyed(String)
        case changed(String, StreamPropertyChange)
        case signal(String, String, String?)
        case muteForced(Bool, String?)
        case reconnecting, reconnected
        case deviceFailed(DeviceKind, OTErrorCode)
    }
    private let lock = NSLock()
    private var _events: [Event] = []
    private var _errors: [OTError] = []
    let cond = NSCondition()
    public let name: String
    public init(_ name: String = "") { self.name = name }

    public var events: [Event] { lock.withLock { _events } }
    /// The errors of `session(_:didFailWithError:)`, in order.
    public var errors: [OTError] { lock.withLock { _errors } }
    private func add(_ e: Event) {
        lock.withLock { _events.append(e) }
        cond.lock(); cond.broadcast(); cond.unlock()
    }
    /// Waits (up to 10 s, a generous bound for a loaded machine) until `pred` holds on the events.
    @discardableResult
    public func wait(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ pred: ([Event]) -> Bool) -> [Event] {
        let deadline = Date().addingTimeInterval(10)
        cond.lock(); defer { cond.unlock() }
        while !pred(events) {
            if !cond.wait(until: deadline) { break }
        }
        let ev = events
        XCTAssertTrue(pred(ev), "\(name): timed out waiting for \(what); events: \(ev)", file: file, line: line)
        return ev
    }
    public func waitFor(_ e: Event, file: StaticString = #filePath, line: UInt = #line) {
        wait("\(e)", file: file, line: line) { $0.contains(e) }
    }
    public func clear() { lock.withLock { _events = [] } }

    public func sessionDidConnect(_ session: Session) { add(.connected) }
    public func sessionDidDisconnect(_ session: Session) { add(.disconnected) }
    public func session(_ session: Session, didFailWithError error: OTError) {
        lock.withLock { _errors.append(error) }
        add(.failed(error.code.rawValue))
    }
    public func session(_ session: Session, connectionCreated connection: ConnectionInfo) { add(.connectionCreated(connection.id)) }
    public func session(_ session: Session, connectionDestroyed connection: ConnectionInfo) { add(.connectionDestroyed(connection.id)) }
    public func session(_ session: Session, streamCreated stream: StreamInfo) { add(.streamCreated(stream)) }
    public func session(_ session: Session, streamDestroyed stream: StreamInfo) { add(.streamDestroyed(stream.id)) }
    public func session(_ session: Session, stream: StreamInfo, didChange change: StreamPropertyChange) { add(.changed(stream.id, change)) }
    public func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {
        add(.signal(type, data, connection?.id))
    }
    public func session(_ session: Session, muteForced info: MuteForcedInfo) { add(.muteForced(info.active, info.streamId)) }
    public func sessionDidBeginReconnecting(_ session: Session) { add(.reconnecting) }
    public func sessionDidReconnect(_ session: Session) { add(.reconnected) }
    public func session(_ session: Session, deviceFailed error: DeviceError) { add(.deviceFailed(error.kind, error.error.code)) }
}

/// Waits for a completion's value.
public final class Box<T>: @unchecked Sendable {
    private let sem = DispatchSemaphore(value: 0)
    private var value: T?
    public init() {}
    public func put(_ v: T) { value = v; sem.signal() }
    public func get(file: StaticString = #filePath, line: UInt = #line) -> T? {
        if sem.wait(timeout: .now() + 10) == .timedOut { XCTFail("no completion", file: file, line: line); return nil }
        return value
    }
}

