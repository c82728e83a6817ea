import Foundation
import OTSession

/// `ot-demo --web`: the streams a browser (the server's /demo page) publishes into the demo session. The demo's
/// subscribing client receives each of them; a status line per stream each second shows what arrives, and the
/// browser's signals are printed as they come. Session messages arrive on the session's delegate queue, the status
/// is read from the main thread: all state is under a lock.
final class WebGuests: @unchecked Sendable {
    private struct Guest {
        let stream: StreamInfo
        let subscriber: Subscriber
        let receiver: GuestReceiver
    }

    private let lock = NSLock()
    private let session: Session
    /// The demo's own publishing client, whose stream is not a guest.
    private let demoConnection: String
    private let out: (String) -> Void
    private var guests: [String: Guest] = [:]
    private var order: [String] = []
    private var stopped = false

    init(session: Session, demoConnection: String, out: @escaping (String) -> Void) {
        self.session = session; self.demoConnection = demoConnection; self.out = out
    }

    /// A stream appeared: subscribe to it unless it is the demo's own.
    func streamCreated(_ stream: StreamInfo) {
        guard stream.connectionId != demoConnection else { return }
        let receiver = GuestReceiver()
        let sub = Subscriber(stream: stream, delegate: receiver, settings: SubscriberSettings(playAudio: false))
        let isNew = lock.withLock { () -> Bool in
            guard !stopped, guests[stream.id] == nil else { return false }
            guests[stream.id] = Guest(stream: stream, subscriber: sub, receiver: receiver)
            order.append(stream.id)
            return true
        }
        guard isNew else { return }
        out("browser stream \(stream.id) \"\(stream.name)\" (\(stream.width)x\(stream.height)) arrived: subscribing")
        do { try session.subscribe(sub) } catch { out("could not subscribe to \"\(stream.name)\": \(error)") }
    }

    func streamDestroyed(_ stream: StreamInfo) {
        guard let g = lock.withLock({ () -> Guest? in
            order.removeAll { $0 == stream.id }
            return guests.removeValue(forKey: stream.id)
        }) else { return }
        try? session.unsubscribe(g.subscriber)
        out("browser stream \"\(stream.name)\" left after \(g.subscriber.stats.framesDecoded) decoded frames")
    }

    func signal(type: String, from: ConnectionInfo?, data: String) {
        guard from?.id != demoConnection else { return }
        out("signal \"\(type)\" from \(from.map { $0.data.isEmpty ? $0.id : $0.data } ?? "the server"): \(data.prefix(200))")
    }

    /// One line per guest stream: what its subscriber decoded over the last second.
    func statusLines() -> [String] {
        lock.withLock { order.compactMap { guests[$0] } }.map { g in
            let s = g.subscriber.stats
            let media = g.receiver.connected ? String(format: "video %.1f fps %dx%d %.0f kbit/s, %d frames decoded; audio %d packets",
                                                      s.framesPerSecond, s.frameWidth, s.frameHeight, s.videoBitrateBps / 1000,
                                                      s.framesDecoded, s.audioPacketsReceived)
                : "connecting"
            return "  browser \"\(g.stream.name)\": \(media)"
        }
    }

    /// Unsubscribes from every guest; returns a summary line per guest.
    func stop() -> [String] {
        let all = lock.withLock { () -> [Guest] in
            stopped = true
            defer { guests = [:]; order = [] }
            return order.compactMap { guests[$0] }
        }
        return all.map { g in
            let s = g.subscriber.stats
            try? session.unsubscribe(g.subscriber)
            return "  browser \"\(g.stream.name)\": \(s.framesDecoded) frames decoded (\(s.frameWidth)x\(s.frameHeight)), "
                + "\(s.audioPacketsReceived) audio packets"
        }
    }
}

/// Whether a guest's media connected (frames and audio are counted by the subscriber's own statistics).
private final class GuestReceiver: SubscriberDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var didConnect = false
    var connected: Bool { lock.withLock { didConnect } }
    func subscriberDidConnect(toStream subscriber: Subscriber) { lock.withLock { didConnect = true } }
}
