import FoundationEssentials
import OTBase
import OTTransport
import OTWire
import Synchronization

/// A media router that can report its counters as JSON (served at `GET /v2/stats`).
public protocol MediaRoutingStats: AnyObject, Sendable {
    /// `{"sessions": {sid: {packetsIn, bytesIn, packetsOut, bytesOut, peers, streams: {stid: {..., subscribers}}}}}`,
    /// limited to the sessions of project `apiKey` when given.
    func statsJSON(apiKey: String?) -> [UInt8]
}

/// Counters of one routed stream.
public struct RoutedStreamCounters: Sendable, Equatable {
    public var packetsIn = 0
    public var bytesIn = 0
    public var packetsOut = 0
    public var bytesOut = 0
    public var subscribers = 0
    /// Keyframe requests sent to the publisher, and those folded into one already sent (aggregation).
    public var keyframeRequestsSent = 0
    public var keyframeRequestsAggregated = 0
    /// Packets not forwarded because the subscriber turned that kind off, waits for a keyframe, or its video is
    /// dropped for quality.
    public var packetsHeld = 0
    /// Of those, video packets held because the subscriber waits for a keyframe to start (the first-keyframe gate).
    public var packetsHeldForKeyframe = 0
    /// Video packets sent to a subscriber from the stream's history when its gate opened at a keyframe whose first
    /// packet arrived after later ones (repaired by NACK).
    public var packetsReplayed = 0
    /// Whether the publisher allows video to be dropped for quality (`audioFallbackEnabled`).
    public var audioFallbackEnabled = true
    /// Audio fallback: warnings raised and lifted, video dropped and restored (totals over all subscribers),
    /// and subscribers whose video is dropped now.
    public var qualityWarnings = 0
    public var qualityWarningsLifted = 0
    public var qualityVideoDisabled = 0
    public var qualityVideoEnabled = 0
    public var subscribersVideoDisabled = 0
    /// The publisher's uplink round trip as RTCP last measured it (the uplink only receives: XR RRTR answered by the
    /// publisher's DLRR); nil until measured. Its NACK retries and keyframe-request pacing follow it.
    public var publisherRoundTripTime: Duration?
    public init() {}
}

/// The SFU of routed sessions: ICE-lite `PeerConnection`s for publishers and subscribers on `workers` UDP sockets,
/// each socket with its own IO thread and its own `RouterCore` (a `RouterWorker`). A session is pinned to one worker
/// (by a hash of its id), so all its streams, publishers and subscribers live on that worker's socket and thread and
/// workers share nothing on the forwarding path; an answer's candidate names its worker's port. What the router does
/// to packets (gating, sequence and header-extension rewriting, keyframe aggregation, audio fallback) is described
/// at `RouterCore`.
public final class MediaRouter: MediaRouting, MediaRoutingStats, @unchecked Sendable {
    /// The first worker's socket (the only one with one worker).
    public var endpoint: MediaEndpoint { workers[0].endpoint }
    /// Every worker's socket, in worker order.
    public var endpoints: [MediaEndpoint] { workers.map(\.endpoint) }
    /// The keyframe-request aggregation window of one publisher.
    public let pliInterval: Duration
    /// Thresholds and hold times of the audio fallback.
    public let qualityConfig: QualityFallbackConfig
    /// How often each subscriber's downlink is judged.
    public let qualityInterval: Duration

    /// The most workers a router runs.
    public static let maxWorkers = 64

    /// Throws `.invalidParameter` unless `workers` is 1…`maxWorkers`, naming it as `name` calls it (a C member, an
    /// `ot-server` flag).
    public static func validate(workers: Int, naming name: (String) -> String = { $0 }) throws {
        try SettingsRange.check(workers, 1...maxWorkers, name("workers"))
    }

    private let workers: [RouterWorker]
    /// The worker of every peer the router was offered (and its client connection), until it is closed.
    private let peerWorkers = Mutex<[String: (worker: Int, connectionId: String)]>([:])

    /// - Parameters:
    ///   - bind: the media sockets' address (port 0 picks one per worker; a fixed port p, for firewall rules, gives
    ///     worker i port p + i).
    ///   - advertise: 1:1 NAT (a cloud VM's public address): the IP clients are told in the router's candidates,
    ///     instead of the bound one (the ports are the bound ones). Nil: the bound address.
    ///   - quality: the audio fallback's thresholds and hold times, judged every `qualityInterval`.
    ///   - workers: how many sockets and IO threads forward media (sessions are spread over them): 1…`maxWorkers`.
    public init(bind: TransportAddress = TransportAddress(ip: .v4(0x7F00_0001), port: 0), advertise: IPAddress? = nil,
                pliInterval: Duration = .milliseconds(300), quality: QualityFallbackConfig = QualityFallbackConfig(),
                qualityInterval: Duration = .seconds(1), workers: Int = 1) throws {
        let config = RouterCore.Config(pliInterval: pliInterval, quality: quality, qualityInterval: qualityInterval)
        self.pliInterval = pliInterval
        qualityConfig = quality
        self.qualityInterval = max(qualityInterval, .milliseconds(100))
        try Self.validate(workers: workers)
        guard bind.port == 0 || Int(bind.port) + workers - 1 <= Int(UInt16.max) else {
            throw OTError(.invalidParameter, "media ports \(bind.port)…\(Int(bind.port) + workers - 1) go past 65535")
        }
        var list: [RouterWorker] = []
        for i in 0..<workers {
            var address = bind
            if bind.port != 0 { address.port = bind.port + UInt16(i) }
            list.append(try RouterWorker(bind: address, advertise: advertise, config: config))
        }
        self.workers = list
    }

    /// The worker a session is pinned to (FNV-1a of its id: stable across runs).
    public func workerIndex(sessionId: String) -> Int {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in sessionId.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return Int(h % UInt64(workers.count))
    }

    /// Where a session's media goes: the worker it is pinned to and that worker's bound UDP port (the port its
    /// answers' candidates name).
    public struct Placement: Sendable, Equatable {
        public var worker: Int
        public var port: UInt16
    }

    /// The placement of a session (whether or not it has media yet): what `/v2/stats` reports per session and
    /// `ot_server_get_session_placement` returns.
    public func placement(sessionId: String) -> Placement {
        let i = workerIndex(sessionId: sessionId)
        return Placement(worker: i, port: workers[i].endpoint.address.port)
    }

    public func setQualityHandler(_ handler: @escaping @Sendable (String, MediaQualityEvent) -> Void) {
        for w in workers { w.setQualityHandler(handler) }
    }

    public func setPublisherLinkHandler(_ handler: @escaping @Sendable (String, Bool) -> Void) {
        for w in workers { w.setPublisherLinkHandler(handler) }
    }

    /// Closes every connection and stops the sockets.
    public func stop() {
        for w in workers { w.stop() }
        peerWorkers.withLock { $0 = [:] }
    }

    // MARK: MediaRouting

    public func handleOffer(_ offer: MediaOfferRequest, completion: @escaping @Sendable (Result<String, OTError>) -> Void) {
        let i = placement(sessionId: offer.sessionId).worker
        peerWorkers.withLock { $0[offer.peerId] = (i, offer.connectionId) }
        workers[i].handleOffer(offer, completion: completion)
    }

    public func close(peerId: String) {
        let known = peerWorkers.withLock { $0.removeValue(forKey: peerId)?.worker }
        if let known { workers[known].close(peerId: peerId) } else { for w in workers { w.close(peerId: peerId) } }
    }

    public func setSubscription(peerId: String, audio: Bool, video: Bool) {
        workers[peerWorkers.withLock { $0[peerId]?.worker } ?? 0].setSubscription(peerId: peerId, audio: audio, video: video)
    }

    public func connectionGone(connectionId: String) {
        peerWorkers.withLock { $0 = $0.filter { $0.value.connectionId != connectionId } }
        for w in workers { w.connectionGone(connectionId: connectionId) }
    }

    // MARK: stats

    private func worker(ofPeer peerId: String) -> RouterWorker? { peerWorkers.withLock { $0[peerId] }.map { workers[$0.worker] } }

    /// Counters of a stream, nil when the router has no such stream.
    public func counters(streamId: String) -> RoutedStreamCounters? { workers.lazy.compactMap { $0.counters(streamId: streamId) }.first }
    /// Transport counters of one peer connection.
    public func peerStats(peerId: String) -> PeerConnectionStats? {
        (worker(ofPeer: peerId).map { [$0] } ?? workers).lazy.compactMap { $0.link(peerId: peerId) }.first?.stats
    }
    /// Transport counters of a stream's uplink (the publisher's connection): e.g. the transport-wide feedback the
    /// router sends, which is what the publisher's bandwidth estimate runs on.
    public func publisherStats(streamId: String) -> PeerConnectionStats? {
        workers.lazy.compactMap { $0.publisherLink(streamId: streamId) }.first?.stats
    }
    /// Transport counters of a stream's downlinks (its subscribers' connections): NACKs answered, retransmissions.
    public func subscriberStats(streamId: String) -> [PeerConnectionStats] {
        workers.flatMap { $0.subscriberLinks(streamId: streamId) }.map(\.stats)
    }
    /// Peer connections the router holds.
    public var peerCount: Int { workers.reduce(0) { $0 + $1.peerCount } }
    /// Streams the router keeps: with a publisher, subscribers, or subscribe offers waiting for the publisher.
    public var streamCount: Int { workers.reduce(0) { $0 + $1.streamCount } }

    /// Rendered from snapshots each worker takes on its IO thread.
    public func statsJSON(apiKey: String?) -> [UInt8] {
        var snapshot: [RouterCore.StreamSnapshot] = [], peers: [String] = []
        for w in workers {
            let s = w.snapshot()
            snapshot += s.streams
            peers += s.peerSessions
        }
        struct Totals { var peers = 0, packetsIn = 0, bytesIn = 0, packetsOut = 0, bytesOut = 0; var streams: [String: JSONValue] = [:] }
        var sessions: [String: Totals] = [:]
        for st in snapshot {
            let (sid, stid, c) = (st.sessionId, st.streamId, st.counters)
            if let apiKey, (try? SessionID.parse(sid))?.apiKey != apiKey { continue }
            var t = sessions[sid] ?? Totals(peers: peers.filter { $0 == sid }.count)
            t.packetsIn += c.packetsIn; t.bytesIn += c.bytesIn; t.packetsOut += c.packetsOut; t.bytesOut += c.bytesOut
            var stream: [String: JSONValue] = [
                "packetsIn": .int(Int64(c.packetsIn)), "bytesIn": .int(Int64(c.bytesIn)), "packetsOut": .int(Int64(c.packetsOut)),
                "bytesOut": .int(Int64(c.bytesOut)), "subscribers": .int(Int64(c.subscribers)),
                "keyframeRequestsSent": .int(Int64(c.keyframeRequestsSent)),
                "keyframeRequestsAggregated": .int(Int64(c.keyframeRequestsAggregated)), "packetsHeld": .int(Int64(c.packetsHeld)),
                "packetsHeldForKeyframe": .int(Int64(c.packetsHeldForKeyframe)), "packetsReplayed": .int(Int64(c.packetsReplayed)),
                "audioFallback": Self.fallbackJSON(c, st.fallback.map { ($0.peerId, $0.state, $0.sample) }),
            ]
            if let r = c.publisherRoundTripTime { stream["publisherRttMs"] = Self.millis(r) }
            t.streams[stid] = .object(stream)
            sessions[sid] = t
        }
        var sessionsJSON: [String: JSONValue] = [:]
        for (sid, t) in sessions {
            let at = placement(sessionId: sid)
            sessionsJSON[sid] = ["mediaWorker": .int(Int64(at.worker)), "mediaPort": .int(Int64(at.port)), "peers": .int(Int64(t.peers)),
                                 "packetsIn": .int(Int64(t.packetsIn)), "bytesIn": .int(Int64(t.bytesIn)), "packetsOut": .int(Int64(t.packetsOut)),
                                 "bytesOut": .int(Int64(t.bytesOut)), "streams": .object(t.streams)]
        }
        return JSONValue.object(["sessions": .object(sessionsJSON), "mediaPort": .int(Int64(endpoint.address.port)),
                                 "mediaPorts": .array(workers.map { .int(Int64($0.endpoint.address.port)) })]).serialized()
    }

    /// Milliseconds with one decimal.
    private static func millis(_ d: Duration) -> JSONValue { .double(Double(d.microseconds / 100) / 10) }

    /// A stream's audio-fallback counters and, per judged subscriber peer, its state and last sample.
    private static func fallbackJSON(_ c: RoutedStreamCounters, _ peers: [(String, QualityFallbackMonitor.State, LinkQualitySample?)]) -> JSONValue {
        var subs: [String: JSONValue] = [:]
        for (id, st, sample) in peers {
            var o: [String: JSONValue] = ["state": .string(st.rawValue)]
            if let sample {
                o["loss"] = .double((sample.loss * 1000).rounded() / 1000)
                if let raw = sample.rawLoss { o["rawLoss"] = .double((raw * 1000).rounded() / 1000) }
                if let r = sample.roundTripTime { o["rttMs"] = millis(r) }
                if let j = sample.jitter { o["jitterMs"] = millis(j) }
            }
            subs[id] = .object(o)
        }
        return ["enabled": .bool(c.audioFallbackEnabled), "warnings": .int(Int64(c.qualityWarnings)),
                "warningsLifted": .int(Int64(c.qualityWarningsLifted)), "videoDisabled": .int(Int64(c.qualityVideoDisabled)),
                "videoEnabled": .int(Int64(c.qualityVideoEnabled)), "subscribersVideoDisabled": .int(Int64(c.subscribersVideoDisabled)),
                "subscribers": .object(subs)]
    }

}
