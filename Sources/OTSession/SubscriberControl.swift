import OTBase
import OTWire

/// The sans-IO control of one subscription (as `SignalingClient` is of the session): what the subscriber's media
/// connection did and the time go in; which peer connection to open or close, what to tell the delegate and the next
/// deadline come out. Owns no link, queue or clock; the session's executor drives it.
///
/// The events follow the seeds' subscriber semantics: `connected` once media first flows; `disconnected` and
/// `reconnected` only around a temporary interruption — this subscriber's own connection failing (it is
/// re-established on a new peer connection) or, in routed sessions, the publisher's connection to the media router
/// dropping (the router says so with `publisherMedia`); when the subscription cannot be re-established within
/// `connectTimeout`, `streamLost` (the session reports the stream destroyed). The app's unsubscribe, the stream's
/// destruction and the session's end are not subscriber events (`stop`). A first connection that never comes up fails
/// (`failed`: 1600, 1542 on timeout, or the server's refusal).
///
/// A failed connection is announced (`disconnected`) only after `settleDelay`, or together with `reconnected` when it
/// comes back sooner: a connection closed because the stream ended (the far side closes it just as the server's word of
/// the stream's end is on its way) is then the stream's end, not an interruption.
struct SubscriberControl {
    enum Event: Equatable {
        case connected, disconnected, reconnected
        case failed(OTError)
        /// The subscription could not be re-established: report the stream destroyed.
        case streamLost
    }

    enum Output: Equatable {
        /// Make a peer connection with this id and offer it for the stream (a later one restarts the receive pipelines).
        case open(peerId: String)
        /// Close this peer connection and tell the other side.
        case close(peerId: String)
        /// Ask the publisher for a keyframe (media resumed).
        case requestKeyframe
        case event(Event)
    }

    private enum Phase: Equatable {
        case idle
        /// The first connection; fails at `deadline`.
        case connecting(deadline: Instant)
        case connected
        /// Routed: the publisher's link to the router is down; ours is up.
        case publisherDown
        /// Our connection failed: a new one is attempted at `retryAt` (nil while an attempt runs) until `giveUpAt`;
        /// `disconnected` is announced at `announceAt` (nil once announced).
        case reconnecting(giveUpAt: Instant, retryAt: Instant?, announceAt: Instant?)
        case failed
        case ended
    }

    /// How long the first connection, and the re-establishment after a failure, may take.
    let connectTimeout: Duration
    /// The pause between failed attempts (the first attempt after a failure goes at once).
    static let retryPause: Duration = .milliseconds(500)
    /// How long a failure waits before it is announced as an interruption.
    static let settleDelay: Duration = .seconds(1)

    private var phase = Phase.idle
    private var link: ControlledLink
    /// Media reconnections so far (new peer connections after a failure).
    private(set) var reconnections = 0

    /// `peerIdBase`: unique on the server (peer ids are `base-1`, `base-2`, ...).
    init(peerIdBase: String, connectTimeout: Duration) {
        link = ControlledLink(base: peerIdBase)
        self.connectTimeout = connectTimeout
    }

    /// The current peer connection's id.
    var peerId: String? { link.peerId }

    /// True while media flows: from `connected` to the end, except during an interruption.
    var isConnected: Bool { phase == .connected }
    /// True once the subscription has ended (stopped, failed or lost).
    var isOver: Bool { phase == .ended || phase == .failed }

    /// When `tick` should next be called, if at all.
    var nextDeadline: Instant? {
        switch phase {
        case .connecting(let d): d
        case .reconnecting(let giveUp, let retry, let announce): [giveUp, retry, announce].compactMap { $0 }.min()
        case .idle, .connected, .publisherDown, .failed, .ended: nil
        }
    }

    mutating func start(now: Instant) -> [Output] {
        guard phase == .idle else { return [] }
        phase = .connecting(deadline: now + connectTimeout)
        return [openNext()]
    }

    /// The peer connection `id` is up: media flows.
    mutating func linkConnected(_ id: String, now: Instant) -> [Output] {
        guard link.isCurrent(id) else { return [] }
        switch phase {
        case .connecting:
            phase = .connected
            return [.event(.connected)]
        case .reconnecting(_, _, let announceAt):
            phase = .connected
            return [.requestKeyframe] + (announceAt != nil ? [.event(.disconnected)] : []) + [.event(.reconnected)]
        case .idle, .connected, .publisherDown, .failed, .ended:
            return []
        }
    }

    /// The peer connection `id` failed (ICE failed, consent lost, DTLS closed, the other side closed it, or its offer
    /// was lost with a dropped signaling connection).
    mutating func linkFailed(_ id: String, _ error: OTError, now: Instant) -> [Output] {
        guard link.isCurrent(id) else { return [] }
        let close = closeLink()
        switch phase {
        case .connecting where error.code == .connectionDropped:
            // The offer went with the signaling connection: offer again (queued until the session has reconnected).
            return close + [openNext()]
        case .connecting:
            phase = .failed
            return close + [.event(.failed(Self.firstConnectionError(error)))]
        case .connected, .publisherDown:
            // The publisher's outage already announced the interruption.
            let announceAt: Instant? = phase == .connected ? now + Self.settleDelay : nil
            phase = .reconnecting(giveUpAt: now + connectTimeout, retryAt: now, announceAt: announceAt)
            return close + tick(now: now)
        case .reconnecting(let giveUpAt, _, let announceAt):
            let retry = now + Self.retryPause
            phase = .reconnecting(giveUpAt: giveUpAt, retryAt: retry < giveUpAt ? retry : nil, announceAt: announceAt)
            return close + (retry < giveUpAt ? [] : giveUp())
        case .idle, .failed, .ended:
            return []
        }
    }

    /// The server refused the offer of peer connection `id` (reply with a code).
    mutating func offerRefused(_ id: String, _ error: OTError, now: Instant) -> [Output] {
        guard link.isCurrent(id) else { return [] }
        if error.code == .connectionDropped { return linkFailed(id, error, now: now) }
        switch phase {
        case .connecting:
            phase = .failed
            return closeLink() + [.event(.failed(Self.firstConnectionError(error)))]
        case .reconnecting:
            // The stream (or our right to it) is gone: the subscription cannot be re-established.
            return closeLink() + giveUp()
        case .idle, .connected, .publisherDown, .failed, .ended:
            return []
        }
    }

    /// Routed: what the router says about the publisher's link, for our peer connection `id`.
    mutating func publisherMedia(_ id: String, _ state: PublisherMediaState, now: Instant) -> [Output] {
        guard id == link.peerId else { return [] }
        switch (phase, state) {
        case (.connected, .interrupted):
            phase = .publisherDown
            return [.event(.disconnected)]
        case (.publisherDown, .resumed):
            phase = .connected
            return [.requestKeyframe, .event(.reconnected)]
        default:
            return []
        }
    }

    /// Deadlines: the first connection's, the re-establishment's, and the next attempt.
    mutating func tick(now: Instant) -> [Output] {
        switch phase {
        case .connecting(let deadline) where now >= deadline:
            phase = .failed
            return closeLink() + [.event(.failed(OTError(.subscriberTimedOut, "media did not connect within \(connectTimeout)")))]
        case .reconnecting(let giveUpAt, _, _) where now >= giveUpAt:
            return closeLink() + giveUp()
        case .reconnecting(let giveUpAt, let retryAt, let announceAt):
            var out: [Output] = []
            var retry = retryAt, announce = announceAt
            if let a = announce, now >= a {
                announce = nil
                out.append(.event(.disconnected))
            }
            if let r = retry, now >= r {
                retry = nil
                reconnections += 1
                out.append(openNext())
            }
            phase = .reconnecting(giveUpAt: giveUpAt, retryAt: retry, announceAt: announce)
            return out
        default:
            return []
        }
    }

    /// The subscription ends by the app's unsubscribe, the stream's destruction or the session's end: no event.
    mutating func stop() -> [Output] {
        phase = .ended
        return closeLink()
    }

    private mutating func openNext() -> Output { .open(peerId: link.openNext()) }

    /// Closes the connection if it is open.
    private mutating func closeLink() -> [Output] { link.close().map { [Output.close(peerId: $0)] } ?? [] }

    private mutating func giveUp() -> [Output] {
        // An interruption not yet announced is not announced now: the stream's end is what the app hears of.
        phase = .ended
        return [.event(.streamLost)]
    }

    /// A first connection's failure as the subscriber reports it: the server's refusals and timeouts keep their
    /// codes; anything else is a media (WebRTC) failure, 1600.
    private static func firstConnectionError(_ e: OTError) -> OTError {
        let kept: [OTErrorCode] = [.subscriberWebRTC, .subscriberTimedOut, .serverCannotFindStream, .forceUnpublishOrInvalidStream,
                                   .streamLimitExceeded]
        return kept.contains(e.code) ? e : OTError(.subscriberWebRTC, e.message)
    }
}
