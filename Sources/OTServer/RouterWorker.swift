import Dispatch
import OTBase
import OTTransport
import OTWire
import Synchronization

/// The thin driver of one `RouterCore`: one UDP socket and its IO thread (`MediaEndpoint`), the ICE-lite connections
/// on it, and the sessions a `MediaRouter` pinned to this worker. The core and the connection table are touched only
/// on the IO thread: packets and connection events arrive there; control calls from other threads are queued to it
/// (`perform`) and wait for their result, so they see the state as the forwarding path leaves it. No lock is taken
/// and no timer source runs on the forwarding path: the core's deadline is the IO thread's.
final class RouterWorker: MediaEndpointOwner, @unchecked Sendable {
    typealias Completion = @Sendable (Result<String, OTError>) -> Void
    typealias PeerHandle = RouterCore.PeerHandle

    let endpoint: MediaEndpoint
    let config: RouterCore.Config

    // IO thread only (or, once stopped, under `stoppedLock`).
    private var core: RouterCore
    private var links: [PeerHandle: PeerConnectionDriver] = [:] {
        didSet { forwardLinks = links.mapValues { Unmanaged.passUnretained($0) } }
    }
    /// `links` unretained, for the forwarding path: a lookup in `links` retains the driver, and a driver has a side table
    /// (`ConnectionDeadlines` holds it weakly), so each retain and release took the slow path (`incrementSlow`, 2 % of the
    /// router thread at N = 16). `links` keeps every one alive, and a forward runs inside `drive`, which defers connection
    /// events, so none leaves `links` during it.
    private var forwardLinks: [PeerHandle: Unmanaged<PeerConnectionDriver>] = [:]
    /// Subscribe offers waiting for their publisher, by the token the core holds.
    private var pendingOffers: [Int: (offer: MediaOfferRequest, completion: Completion)] = [:]
    /// The driver is calling out (sending, asking for keyframes): connection events delivered meanwhile wait here.
    private var busy = false
    private var deferred: [(event: PeerConnectionEvent, handle: PeerHandle, publisher: Bool)] = []
    private var deadline: Instant?

    private let stopped = Atomic<Bool>(false)
    private let stoppedLock = Lock()
    /// Where callers of `perform` wait for their work to be done (one condition for all of them: no allocation per call).
    private let performed = Condition()
    /// The server's handlers, set once (plain fields under a lock: a closure taken out of `Mutex.withLock` leaked).
    private let handlerLock = Lock()
    private var qualityHandler: (@Sendable (String, MediaQualityEvent) -> Void)?
    private var linkHandler: (@Sendable (String, Bool) -> Void)?
    /// Handles and offer tokens, unique in the process.
    private static let nextHandle = Atomic<Int>(1)

    init(bind: TransportAddress, advertise: IPAddress?, config: RouterCore.Config) throws {
        endpoint = try MediaEndpoint(bind: bind, advertise: advertise)
        self.config = config
        core = RouterCore(config: config, now: MonotonicClock.now())
        endpoint.setOwner(self)
        endpoint.async { [weak self] in self?.updateDeadline() }
    }

    func setQualityHandler(_ h: @escaping @Sendable (String, MediaQualityEvent) -> Void) {
        handlerLock.lock(); qualityHandler = h; handlerLock.unlock()
    }
    func setPublisherLinkHandler(_ h: @escaping @Sendable (String, Bool) -> Void) {
        handlerLock.lock(); linkHandler = h; handlerLock.unlock()
    }

    // MARK: running on the IO thread

    /// Runs `body` on the IO thread (inline when called there) and returns its result. Once the worker is stopped
    /// it runs on the caller's thread.
    func perform<R>(_ body: @escaping (RouterWorker) -> R) -> R {
        if endpoint.isIOThread { return body(self) }
        if stopped.load(ordering: .acquiring) { return stoppedLock.withLock { body(self) } }
        let job = PerformJob<R>(body)
        endpoint.async { [self] in
            guard job.claim() else { return }
            job.run(self)
            performed.withLock {
                job.done = true
                performed.broadcast()
            }
        }
        var inline = false
        performed.withLock {
            while !job.done {
                // The IO thread stops after `stop()`: work it will not run any more is run here.
                if stopped.load(ordering: .acquiring), job.claim() { inline = true; return }
                performed.wait()
            }
        }
        if inline { stoppedLock.withLock { job.run(self) } }
        return job.result!
    }

    /// Runs a core call, then what it asked for; connection events delivered meanwhile are applied after it.
    private func drive(_ body: (RouterCore) -> Void) {
        busy = true
        body(core)
        runCommands()
        while !deferred.isEmpty {
            let events = deferred
            deferred = []
            for e in events { apply(e.event, e.handle, publisher: e.publisher) }
            runCommands()
        }
        busy = false
    }

    private func runCommands() {
        while let c = core.pollCommand() {
            switch c {
            case .requestKeyframe(let publisher, let ssrc):
                // The core's aggregator paces them (a second pacer held a new subscriber's request for up to 100 ms
                // after the previous one, although the keyframe that one asked for had passed).
                links[publisher]?.requestKeyframe(ssrc: ssrc, paced: false)
            case .quality(let peerId, let event):
                Log.info("router", "audio fallback: \(event.rawValue) for peer \(peerId)")
                handlerLock.lock(); let handler = qualityHandler; handlerLock.unlock()
                handler?(peerId, event)
            case .publisherLink(let streamId, let up):
                Log.info("router", "stream \(streamId): publisher media \(up ? "resumed" : "interrupted")")
                handlerLock.lock(); let handler = linkHandler; handlerLock.unlock()
                handler?(streamId, up)
            }
        }
    }

    /// After a control call or timer: the core's next deadline becomes the IO thread's.
    private func updateDeadline() {
        guard !stopped.load(ordering: .relaxed) else { return }
        let d = core.nextDeadline
        guard d != deadline else { return }
        deadline = d
        endpoint.setTimerDeadline(d)
    }

    func endpointTimer(now: Instant) { timer(now: now) }

    /// The IO thread ended (also when its endpoint was stopped directly, not through `stop()`): from now on work runs on
    /// the caller's thread, and callers waiting for work it will not run take it over.
    func endpointStopped() {
        stopped.store(true, ordering: .releasing)
        performed.withLock { performed.broadcast() }
    }

    private func timer(now: Instant) {
        guard !stopped.load(ordering: .relaxed), let d = deadline, d <= now else { return }
        deadline = nil
        drive { $0.handleTimeout(now: now) }
        updateDeadline()
    }

    /// A connection's event: applied on the IO thread (queued to it from elsewhere; deferred while the driver calls out).
    private func event(_ e: PeerConnectionEvent, _ handle: PeerHandle, publisher: Bool) {
        guard !stopped.load(ordering: .relaxed) else { return }
        guard endpoint.isIOThread else {
            if case .rtp = e { return }  // only a connection's IO thread delivers media
            endpoint.async { [weak self] in self?.event(e, handle, publisher: publisher) }
            return
        }
        if busy {
            deferred.append((e, handle, publisher))
            return
        }
        drive { _ in apply(e, handle, publisher: publisher) }
        if case .rtp = e { return }
        updateDeadline()
    }

    private func apply(_ e: PeerConnectionEvent, _ handle: PeerHandle, publisher: Bool) {
        let now = MonotonicClock.now()
        if publisher {
            switch e {
            case .rtp(let received): forward(received.bytes, from: handle, now: now)
            case .packetsUnrecoverable(let ssrc, _): core.publisherPacketsUnrecoverable(handle, ssrc: ssrc, now: now)
            case .connected: core.publisherLink(handle, up: true)
            case .failed: core.publisherLink(handle, up: false)
            case .roundTripTime(let d): core.publisherRoundTripTime(handle, d)
            default: break
            }
            return
        }
        switch e {
        case .connected: core.subscriberConnected(handle, now: now)
        case .keyframeRequested: core.subscriberRequestedKeyframe(handle, now: now)
        case .receiverReport(let b): core.subscriberReport(handle, b)
        case .transportFeedback(let fb): core.subscriberFeedback(handle, fb)
        case .roundTripTime(let d): core.subscriberRoundTripTime(handle, d)
        case .retransmissionsRequested(let ssrc, let sequences):
            links[handle]?.resendRTP(ssrc: ssrc, core.retransmissions(for: handle, ssrc: ssrc, sequences: sequences, now: now))
        default: break
        }
    }

    /// The forwarding path: the core writes each subscriber's copy, the driver protects and sends them.
    private func forward(_ packet: [UInt8], from handle: PeerHandle, now: Instant) {
        core.receive(packet, from: handle, now: now)
        var packets = 0, bytes = 0
        for sub in core.forwards {
            guard let link = forwardLinks[sub.handle] else { continue }
            let n = sub.out.count
            if link._withUnsafeGuaranteedRef({ $0.sendRTP(&sub.out, now: now) }) { packets += 1; bytes += n }
        }
        for (h, p) in core.replays {
            guard let link = forwardLinks[h] else { continue }
            var p = p
            let n = p.count
            if link._withUnsafeGuaranteedRef({ $0.sendRTP(&p, now: now) }) { packets += 1; bytes += n }
        }
        core.recordSent(packets: packets, bytes: bytes)
    }

    // MARK: control (any thread but the IO thread's forwarding)

    func handleOffer(_ offer: MediaOfferRequest, completion: @escaping Completion) {
        do {
            switch offer.direction {
            case .publish: try publish(offer, completion)
            case .subscribe: try subscribe(offer, completion)
            }
        } catch let e as OTError {
            completion(.failure(e))
        } catch {
            completion(.failure(OTError(.internalError, "media router: \(error)")))
        }
    }

    private func makeLink(_ config: PeerConnectionConfig, publisher: Bool) throws -> (PeerHandle, PeerConnectionDriver) {
        let handle = Self.nextHandle.wrappingAdd(1, ordering: .relaxed).oldValue
        let driver = try endpoint.makePeerConnection(config: config) { [weak self] e in self?.event(e, handle, publisher: publisher) }
        return (handle, driver)
    }

    private func publish(_ offer: MediaOfferRequest, _ completion: @escaping Completion) throws {
        // The uplink repairs by NACK and RTX, without FEC: FEC packets would leave holes in the sequence numbers the router
        // forwards (each subscriber's downlink gets FEC of its own, for its own loss).
        var config = PeerConnectionConfig()
        config.videoFEC = false
        // Any video codec the router can tell keyframes of; the publisher's offer order picks.
        config.videoFormats = PayloadFormats.video
        let (handle, driver) = try makeLink(config, publisher: true)
        let answer: String
        do { answer = try driver.createAnswer(toOffer: offer.sdp) } catch { driver.close(); throw error }
        let media = driver.negotiated?.media ?? []
        let (replaced, waiting) = perform { w -> (PeerConnectionDriver?, [(offer: MediaOfferRequest, completion: Completion)]) in
            w.links[handle] = driver
            var result: (PeerHandle?, [Int]) = (nil, [])
            w.drive { core in
                result = core.addPublisher(peerId: offer.peerId, handle: handle, sessionId: offer.sessionId, connectionId: offer.connectionId,
                                           streamId: offer.streamId, audioFallbackEnabled: offer.audioFallbackEnabled, media: media)
            }
            w.updateDeadline()
            return (result.0.flatMap { w.links.removeValue(forKey: $0) }, result.1.compactMap { w.pendingOffers.removeValue(forKey: $0) })
        }
        replaced?.close()
        completion(.success(answer))
        for (o, c) in waiting { handleOffer(o, completion: c) }
    }

    private func subscribe(_ offer: MediaOfferRequest, _ completion: @escaping Completion) throws {
        // What the publisher sends (its SSRCs, when known), or wait for its offer.
        let token = Self.nextHandle.wrappingAdd(1, ordering: .relaxed).oldValue
        let source = perform { w -> RouterCore.Source? in
            let s = w.core.source(forSubscriberOf: offer.streamId, sessionId: offer.sessionId, token: token)
            if s == nil { w.pendingOffers[token] = (offer, completion) }
            return s
        }
        guard let source else { return }
        let cname = "router-\(offer.streamId.prefix(8))"
        // A kind the publisher sends is announced with its SSRC, or without one until its packets tell it.
        // Video retransmissions go on an RTX stream of the router's (RFC 4588), declared with a known video SSRC.
        func track(_ ssrc: UInt32??, _ kind: String) -> SDPLocalTrack? {
            ssrc.map { SDPLocalTrack(ssrc: $0 ?? 0, rtxSSRC: kind == "video" && $0 != nil ? source.videoRTX : nil, streamID: offer.streamId,
                                     trackID: "\(offer.streamId)-\(kind)", cname: cname, announcesSSRC: $0 != nil) }
        }
        var config = PeerConnectionConfig()
        // NACKs are answered from the stream's history (`RouterCore.retransmissions`), not from a copy of every packet
        // forwarded to each subscriber.
        config.sendHistory = false
        config.audioTrack = track(source.audio, "audio")
        config.videoTrack = track(source.video, "video")
        // The router forwards the publisher's codec: the subscriber is answered with that one only.
        let videoFormat = source.videoFormat.flatMap(PayloadFormats.format(named:))
        if let videoFormat { config.videoFormats = [videoFormat] }
        let (handle, driver) = try makeLink(config, publisher: false)
        let answer: String
        do { answer = try driver.createAnswer(toOffer: offer.sdp) } catch { driver.close(); throw error }
        let media = driver.negotiated?.media ?? []
        if let videoFormat, !media.contains(where: { $0.kind == "video" }),
           (try? SessionDescription.parse(offer.sdp))?.media.contains(where: { $0.kind == "video" && !$0.isRejected }) == true {
            driver.close()
            throw OTError(.invalidParameter, "the stream's video is \(videoFormat.name), which the subscriber's offer does not list")
        }
        perform { w in
            w.links[handle] = driver
            w.drive { core in
                core.addSubscriber(peerId: offer.peerId, handle: handle, sessionId: offer.sessionId, connectionId: offer.connectionId,
                                   streamId: offer.streamId, audioFallbackEnabled: offer.audioFallbackEnabled, media: media, now: MonotonicClock.now())
            }
            w.updateDeadline()
        }
        completion(.success(answer))
    }

    /// Forgets the waiting subscribe offers that match (their streams go when nothing else holds them).
    private func dropPending(where match: (MediaOfferRequest) -> Bool) {
        let tokens = Set(pendingOffers.filter { match($0.value.offer) }.keys)
        for t in tokens { pendingOffers[t] = nil }
        core.dropPending(tokens: tokens)
    }

    func close(peerId: String) {
        let link = perform { w -> PeerConnectionDriver? in
            w.dropPending { $0.peerId == peerId }
            var handle: PeerHandle?
            w.drive { handle = $0.close(peerId: peerId) }
            w.updateDeadline()
            return handle.flatMap { w.links.removeValue(forKey: $0) }
        }
        link?.close()
    }

    func setSubscription(peerId: String, audio: Bool, video: Bool) {
        perform { w in
            w.drive { $0.setSubscription(peerId: peerId, audio: audio, video: video, now: MonotonicClock.now()) }
            w.updateDeadline()
        }
    }

    func connectionGone(connectionId: String) {
        let ids = perform { w -> [String] in
            w.dropPending { $0.connectionId == connectionId }
            return w.core.peerIds(ofConnection: connectionId)
        }
        for id in ids { close(peerId: id) }
    }

    /// Closes every connection; the IO thread stops.
    func stop() {
        let all = perform { w -> [PeerConnectionDriver] in
            w.stopped.store(true, ordering: .releasing)
            defer { w.links = [:]; w.pendingOffers = [:]; w.core = RouterCore(config: w.config, now: MonotonicClock.now()) }
            return Array(w.links.values)
        }
        endpoint.setTimerDeadline(nil)
        endpoint.stop()
        // Callers waiting for work the stopped IO thread will not run take it over.
        performed.withLock { performed.broadcast() }
        for d in all { d.close() }
    }

    // MARK: stats (snapshots taken on the IO thread)

    func counters(streamId: String) -> RoutedStreamCounters? { perform { $0.core.counters(streamId: streamId) } }
    func link(peerId: String) -> PeerConnectionDriver? { perform { w in w.core.handle(of: peerId).flatMap { w.links[$0] } } }
    func publisherLink(streamId: String) -> PeerConnectionDriver? { perform { w in w.core.publisherHandle(streamId: streamId).flatMap { w.links[$0] } } }
    func subscriberLinks(streamId: String) -> [PeerConnectionDriver] {
        perform { w in w.core.subscriberHandles(streamId: streamId).compactMap { w.links[$0] } }
    }
    var peerCount: Int { perform { $0.core.peerCount } }
    var streamCount: Int { perform { $0.core.streamCount } }
    func snapshot() -> (streams: [RouterCore.StreamSnapshot], peerSessions: [String]) { perform { $0.core.snapshot() } }
}

/// A control call queued to a worker's IO thread: whoever claims it first (the IO thread, or the caller once the worker
/// stopped) runs it; `done` is guarded by the worker's `performed` condition.
private final class PerformJob<R>: @unchecked Sendable {
    private let body: (RouterWorker) -> R
    private let claimed = Atomic<Bool>(false)
    private(set) var result: R?
    var done = false

    init(_ body: @escaping (RouterWorker) -> R) { self.body = body }

    /// Runs the call (by whoever claimed it).
    func run(_ worker: RouterWorker) { result = body(worker) }

    func claim() -> Bool { claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged }
}
