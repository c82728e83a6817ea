import Foundation
import OTBase
import OTWire

/// One end of a peer connection that takes media signaling from the server (a subscriber's connection,
/// or one of the publisher's).
protocol MediaSignalingPeer: AnyObject, Sendable {
    func mediaSignal(_ message: ServerMessage)
}

/// Receives what the media layer needs from the session: offers for the publisher (relayed sessions)
/// and session events (streams gone or changed, disconnect).
protocol SessionMediaClient: AnyObject, Sendable {
    func sessionEvent(_ event: SessionEvent, session: Session)
}

/// A session's media signaling switchboard: routes `mediaOffer`/`mediaAnswer`/… by peer id, and session
/// events to the publisher and subscribers. Messages are handled in order on one serial queue, never
/// under the session's lock.
final class SessionMedia: @unchecked Sendable {
    let queue = DispatchQueue(label: "otsession.media-signaling")
    private let lock = NSLock()
    private var peers: [String: any MediaSignalingPeer] = [:]
    private var offerHandler: (@Sendable (ServerMessage) -> Void)?
    private var clients: [ObjectIdentifier: any SessionMediaClient] = [:]
    /// The stream id of this client's publisher, when publishing.
    private var ownStreamIds: Set<String> = []

    func register(peerId: String, _ peer: any MediaSignalingPeer) { lock.withLock { peers[peerId] = peer } }
    func unregister(peerId: String) { lock.withLock { _ = peers.removeValue(forKey: peerId) } }
    func setOfferHandler(_ h: (@Sendable (ServerMessage) -> Void)?) { lock.withLock { offerHandler = h } }
    func attach(_ c: any SessionMediaClient) { lock.withLock { clients[ObjectIdentifier(c)] = c } }
    func detach(_ c: any SessionMediaClient) { lock.withLock { _ = clients.removeValue(forKey: ObjectIdentifier(c)) } }
    func setOwnStream(_ id: String, published: Bool) {
        lock.withLock { if published { ownStreamIds.insert(id) } else { ownStreamIds.remove(id) } }
    }
    func isOwnStream(_ id: String) -> Bool { lock.withLock { ownStreamIds.contains(id) } }
    var hasClients: Bool { lock.withLock { !clients.isEmpty } }

    /// A media message from the server (called under the session's lock: only queues work).
    func received(_ m: ServerMessage) {
        queue.async { [self] in
            switch m {
            case .mediaOffer:
                let h = lock.withLock { offerHandler }
                h?(m)
            case .mediaAnswer(let peerId, _), .mediaCandidate(let peerId, _), .mediaClose(let peerId, _), .subscriberSettings(let peerId, _, _):
                let p = lock.withLock { peers[peerId] }
                p?.mediaSignal(m)
            default:
                break
            }
        }
    }

    /// A session event, on the delegate queue before the session's delegate sees it.
    func sessionEvent(_ e: SessionEvent, session: Session) {
        let cs = lock.withLock { Array(clients.values) }
        for c in cs { c.sessionEvent(e, session: session) }
    }
}
