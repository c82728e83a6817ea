import Dispatch
import Foundation
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
    /// Packets not forwarded because the subscriber turned that kind off or waits for a keyframe.
    public var packetsHeld = 0
    public init() {}
}

/// The SFU of routed sessions: one ICE-lite `PeerConnection` per publisher and per subscriber on one shared UDP
/// socket (`MediaEndpoint`). RTP from a publisher goes to each subscriber of its stream without decoding; SSRCs
/// are kept (a subscriber's answer declares the publisher's SSRCs); sequence numbers are rewritten per subscriber
/// only across a pause (subscribe-to-audio/video off then on), so the subscriber sees no gap. Subscribers' NACKs
/// are answered from their connection's cache; keyframe requests to a publisher are aggregated per `pliInterval`
/// (`KeyframeRequestAggregator`: the first goes at once, later ones fold into it or into one sent at the window's end).
public final class MediaRouter: MediaRouting, MediaRoutingStats, @unchecked Sendable {
    /// The shared media socket.
    public let endpoint: MediaEndpoint
    /// The keyframe-request aggregation window of one publisher.
    public let pliInterval: Duration

    /// Mutable fields are only touched under `state`'s lock.
    private final class Peer: @unchecked Sendable {
        let id: String
        let sessionId: String
        let connectionId: String
        let streamId: String
        let direction: MediaDirection
        var driver: PeerConnectionDriver?
        var audio = true
        var video = true
        /// Per SSRC: sequence rewriting across pauses.
        var rewriters: [UInt32: SequenceRewriter] = [:]
        /// Video is held until a keyframe starts (new subscriber, or video resumed).
        var waitingForKeyframe = true
        /// The subscriber's connection is up (it can receive the keyframe it waits for).
        var connected = false
        /// Payload types this subscriber negotiated (rewritten when they differ from the publisher's).
        var audioPT: UInt8?
        var videoPT: UInt8?
        init(id: String, sessionId: String, connectionId: String, streamId: String, direction: MediaDirection) {
            self.id = id; self.sessionId = sessionId; self.connectionId = connectionId; self.streamId = streamId; self.direction = direction
        }
    }

    private final class Stream: @unchecked Sendable {
        let id: String
        let sessionId: String
        var publisher: Peer?
        var audioSSRC: UInt32?
        var videoSSRC: UInt32?
        var audioPT: UInt8?
        var videoPT: UInt8?
        var subscribers: [Peer] = []
        var counters = RoutedStreamCounters()
        var keyframes: KeyframeRequestAggregator
        /// Fires when `keyframes` asks for a check at a window's end; cancelled when the stream goes.
        var keyframeTimer: (any DispatchSourceTimer)?
        /// Subscribe offers that arrived before the publisher's.
        var pending: [(MediaOfferRequest, @Sendable (Result<String, OTError>) -> Void)] = []
        init(id: String, sessionId: String, pliInterval: Duration) {
            self.id = id; self.sessionId = sessionId; keyframes = KeyframeRequestAggregator(interval: pliInterval)
        }
        deinit { keyframeTimer?.cancel() }
    }

    private struct State {
        var peers: [String: Peer] = [:]
        var streams: [String: Stream] = [:]
    }

    private let state = Mutex(State())
    /// Keyframe requests to publishers run here, never on a connection's delivery path (no lock cycles).
    private let queue = DispatchQueue(label: "otsession.media-router")

    /// - Parameter bind: the media socket's address (port 0 picks one).
    public init(bind: TransportAddress = TransportAddress(ip: .v4(0x7F00_0001), port: 0), pliInterval: Duration = .milliseconds(300)) throws {
        endpoint = try MediaEndpoint(bind: bind)
        self.pliInterval = pliInterval
    }

    /// Closes every connection and stops the socket.
    public func stop() {
        let drivers = state.withLock { s -> [PeerConnectionDriver] in
            for stream in s.streams.values { stream.keyframeTimer?.cancel() }
            defer { s.peers = [:]; s.streams = [:] }
            return s.peers.values.compactMap(\.driver)
        }
        for d in drivers { d.close() }
        endpoint.stop()
    }

    // MARK: MediaRouting

    public func handleOffer(_ offer: MediaOfferRequest, completion: @escaping @Sendable (Result<String, OTError>) -> Void) {
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

    private func publish(_ offer: MediaOfferRequest, _ completion: @escaping @Sendable (Result<String, OTError>) -> Void) throws {
        let peer = Peer(id: offer.peerId, sessionId: offer.sessionId, connectionId: offer.connectionId, streamId: offer.streamId, direction: .publish)
        let driver = try endpoint.makePeerConnection(config: PeerConnectionConfig()) { [weak self, weak peer] e in if let peer { self?.publisherEvent(e, peer) } }
        peer.driver = driver
        let answer: String
        do { answer = try driver.createAnswer(toOffer: offer.sdp) } catch { driver.close(); throw error }
        let neg = driver.negotiated
        let pending = state.withLock { s -> [(MediaOfferRequest, @Sendable (Result<String, OTError>) -> Void)] in
            let stream = s.streams[offer.streamId] ?? Stream(id: offer.streamId, sessionId: offer.sessionId, pliInterval: pliInterval)
            s.streams[offer.streamId] = stream
            if let old = stream.publisher { s.peers[old.id] = nil; old.driver.map { d in queue.async { d.close() } } }
            stream.publisher = peer
            for m in neg?.media ?? [] {
                if m.kind == "audio" { stream.audioSSRC = m.remoteSSRCs.first; stream.audioPT = m.codec.payloadType }
                if m.kind == "video" { stream.videoSSRC = m.remoteSSRCs.first; stream.videoPT = m.codec.payloadType }
            }
            s.peers[peer.id] = peer
            defer { stream.pending = [] }
            return stream.pending
        }
        completion(.success(answer))
        for (o, c) in pending { handleOffer(o, completion: c) }
    }

    private func subscribe(_ offer: MediaOfferRequest, _ completion: @escaping @Sendable (Result<String, OTError>) -> Void) throws {
        // The publisher's SSRCs, or wait for its offer.
        let source = state.withLock { s -> (audio: UInt32?, video: UInt32?)? in
            guard let stream = s.streams[offer.streamId], stream.publisher != nil else {
                let stream = s.streams[offer.streamId] ?? Stream(id: offer.streamId, sessionId: offer.sessionId, pliInterval: pliInterval)
                s.streams[offer.streamId] = stream
                stream.pending.append((offer, completion))
                return nil
            }
            return (stream.audioSSRC, stream.videoSSRC)
        }
        guard let source else { return }
        let cname = "router-\(offer.streamId.prefix(8))"
        var config = PeerConnectionConfig()
        config.audioTrack = source.audio.map { SDPLocalTrack(ssrc: $0, streamID: offer.streamId, trackID: "\(offer.streamId)-audio", cname: cname) }
        config.videoTrack = source.video.map { SDPLocalTrack(ssrc: $0, streamID: offer.streamId, trackID: "\(offer.streamId)-video", cname: cname) }
        let peer = Peer(id: offer.peerId, sessionId: offer.sessionId, connectionId: offer.connectionId, streamId: offer.streamId, direction: .subscribe)
        let driver = try endpoint.makePeerConnection(config: config) { [weak self, weak peer] e in if let peer { self?.subscriberEvent(e, peer) } }
        peer.driver = driver
        let answer: String
        do { answer = try driver.createAnswer(toOffer: offer.sdp) } catch { driver.close(); throw error }
        let neg = driver.negotiated
        state.withLock { s in
            for m in neg?.media ?? [] {
                if m.kind == "audio" { peer.audioPT = m.codec.payloadType }
                if m.kind == "video" { peer.videoPT = m.codec.payloadType }
            }
            s.peers[peer.id] = peer
            if let stream = s.streams[offer.streamId] {
                stream.subscribers.append(peer)
                stream.counters.subscribers = stream.subscribers.count
            }
        }
        completion(.success(answer))
    }

    public func close(peerId: String) {
        let driver = state.withLock { s -> PeerConnectionDriver? in
            for stream in s.streams.values { stream.pending.removeAll { $0.0.peerId == peerId } }
            guard let peer = s.peers.removeValue(forKey: peerId) else { return nil }
            if let stream = s.streams[peer.streamId] {
                if stream.publisher === peer {
                    stream.publisher = nil
                } else {
                    stream.subscribers.removeAll { $0 === peer }
                    stream.counters.subscribers = stream.subscribers.count
                }
                if stream.publisher == nil && stream.subscribers.isEmpty {
                    stream.keyframeTimer?.cancel()
                    s.streams[stream.id] = nil
                }
            }
            return peer.driver
        }
        driver?.close()
    }

    public func setSubscription(peerId: String, audio: Bool, video: Bool) {
        let wantKeyframe = state.withLock { s -> String? in
            guard let peer = s.peers[peerId], peer.direction == .subscribe, let stream = s.streams[peer.streamId] else { return nil }
            let resumeVideo = video && !peer.video
            for (ssrc, kind) in [(stream.audioSSRC, audio), (stream.videoSSRC, video)] {
                guard let ssrc else { continue }
                if !kind { peer.rewriters[ssrc, default: SequenceRewriter()].pause() }
                else { peer.rewriters[ssrc]?.resume() }
            }
            peer.audio = audio
            peer.video = video
            if resumeVideo { peer.waitingForKeyframe = true; return stream.id }
            return nil
        }
        if let wantKeyframe { queue.async { [self] in requestKeyframe(streamId: wantKeyframe, .firstKeyframe) } }
    }

    public func connectionGone(connectionId: String) {
        let ids = state.withLock { s in s.peers.values.filter { $0.connectionId == connectionId }.map(\.id) }
        for id in ids { close(peerId: id) }
    }

    // MARK: forwarding

    private func publisherEvent(_ e: PeerConnectionEvent, _ publisher: Peer) {
        guard case .rtp(let packet) = e else { return }
        forward(packet, from: publisher)
    }

    private func subscriberEvent(_ e: PeerConnectionEvent, _ subscriber: Peer) {
        switch e {
        case .connected:
            state.withLock { _ in subscriber.connected = true }
            queue.async { [self] in requestKeyframe(streamId: subscriber.streamId, .firstKeyframe) }
        case .keyframeRequested:
            queue.async { [self] in requestKeyframe(streamId: subscriber.streamId, .repair) }
        default: break
        }
    }

    /// Runs on the shared socket's IO thread: copies the packet for each subscriber that wants it and sends it.
    private func forward(_ packet: [UInt8], from publisher: Peer) {
        guard packet.count >= 12 else { return }
        let ssrc = UInt32(packet[8]) << 24 | UInt32(packet[9]) << 16 | UInt32(packet[10]) << 8 | UInt32(packet[11])
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        var out: [(PeerConnectionDriver, [UInt8])] = []
        let stream: Stream? = state.withLock { s in
            guard let stream = s.streams[publisher.streamId], stream.publisher === publisher else { return nil }
            stream.counters.packetsIn += 1
            stream.counters.bytesIn += packet.count
            let isVideo = ssrc == stream.videoSSRC
            guard isVideo || ssrc == stream.audioSSRC else { return stream }
            var startsKeyframe: Bool?
            if isVideo && stream.keyframes.awaitingKeyframe {
                startsKeyframe = Self.startsVP8Keyframe(packet)
                if startsKeyframe == true { stream.keyframes.keyframeForwarded() }
            }
            for sub in stream.subscribers {
                guard let driver = sub.driver, isVideo ? sub.video : sub.audio else { stream.counters.packetsHeld += 1; continue }
                if isVideo && sub.waitingForKeyframe {
                    if startsKeyframe == nil { startsKeyframe = Self.startsVP8Keyframe(packet) }
                    guard startsKeyframe == true else { stream.counters.packetsHeld += 1; continue }
                    sub.waitingForKeyframe = false
                }
                var rewritten = seq
                if var r = sub.rewriters[ssrc] {
                    guard let mapped = r.map(seq) else { stream.counters.packetsHeld += 1; continue }
                    sub.rewriters[ssrc] = r
                    rewritten = mapped
                } else {
                    sub.rewriters[ssrc] = SequenceRewriter(first: seq)
                }
                var copy = packet
                if rewritten != seq { copy[2] = UInt8(rewritten >> 8); copy[3] = UInt8(rewritten & 0xFF) }
                if let pt = isVideo ? sub.videoPT : sub.audioPT, pt != packet[1] & 0x7F, packet[1] & 0x7F == (isVideo ? stream.videoPT : stream.audioPT) {
                    copy[1] = packet[1] & 0x80 | pt
                }
                out.append((driver, copy))
            }
            return stream
        }
        guard let stream else { return }
        var packets = 0, bytes = 0
        for (driver, p) in out {
            var p = p
            let n = p.count
            if driver.sendRTP(&p) { packets += 1; bytes += n }
        }
        if packets > 0 { state.withLock { _ in stream.counters.packetsOut += packets; stream.counters.bytesOut += bytes } }
    }

    /// True when an RTP packet carries the first packet of a VP8 keyframe.
    static func startsVP8Keyframe(_ bytes: [UInt8]) -> Bool {
        guard let p = try? RTPPacket(parsing: bytes), let (d, data) = try? VP8PayloadDescriptor.parse(p.payload) else { return false }
        return d.startsFrame && VP8FrameHeader.isKeyframe(data)
    }

    /// On `queue`: a keyframe request for a stream's publisher, sent or folded by the stream's aggregator.
    private func requestKeyframe(streamId: String, _ kind: KeyframeRequestAggregator.Kind) {
        let now = MonotonicClock.now()
        let send = state.withLock { s -> (PeerConnectionDriver, UInt32)? in
            guard let stream = s.streams[streamId], let pub = stream.publisher?.driver, let ssrc = stream.videoSSRC else { return nil }
            switch stream.keyframes.request(kind, now: now) {
            case .send:
                stream.counters.keyframeRequestsSent += 1
                return (pub, ssrc)
            case .folded:
                stream.counters.keyframeRequestsAggregated += 1
            case .checkAt(let t):
                stream.counters.keyframeRequestsAggregated += 1
                armKeyframeTimer(stream, at: t, now: now)
            }
            return nil
        }
        if let (d, ssrc) = send { d.requestKeyframe(ssrc: ssrc) }
    }

    /// On `queue`, at the end of an aggregation window that folded requests.
    private func keyframeWindowEnded(_ stream: Stream) {
        let now = MonotonicClock.now()
        let send = state.withLock { s -> (PeerConnectionDriver, UInt32)? in
            guard s.streams[stream.id] === stream, let pub = stream.publisher?.driver, let ssrc = stream.videoSSRC else { return nil }
            let waiting = stream.subscribers.contains { $0.connected && $0.video && $0.waitingForKeyframe }
            switch stream.keyframes.windowEnded(now: now, receiversWaiting: waiting) {
            case .send:
                stream.counters.keyframeRequestsSent += 1
                return (pub, ssrc)
            case .checkAt(let t):
                armKeyframeTimer(stream, at: t, now: now)
            case .folded:
                break
            }
            return nil
        }
        if let (d, ssrc) = send { d.requestKeyframe(ssrc: ssrc) }
    }

    /// Under the lock: (re)arms the stream's one-shot window timer.
    private func armKeyframeTimer(_ stream: Stream, at t: Instant, now: Instant) {
        let deadline = DispatchTime.now() + .microseconds(Int(max(0, (t - now).microseconds)))
        if let timer = stream.keyframeTimer {
            timer.schedule(deadline: deadline)
            return
        }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: deadline)
        timer.setEventHandler { [weak self, weak stream] in
            guard let self, let stream else { return }
            keyframeWindowEnded(stream)
        }
        timer.resume()
        stream.keyframeTimer = timer
    }

    // MARK: stats

    /// Counters of a stream, nil when the router has no such stream.
    public func counters(streamId: String) -> RoutedStreamCounters? { state.withLock { $0.streams[streamId]?.counters } }
    /// Transport counters of one peer connection.
    public func peerStats(peerId: String) -> PeerConnectionStats? {
        state.withLock { $0.peers[peerId]?.driver }?.stats
    }
    /// Peer connections the router holds.
    public var peerCount: Int { state.withLock { $0.peers.count } }

    public func statsJSON(apiKey: String?) -> [UInt8] {
        let (snapshot, peers) = state.withLock { s in
            (s.streams.values.map { (sid: $0.sessionId, id: $0.id, counters: $0.counters) }, s.peers.values.map(\.sessionId))
        }
        var sessions: [String: [String: Any]] = [:]
        for (sid, stid, c) in snapshot {
            if let apiKey, (try? SessionID.parse(sid))?.apiKey != apiKey { continue }
            var sess = sessions[sid] ?? ["packetsIn": 0, "bytesIn": 0, "packetsOut": 0, "bytesOut": 0, "streams": [String: Any](),
                                         "peers": peers.filter { $0 == sid }.count]
            for (k, v) in [("packetsIn", c.packetsIn), ("bytesIn", c.bytesIn), ("packetsOut", c.packetsOut), ("bytesOut", c.bytesOut)] {
                sess[k] = (sess[k] as? Int ?? 0) + v
            }
            var streams = sess["streams"] as? [String: Any] ?? [:]
            streams[stid] = ["packetsIn": c.packetsIn, "bytesIn": c.bytesIn, "packetsOut": c.packetsOut, "bytesOut": c.bytesOut,
                             "subscribers": c.subscribers, "keyframeRequestsSent": c.keyframeRequestsSent,
                             "keyframeRequestsAggregated": c.keyframeRequestsAggregated, "packetsHeld": c.packetsHeld]
            sess["streams"] = streams
            sessions[sid] = sess
        }
        let obj: [String: Any] = ["sessions": sessions, "mediaPort": Int(endpoint.address.port)]
        return (try? JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys])).map { [UInt8]($0) } ?? Array("{}".utf8)
    }
}

/// Rewrites one SSRC's sequence numbers for one subscriber so a pause leaves no gap: after `resume`, the next
/// packet continues right after the last one forwarded. Packets older than the resume point are dropped.
struct SequenceRewriter {
    private var offset: UInt16 = 0
    private var lastOut: UInt16?
    private var paused = false
    private var resumePending = false
    private var resumeFrom: UInt16?

    init() {}
    init(first: UInt16) { lastOut = first }

    mutating func pause() { paused = true }
    mutating func resume() {
        guard paused else { return }
        paused = false
        resumePending = true
    }

    /// The sequence number to send for `seq`, or nil to drop it (paused, or from before the resume point).
    mutating func map(_ seq: UInt16) -> UInt16? {
        if paused { return nil }
        if resumePending {
            resumePending = false
            if let last = lastOut { offset = last &+ 1 &- seq }
            resumeFrom = seq
        }
        if let from = resumeFrom, Int16(bitPattern: seq &- from) < 0 { return nil }
        let out = seq &+ offset
        if let last = lastOut { if Int16(bitPattern: out &- last) > 0 { lastOut = out } } else { lastOut = out }
        return out
    }
}
