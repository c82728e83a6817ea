import Foundation
import OTMedia
import OTSession

/// A demo client's session and publisher messages, waited on from the main thread.
final class ClientEvents: SessionDelegate, PublisherDelegate, @unchecked Sendable {
    private let cond = NSCondition()
    private var connected = false
    private var failure: OTError?
    private var streams: [StreamInfo] = []
    private var published: StreamInfo?
    private var publisherStats: PublisherStats?
    /// `ot-demo --web`: the browser's streams and signals (set before the browser can join).
    var guests: WebGuests?
    /// Where device failures are told (they do not stop the run).
    var report: ((String) -> Void)?

    private func update(_ body: () -> Void) {
        cond.lock(); body(); cond.broadcast(); cond.unlock()
    }

    /// Waits up to `seconds` for `pick` to return a value; throws the first failure reported, or a timeout.
    func wait<T>(_ what: String, seconds: Double = 15, _ pick: (ClientEvents) -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(seconds)
        cond.lock(); defer { cond.unlock() }
        while true {
            if let failure { throw DemoFailure("\(what): \(failure)") }
            if let v = pick(self) { return v }
            if !cond.wait(until: deadline) { throw DemoFailure("timed out after \(Int(seconds)) s waiting for \(what)") }
        }
    }

    var isConnected: Bool { connected }
    /// Streams seen so far (a copy).
    var allStreams: [StreamInfo] { cond.lock(); defer { cond.unlock() }; return streams }
    var publishedStream: StreamInfo? { published }
    func stream(from connectionId: String) -> StreamInfo? { streams.first { $0.connectionId == connectionId } }
    var error: OTError? { cond.lock(); defer { cond.unlock() }; return failure }

    func sessionDidConnect(_ session: Session) { update { connected = true } }
    func session(_ session: Session, didFailWithError error: OTError) { update { failure = failure ?? error } }
    func session(_ session: Session, streamCreated stream: StreamInfo) {
        update { streams.append(stream) }
        guests?.streamCreated(stream)
    }
    func session(_ session: Session, streamDestroyed stream: StreamInfo) {
        update { streams.removeAll { $0.id == stream.id } }
        guests?.streamDestroyed(stream)
    }
    func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {
        guests?.signal(type: type, from: connection, data: data)
    }
    func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) { update { published = stream } }
    func publisher(_ publisher: Publisher, didFailWithError error: OTError) { update { failure = failure ?? error } }
    func publisher(_ publisher: Publisher, deviceFailed error: DeviceError) { report?("device: \(error) (the run goes on)") }
    func session(_ session: Session, deviceFailed error: DeviceError) { report?("device: \(error) (the run goes on)") }
}

/// Why the demo could not run or did not pass: printed, then the demo exits with code 1.
struct DemoFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}
