import OTBase

/// Keyframe-request aggregation for one routed stream (sans-IO: the router passes the time and runs the one timer).
///
/// Leading edge: a request when no window is open goes to the publisher at once and opens a window of `interval`.
/// Inside the window, a request is folded into the one already sent while the keyframe it asked for has not yet
/// passed the router (that keyframe serves it). Once that keyframe has passed, a subscriber's repair request waits for
/// one trailing request at the window's end (which opens the next window), so a burst of requests costs the publisher
/// at most one keyframe per window plus one; a new receiver's first-keyframe request (a subscriber just connected, or
/// video resumed) goes at once, since it can only be served by a keyframe still to come. Every request sent opens a
/// window whose end is checked (`windowEnded`): a request goes again then while a receiver still waits for its first
/// keyframe (the request or the keyframe was lost), window after window, so nobody is starved.
struct KeyframeRequestAggregator {
    enum Kind { case firstKeyframe, repair }
    enum Decision: Equatable {
        /// Send a keyframe request to the publisher now, and call `windowEnded` when the window it opens ends
        /// (`now + interval`).
        case send
        /// Folded into a request already sent or already due.
        case folded
        /// Folded; call `windowEnded` at this instant.
        case checkAt(Instant)
    }

    let interval: Duration
    private var lastSent: Instant?
    /// A keyframe passed the router after `lastSent`.
    private(set) var keyframeSinceSent = true
    /// A repair request waits for the window's end.
    private var trailing = false
    /// `windowEnded` is due at the end of the current window.
    private var checkPending = false

    init(interval: Duration) { self.interval = interval }

    /// Whether the router should look for a keyframe start in the publisher's video (one was asked for).
    var awaitingKeyframe: Bool { !keyframeSinceSent }

    mutating func request(_ kind: Kind, now: Instant) -> Decision {
        guard let last = lastSent, now - last < interval else { return sent(now) }
        if kind == .firstKeyframe && keyframeSinceSent { return sent(now) }
        if kind == .repair && keyframeSinceSent { trailing = true }
        guard !checkPending else { return .folded }
        checkPending = true
        return .checkAt(last + interval)
    }

    /// A keyframe start was forwarded.
    mutating func keyframeForwarded() { keyframeSinceSent = true }

    /// When a check asked for by `checkAt` is due: `.send` (a repair request waited, or a receiver still waits for a
    /// first keyframe; sending opens the next window), `.folded` (nothing to send), or `.checkAt` again when a later
    /// request opened a new window meanwhile.
    mutating func windowEnded(now: Instant, receiversWaiting: Bool) -> Decision {
        if let last = lastSent, now - last < interval {
            checkPending = true
            return .checkAt(last + interval)
        }
        checkPending = false
        guard trailing || receiversWaiting else { return .folded }
        return sent(now)
    }

    private mutating func sent(_ now: Instant) -> Decision {
        lastSent = now
        keyframeSinceSent = false
        trailing = false
        checkPending = true
        return .send
    }
}
