import OTBase
import OTWire

/// A client's media offer, handed to the media router of a routed session.
public struct MediaOfferRequest: Sendable, Equatable {
    public var sessionId: String
    /// The offering client's connection.
    public var connectionId: String
    /// The peer connection's id, chosen by the client and unique on the server.
    public var peerId: String
    /// The stream published (`direction == .publish`, the client's own) or subscribed to.
    public var streamId: String
    public var direction: MediaDirection
    /// The offer's SDP text.
    public var sdp: String
    /// The stream's publisher allows its video to be dropped for quality (`audioFallbackEnabled`).
    public var audioFallbackEnabled: Bool

    public init(sessionId: String, connectionId: String, peerId: String, streamId: String, direction: MediaDirection, sdp: String,
                audioFallbackEnabled: Bool = true) {
        self.sessionId = sessionId; self.connectionId = connectionId; self.peerId = peerId
        self.streamId = streamId; self.direction = direction; self.sdp = sdp; self.audioFallbackEnabled = audioFallbackEnabled
    }
}

/// The media router of routed sessions, as `SessionServer` drives it (`SessionServer.mediaRouting`).
/// The server has already checked roles and streams when it calls `handleOffer`. Every method is called
/// on the server's event-loop thread and must not block; completions may run on any thread.
public protocol MediaRouting: AnyObject, Sendable {
    /// Answers an offer with the answer's SDP text, or fails it with an `OTError` (sent to the client
    /// as a `reply` with that code).
    func handleOffer(_ offer: MediaOfferRequest, completion: @escaping @Sendable (Result<String, OTError>) -> Void)
    /// The peer connection ended (client `mediaClose`, its stream was destroyed, or its client left).
    func close(peerId: String)
    /// A subscriber's wishes for its peer connection: forward audio and/or video or not.
    func setSubscription(peerId: String, audio: Bool, video: Bool)
    /// The client left the session: drop everything it had (the server also calls `close` for each peer).
    func connectionGone(connectionId: String)
    /// Where the router's audio-fallback decisions for subscribers' peer connections go (the server sends each to
    /// the subscriber as `mediaQuality`). Set once, before clients publish; may be called on any thread.
    func setQualityHandler(_ handler: @escaping @Sendable (_ peerId: String, _ event: MediaQualityEvent) -> Void)
    /// Where the router reports a stream's publisher link going down (`up` false: its connection failed or was closed
    /// while the stream had subscribers) and coming back (`up` true: a new publisher connection of the stream is up);
    /// the server tells the stream's subscribers (`publisherMedia`). Set once, before clients publish; may be called
    /// on any thread.
    func setPublisherLinkHandler(_ handler: @escaping @Sendable (_ streamId: String, _ up: Bool) -> Void)
}

extension MediaRouting {
    /// A router without quality fallback ignores the handler.
    public func setQualityHandler(_ handler: @escaping @Sendable (_ peerId: String, _ event: MediaQualityEvent) -> Void) {}
    /// A router that does not watch publishers' links ignores the handler.
    public func setPublisherLinkHandler(_ handler: @escaping @Sendable (_ streamId: String, _ up: Bool) -> Void) {}
}
