import OTBase

/// The sans-IO control of a routed publisher's connection to the media router (as `SubscriberControl` is of a
/// subscription): link events and time in; which peer connection to open or close, the publisher's failure and the
/// next deadline out. The session's executor drives it.
///
/// The first connection must come up within `connectTimeout` (else 1541). When an established connection fails, the
/// stream is republished on a new peer connection (new offer, same stream) at once and then every `retryPause`, for
/// `republishWindow` from the failure; after that the publisher fails with 1610 (1541 when the last attempt timed out).
/// Refusals (the router refused the offer, sent a bad answer or closed the connection) fail at once.
struct PublisherLinkControl {
    enum Output: Equatable {
        /// Make a peer connection to the router with this id and offer it for the stream.
        case open(peerId: String)
        /// Close this peer connection and tell the router.
        case close(peerId: String)
        /// The publisher failed: report the error and end the stream.
        case failed(OTError)
    }

    private enum Phase: Equatable {
        case idle
        case connecting(deadline: Instant)
        case connected
        /// A new connection is attempted at `retryAt` (nil while an attempt runs) until `giveUpAt`.
        case republishing(giveUpAt: Instant, retryAt: Instant?)
        case over
    }

    let connectTimeout: Duration
    let republishWindow: Duration
    static let retryPause: Duration = .milliseconds(500)

    private var phase = Phase.idle
    private var link: ControlledLink
    /// Republications so far.
    private(set) var republishCount = 0

    init(peerIdBase: String, connectTimeout: Duration = .seconds(15), republishWindow: Duration = .seconds(15)) {
        link = ControlledLink(base: peerIdBase)
        self.connectTimeout = connectTimeout
        self.republishWindow = republishWindow
    }

    var nextDeadline: Instant? {
        switch phase {
        case .connecting(let d): d
        case .republishing(let giveUp, let retry): retry.map { min($0, giveUp) } ?? giveUp
        case .idle, .connected, .over: nil
        }
    }

    mutating func start(now: Instant) -> [Output] {
        guard phase == .idle else { return [] }
        phase = .connecting(deadline: now + connectTimeout)
        return [openNext()]
    }

    /// The current peer connection's id.
    var peerId: String? { link.peerId }

    mutating func linkConnected(_ id: String) {
        guard link.isCurrent(id) else { return }
        switch phase {
        case .connecting, .republishing: phase = .connected
        case .idle, .connected, .over: break
        }
    }

    /// The connection `id` failed, or its offer was lost with a dropped signaling connection (1022).
    mutating func linkFailed(_ id: String, _ error: OTError, now: Instant) -> [Output] {
        guard link.isCurrent(id) else { return [] }
        let close = closeLink()
        switch phase {
        case .connecting where error.code != .connectionDropped:
            phase = .over
            return close + [.failed(OTError(.publisherWebRTC, "media connection failed: \(error.message)"))]
        case .connecting, .connected:
            phase = .republishing(giveUpAt: now + republishWindow, retryAt: now)
            return close + tick(now: now)
        case .republishing(let giveUpAt, _):
            let retry = now + Self.retryPause
            guard retry < giveUpAt else {
                phase = .over
                return close + [.failed(OTError(.publisherWebRTC, "media connection failed: \(error.message)"))]
            }
            phase = .republishing(giveUpAt: giveUpAt, retryAt: retry)
            return close
        case .idle, .over:
            return []
        }
    }

    /// The router refused the offer, sent an answer that cannot be used, or closed the connection: fail with `error`.
    mutating func refused(_ id: String, _ error: OTError) -> [Output] {
        guard link.isCurrent(id), phase != .over else { return [] }
        phase = .over
        return closeLink() + [.failed(error)]
    }

    mutating func tick(now: Instant) -> [Output] {
        switch phase {
        case .connecting(let d) where now >= d:
            phase = .over
            return closeLink() + [.failed(OTError(.publisherTimedOut, "media to the router did not connect within \(connectTimeout)"))]
        case .republishing(let giveUpAt, _) where now >= giveUpAt:
            phase = .over
            let close = closeLink()
            // The last attempt was still running: it timed out (1541); else the attempts failed (1610).
            return close + [close.isEmpty
                ? .failed(OTError(.publisherWebRTC, "media connection could not be re-established within \(republishWindow)"))
                : .failed(OTError(.publisherTimedOut, "media to the router did not reconnect within \(republishWindow)"))]
        case .republishing(let giveUpAt, let retry?) where now >= retry:
            phase = .republishing(giveUpAt: giveUpAt, retryAt: nil)
            republishCount += 1
            return [openNext()]
        default:
            return []
        }
    }

    /// The stream ends (unpublish, disconnect): close the connection, no event.
    mutating func stop() -> [Output] {
        phase = .over
        return closeLink()
    }

    private mutating func openNext() -> Output { .open(peerId: link.openNext()) }

    /// Closes the connection if it is open.
    private mutating func closeLink() -> [Output] { link.close().map { [Output.close(peerId: $0)] } ?? [] }
}
