import Dispatch
import FoundationEssentials
import OTBase
import OTRTP
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
    public init() {}
}

/// The SFU of routed sessions: one ICE-lite `PeerConnection` per publisher and per subscriber on one shared UDP
/// socket (`MediaEndpoint`). RTP from a publisher goes to each subscriber of its stream without decoding; SSRCs
/// are kept (a subscriber's answer declares the publisher's SSRCs); sequence numbers are rewritten per subscriber
/// only across a pause (subscribe-to-audio/video off then on), so the subscriber sees no gap. Subscribers' NACKs
/// are answered from their connection's cache; keyframe requests to a publisher are aggregated per `pliInterval`
/// (`KeyframeRequestAggregator`: the first goes at once, later ones fold into it or into one sent at the window's end).
///
/// Audio fallback: every `qualityInterval` the router samples each subscriber's downlink (loss after repair and jitter
/// from its receiver reports, loss on the wire from its transport-wide feedback, RTT) into a `QualityFallbackMonitor`;
/// sustained loss beyond what repair carries (`QualityFallbackConfig.repairableLoss`) or poor
/// quality warns the subscriber, then stops forwarding the stream's video to it (audio continues and keeps the
/// link judged); after `recoverAfter` of good quality video resumes from a keyframe. Decisions reach the subscriber
/// through the quality handler (`mediaQuality` messages). Streams whose publisher disabled audio fallback, and
/// subscribers that turned video off (unless it is off for quality), are not judged.
public final class MediaRouter: MediaRouting, MediaRoutingStats, @unchecked Sendable {
    /// The shared media socket.
    public let endpoint: MediaEndpoint
    /// The keyframe-request aggregation window of one publisher.
    public let pliInterval: Duration
    /// Thresholds and hold times of the audio fallback.
    public let qualityConfig: QualityFallbackConfig
    /// How often each subscriber's downlink is judged.
    public let qualityInterval: Duration

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
        /// The header extensions (ids, and its mid) this subscriber negotiated for each kind, and the rewriters from
        /// the publisher's to them (redone when the publisher's connection changes).
        var audioTarget: (ids: RTPHeaderExtensionIds, mid: String)?
        var videoTarget: (ids: RTPHeaderExtensionIds, mid: String)?
        var audioExtensions: RTPExtensionRewriter?
        var videoExtensions: RTPExtensionRewriter?
        /// This subscriber's copy of the packet being forwarded (touched only under `forwarding`): reused, so
        /// forwarding does not allocate for it.
        var out: [UInt8] = []
        /// Audio fallback (subscribers of streams that allow it): the downlink's samples and the decision.
        var sampler = LinkQualitySampler()
        var quality: QualityFallbackMonitor?
        /// Video is dropped for quality; `forwardingVideo` is `video && !qualityOff`, as last applied.
        var qualityOff = false
        var forwardingVideo = true
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
        /// The publisher's header-extension ids and mids, per kind: what its packets carry.
        var audioSource = RTPHeaderExtensionIds()
        var videoSource = RTPHeaderExtensionIds()
        var audioMid: String?
        var videoMid: String?
        var subscribers: [Peer] = []
        var counters = RoutedStreamCounters()
        var audioFallbackEnabled = true
        var keyframes: KeyframeRequestAggregator
        /// The publisher's latest video packets (plain RTP), and the highest sequence number among them: when a
        /// keyframe's first packet arrives late (repaired by NACK), what came after it is replayed from here.
        var videoHistory = NACKResponder(capacity: 256)
        var videoHighest: UInt16?
        /// The RTX SSRC the router declares to subscribers for this stream's video (retransmissions to them).
        let videoRTXSSRC = UInt32.random(in: 1 ... .max)
        /// Fires when `keyframes` asks for a check at a window's end; cancelled when the stream goes.
        var keyframeTimer: (any DispatchSourceTimer)?
        /// The publisher's link dropped while the stream had subscribers, and no new one is up yet (they were told).
        var publisherLinkDown = false
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
        /// Subscribe-to-audio/video wishes that arrived before their subscriber's connection was made (the offer is
        /// answered asynchronously, or waits for its publisher); applied when it is made, dropped when it closes.
        var earlySubscriptions: [String: (audio: Bool, video: Bool)] = [:]
    }

    private let state = Mutex(State())
    /// Held through `forward` (taken before `state`): the subscribers a packet goes to, reused from packet to packet,
    /// and their `out` buffers.
    private let forwarding = Mutex<[(PeerConnectionDriver, Peer)]>([])
    /// Keyframe requests to publishers run here, never on a connection's delivery path (no lock cycles).
    private let queue = DispatchQueue(label: "otsession.media-router")
    private let qualityHandler = Mutex<(@Sendable (String, MediaQualityEvent) -> Void)?>(nil)
    private let publisherLinkHandler = Mutex<(@Sendable (String, Bool) -> Void)?>(nil)
    private var qualityTimer: (any DispatchSourceTimer)?

    /// - Parameters:
    ///   - bind: the media socket's address (port 0 picks one; a fixed port for firewall rules).
    ///   - advertise: 1:1 NAT (a cloud VM's public address): the IP clients are told in the router's candidate,
    ///     instead of the bound one (the port is the bound one). Nil: the bound address.
    ///   - quality: the audio fallback's thresholds and hold times, judged every `qualityInterval`.
    public init(bind: TransportAddress = TransportAddress(ip: .v4(0x7F00_0001), port: 0), advertise: IPAddress? = nil,
                pliInterval: Duration = .milliseconds(300),
                quality: QualityFallbackConfig = QualityFallbackConfig(), qualityInterval: Duration = .seconds(1)) throws {
        endpoint = try MediaEndpoint(bind: bind, advertise: advertise)
        self.pliInterval = pliInterval
        qualityConfig = quality
        self.qualityInterval = max(qualityInterval, .milliseconds(100))
        let t = DispatchSource.makeTimerSource(queue: queue)
        let ms = Int(self.qualityInterval.microseconds / 1000)
        t.schedule(deadline: .now() + .milliseconds(ms), repeating: .milliseconds(ms), leeway: .milliseconds(ms / 10))
        t.setEventHandler { [weak self] in self?.judgeQuality(now: MonotonicClock.now()) }
        t.resume()
        qualityTimer = t
    }

    deinit { qualityTimer?.cancel() }

    public func setQualityHandler(_ handler: @escaping @Sendable (String, MediaQualityEvent) -> Void) {
        qualityHandler.withLock { $0 = handler }
    }

    public func setPublisherLinkHandler(_ handler: @escaping @Sendable (String, Bool) -> Void) {
        publisherLinkHandler.withLock { $0 = handler }
    }

    /// Under the lock: the stream's publisher link went down (`up` false) or came back; true when that is news to
    /// report (down only matters to a stream with subscribers, up only after a reported down).
    private static func publisherLink(_ stream: Stream, up: Bool) -> Bool {
        guard up == stream.publisherLinkDown, up || !stream.subscribers.isEmpty else { return false }
        stream.publisherLinkDown = !up
        return true
    }

    /// Tells the publisher-link handler (outside the lock).
    private func reportPublisherLink(_ streamId: String, up: Bool) {
        Log.info("router", "stream \(streamId): publisher media \(up ? "resumed" : "interrupted")")
        publisherLinkHandler.withLock { $0 }?(streamId, up)
    }

    /// Closes every connection and stops the socket.
    public func stop() {
        qualityTimer?.cancel()
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
        // The uplink repairs by NACK and RTX, without FEC: FEC packets would leave holes in the sequence numbers the router
        // forwards (each subscriber's downlink gets FEC of its own, for its own loss).
        var config = PeerConnectionConfig()
        config.videoFEC = false
        let driver = try endpoint.makePeerConnection(config: config) { [weak self, weak peer] e in if let peer { self?.publisherEvent(e, peer) } }
        peer.driver = driver
        let answer: String
        do { answer = try driver.createAnswer(toOffer: offer.sdp) } catch { driver.close(); throw error }
        let neg = driver.negotiated
        let pending = state.withLock { s -> [(MediaOfferRequest, @Sendable (Result<String, OTError>) -> Void)] in
            let stream = s.streams[offer.streamId] ?? Stream(id: offer.streamId, sessionId: offer.sessionId, pliInterval: pliInterval)
            s.streams[offer.streamId] = stream
            if let old = stream.publisher { s.peers[old.id] = nil; old.driver.map { d in queue.async { d.close() } } }
            stream.publisher = peer
            stream.audioFallbackEnabled = offer.audioFallbackEnabled
            stream.counters.audioFallbackEnabled = offer.audioFallbackEnabled
            // SSRCs the offer did not list (no a=ssrc) are learnt from the first packets (`learnSSRC`).
            for m in neg?.media ?? [] {
                if m.kind == "audio" {
                    (stream.audioSSRC, stream.audioPT, stream.audioSource, stream.audioMid) = (m.remoteSSRCs.first, m.codec.payloadType, m.extensionIds, m.mid)
                }
                if m.kind == "video" {
                    (stream.videoSSRC, stream.videoPT, stream.videoSource, stream.videoMid) = (m.remoteSSRCs.first, m.codec.payloadType, m.extensionIds, m.mid)
                }
            }
            for sub in stream.subscribers { Self.pairExtensions(sub, stream) }
            s.peers[peer.id] = peer
            defer { stream.pending = [] }
            return stream.pending
        }
        completion(.success(answer))
        for (o, c) in pending { handleOffer(o, completion: c) }
    }

    private func subscribe(_ offer: MediaOfferRequest, _ completion: @escaping @Sendable (Result<String, OTError>) -> Void) throws {
        // What the publisher sends (its SSRCs, when known), or wait for its offer.
        let source = state.withLock { s -> (audio: UInt32??, video: UInt32??, videoRTX: UInt32)? in
            guard let stream = s.streams[offer.streamId], stream.publisher != nil else {
                let stream = s.streams[offer.streamId] ?? Stream(id: offer.streamId, sessionId: offer.sessionId, pliInterval: pliInterval)
                s.streams[offer.streamId] = stream
                stream.pending.append((offer, completion))
                return nil
            }
            return (stream.audioPT.map { _ in stream.audioSSRC }, stream.videoPT.map { _ in stream.videoSSRC }, stream.videoRTXSSRC)
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
        config.audioTrack = track(source.audio, "audio")
        config.videoTrack = track(source.video, "video")
        let peer = Peer(id: offer.peerId, sessionId: offer.sessionId, connectionId: offer.connectionId, streamId: offer.streamId, direction: .subscribe)
        let driver = try endpoint.makePeerConnection(config: config) { [weak self, weak peer] e in if let peer { self?.subscriberEvent(e, peer) } }
        peer.driver = driver
        let answer: String
        do { answer = try driver.createAnswer(toOffer: offer.sdp) } catch { driver.close(); throw error }
        let neg = driver.negotiated
        state.withLock { s in
            for m in neg?.media ?? [] {
                if m.kind == "audio" { (peer.audioPT, peer.audioTarget) = (m.codec.payloadType, (m.extensionIds, m.mid)) }
                if m.kind == "video" { (peer.videoPT, peer.videoTarget) = (m.codec.payloadType, (m.extensionIds, m.mid)) }
            }
            s.peers[peer.id] = peer
            if let stream = s.streams[offer.streamId] {
                Self.pairExtensions(peer, stream)
                stream.subscribers.append(peer)
                stream.counters.subscribers = stream.subscribers.count
                if stream.audioFallbackEnabled && offer.audioFallbackEnabled { peer.quality = QualityFallbackMonitor(config: qualityConfig) }
                if let wish = s.earlySubscriptions.removeValue(forKey: peer.id) {
                    _ = Self.applySubscription(peer, stream, audio: wish.audio, video: wish.video)
                }
            }
        }
        completion(.success(answer))
    }

    /// Under the lock: a subscriber's extension rewriters from the stream's publisher's ids to its own.
    private static func pairExtensions(_ sub: Peer, _ stream: Stream) {
        sub.audioExtensions = sub.audioTarget.map { RTPExtensionRewriter(source: stream.audioSource, target: $0.ids, mid: $0.mid) }
        sub.videoExtensions = sub.videoTarget.map { RTPExtensionRewriter(source: stream.videoSource, target: $0.ids, mid: $0.mid) }
    }

    public func close(peerId: String) {
        var linkDown: String?
        let driver = state.withLock { s -> PeerConnectionDriver? in
            Self.dropPending(&s) { $0.peerId == peerId }
            s.earlySubscriptions[peerId] = nil
            guard let peer = s.peers.removeValue(forKey: peerId) else { return nil }
            if let stream = s.streams[peer.streamId] {
                if stream.publisher === peer {
                    stream.publisher = nil
                    if Self.publisherLink(stream, up: false) { linkDown = stream.id }
                } else {
                    stream.subscribers.removeAll { $0 === peer }
                    stream.counters.subscribers = stream.subscribers.count
                    if peer.qualityOff { stream.counters.subscribersVideoDisabled -= 1 }
                }
                Self.removeIfUnused(stream, &s)
            }
            return peer.driver
        }
        driver?.close()
        if let linkDown { reportPublisherLink(linkDown, up: false) }
    }

    /// Under the lock: forgets the subscribe offers still waiting for their publisher that match, and the streams
    /// that only those offers had made.
    private static func dropPending(_ s: inout State, where match: (MediaOfferRequest) -> Bool) {
        for stream in Array(s.streams.values) where !stream.pending.isEmpty {
            stream.pending.removeAll { match($0.0) }
            removeIfUnused(stream, &s)
        }
    }

    /// Under the lock: a stream with no publisher, no subscriber and no waiting offer is removed.
    private static func removeIfUnused(_ stream: Stream, _ s: inout State) {
        guard stream.publisher == nil, stream.subscribers.isEmpty, stream.pending.isEmpty, s.streams[stream.id] === stream else { return }
        stream.keyframeTimer?.cancel()
        s.streams[stream.id] = nil
    }

    public func setSubscription(peerId: String, audio: Bool, video: Bool) {
        let wantKeyframe = state.withLock { s -> String? in
            guard let peer = s.peers[peerId] else {
                s.earlySubscriptions[peerId] = (audio, video)
                return nil
            }
            guard peer.direction == .subscribe, let stream = s.streams[peer.streamId] else { return nil }
            return Self.applySubscription(peer, stream, audio: audio, video: video) ? stream.id : nil
        }
        if let wantKeyframe { queue.async { [self] in requestKeyframe(streamId: wantKeyframe, .firstKeyframe) } }
    }

    /// Under the lock: a subscriber's subscribe-to-audio/video wishes applied to forwarding; true when video
    /// resumed and needs a keyframe.
    private static func applySubscription(_ peer: Peer, _ stream: Stream, audio: Bool, video: Bool) -> Bool {
        if let ssrc = stream.audioSSRC, audio != peer.audio {
            if !audio { peer.rewriters[ssrc, default: SequenceRewriter()].pause() } else { peer.rewriters[ssrc]?.resume() }
        }
        peer.audio = audio
        peer.video = video
        return gateVideo(peer, stream)
    }

    /// Under the lock: applies `video && !qualityOff` to forwarding (pausing or resuming the video sequence
    /// rewriter); true when video resumed and needs a keyframe.
    private static func gateVideo(_ peer: Peer, _ stream: Stream) -> Bool {
        let on = peer.video && !peer.qualityOff
        guard on != peer.forwardingVideo else { return false }
        peer.forwardingVideo = on
        guard let ssrc = stream.videoSSRC else { return false }
        if !on {
            peer.rewriters[ssrc, default: SequenceRewriter()].pause()
            peer.sampler.forget(ssrc: ssrc)
            return false
        }
        peer.rewriters[ssrc]?.resume()
        peer.waitingForKeyframe = true
        return true
    }

    public func connectionGone(connectionId: String) {
        let ids = state.withLock { s in
            Self.dropPending(&s) { $0.connectionId == connectionId }
            return s.peers.values.filter { $0.connectionId == connectionId }.map(\.id)
        }
        for id in ids { close(peerId: id) }
    }

    // MARK: forwarding

    private func publisherEvent(_ e: PeerConnectionEvent, _ publisher: Peer) {
        switch e {
        case .rtp(let received):
            forward(received.bytes, from: publisher)
        case .packetsUnrecoverable(let ssrc, _):
            // Lost on the uplink for good: the subscribers cannot have them either; ask for a keyframe now rather than
            // when each of them gives up.
            let streamId = state.withLock { s in s.streams[publisher.streamId].flatMap { $0.publisher === publisher && $0.videoSSRC == ssrc ? $0.id : nil } }
            if let streamId { queue.async { [self] in requestKeyframe(streamId: streamId, .repair) } }
        case .connected, .failed:
            // A failed link leaves the subscribers without media until the publisher republishes; its new link's
            // `connected` ends that.
            let up: Bool
            if case .connected = e { up = true } else { up = false }
            let report = state.withLock { s -> Bool in
                guard let stream = s.streams[publisher.streamId], stream.publisher === publisher else { return false }
                return Self.publisherLink(stream, up: up)
            }
            if report { reportPublisherLink(publisher.streamId, up: up) }
        default:
            break
        }
    }

    private func subscriberEvent(_ e: PeerConnectionEvent, _ subscriber: Peer) {
        switch e {
        case .connected:
            state.withLock { _ in subscriber.connected = true }
            queue.async { [self] in requestKeyframe(streamId: subscriber.streamId, .firstKeyframe) }
        case .keyframeRequested:
            queue.async { [self] in requestKeyframe(streamId: subscriber.streamId, .repair) }
        case .receiverReport(let b):
            state.withLock { s in
                guard subscriber.quality != nil else { return }
                let isVideo = s.streams[subscriber.streamId]?.videoSSRC == b.ssrc
                subscriber.sampler.report(b, clockRate: isVideo ? 90_000 : 48_000)
            }
        case .transportFeedback(let fb):
            state.withLock { _ in if subscriber.quality != nil { subscriber.sampler.transportFeedback(fb) } }
        case .roundTripTime(let d):
            state.withLock { _ in subscriber.sampler.roundTripTime = d }
        default: break
        }
    }

    // MARK: audio fallback

    /// On `queue`, every `qualityInterval`: samples each judged subscriber's downlink and applies the decisions.
    func judgeQuality(now: Instant) {
        var told: [(String, MediaQualityEvent)] = []
        var keyframes: Set<String> = []
        state.withLock { s in
            for peer in s.peers.values where peer.direction == .subscribe && peer.quality != nil {
                // Audio-only streams have no video to drop.
                guard let stream = s.streams[peer.streamId], stream.videoSSRC != nil else { continue }
                let sample = peer.sampler.sample()
                // A subscriber that turned video off has nothing to warn about (unless video is off for quality:
                // then the link stays judged, so it comes back when the subscriber wants it again).
                if !peer.video && !peer.qualityOff {
                    if peer.quality?.warned == true {
                        stream.counters.qualityWarningsLifted += 1
                        told.append((peer.id, .videoDisableWarningLifted))
                    }
                    peer.quality = QualityFallbackMonitor(config: qualityConfig)
                    continue
                }
                guard let sample else { continue }
                switch peer.quality?.observe(sample, now: now) {
                case .warn:
                    stream.counters.qualityWarnings += 1
                    told.append((peer.id, .videoDisableWarning))
                case .liftWarning:
                    stream.counters.qualityWarningsLifted += 1
                    told.append((peer.id, .videoDisableWarningLifted))
                case .disableVideo:
                    peer.qualityOff = true
                    _ = Self.gateVideo(peer, stream)
                    stream.counters.qualityVideoDisabled += 1
                    stream.counters.subscribersVideoDisabled += 1
                    told.append((peer.id, .videoDisabled))
                case .enableVideo:
                    peer.qualityOff = false
                    if Self.gateVideo(peer, stream) { keyframes.insert(stream.id) }
                    stream.counters.qualityVideoEnabled += 1
                    stream.counters.subscribersVideoDisabled -= 1
                    told.append((peer.id, .videoEnabled))
                case nil:
                    break
                }
            }
        }
        for id in keyframes { requestKeyframe(streamId: id, .firstKeyframe) }
        guard !told.isEmpty, let handler = qualityHandler.withLock({ $0 }) else { return }
        for (peerId, event) in told {
            Log.info("router", "audio fallback: \(event.rawValue) for peer \(peerId)")
            handler(peerId, event)
        }
    }

    /// Runs on the shared socket's IO thread: writes each subscriber's copy of the packet (its sequence number, its
    /// payload type, and the header extensions it negotiated, under its ids) into that subscriber's reused buffer,
    /// then sends the copies (outside the state lock: sending may deliver events that take it). Video packets are
    /// kept in the stream's history: a subscriber whose first-keyframe gate opens at a keyframe start that came late
    /// (repaired by NACK) also gets what followed it, replayed from there.
    private func forward(_ packet: [UInt8], from publisher: Peer) {
        guard packet.count >= 12 else { return }
        let ssrc = UInt32(packet[8]) << 24 | UInt32(packet[9]) << 16 | UInt32(packet[10]) << 8 | UInt32(packet[11])
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        let pt = packet[1] & 0x7F
        let now = MonotonicClock.now()
        forwarding.withLock { targets in
            var replays: [(PeerConnectionDriver, [UInt8])] = []
            let stream: Stream? = state.withLock { s in
                guard let stream = s.streams[publisher.streamId], stream.publisher === publisher else { return nil }
                stream.counters.packetsIn += 1
                stream.counters.bytesIn += packet.count
                if ssrc != stream.videoSSRC && ssrc != stream.audioSSRC { Self.learnSSRC(ssrc, pt, packet, stream) }
                let isVideo = ssrc == stream.videoSSRC
                guard isVideo || ssrc == stream.audioSSRC else { return stream }
                if isVideo {
                    stream.videoHistory.store(sequence: seq, packet: packet)
                    if let h = stream.videoHighest, Int16(bitPattern: seq &- h) <= 0 {} else { stream.videoHighest = seq }
                }
                var startsKeyframe: Bool?
                if isVideo && stream.keyframes.awaitingKeyframe {
                    startsKeyframe = Self.startsVP8Keyframe(packet)
                    if startsKeyframe == true { stream.keyframes.keyframeForwarded() }
                }
                for sub in stream.subscribers {
                    guard let driver = sub.driver, isVideo ? sub.forwardingVideo : sub.audio else { stream.counters.packetsHeld += 1; continue }
                    var opened = false
                    if isVideo && sub.waitingForKeyframe {
                        if startsKeyframe == nil { startsKeyframe = Self.startsVP8Keyframe(packet) }
                        guard startsKeyframe == true else {
                            stream.counters.packetsHeld += 1
                            stream.counters.packetsHeldForKeyframe += 1
                            continue
                        }
                        sub.waitingForKeyframe = false
                        opened = true
                    }
                    guard Self.copy(packet, seq: seq, ssrc: ssrc, pt: pt, isVideo: isVideo, for: sub, stream, now: now, into: &sub.out) else {
                        stream.counters.packetsHeld += 1
                        continue
                    }
                    targets.append((driver, sub))
                    // The gate opened at a keyframe start that came after later packets: replay those, in order.
                    guard opened, let highest = stream.videoHighest else { continue }
                    var next = seq &+ 1
                    while Int16(bitPattern: next &- highest) <= 0 {
                        var buffer: [UInt8] = []
                        if let old = stream.videoHistory.lookup(next),
                           Self.copy(old, seq: next, ssrc: ssrc, pt: pt, isVideo: true, for: sub, stream, now: now, into: &buffer) {
                            replays.append((driver, buffer))
                            stream.counters.packetsReplayed += 1
                        }
                        next &+= 1
                    }
                }
                return stream
            }
            guard let stream, !targets.isEmpty else { return }
            var packets = 0, bytes = 0
            for (driver, sub) in targets {
                let n = sub.out.count
                if driver.sendRTP(&sub.out) { packets += 1; bytes += n }
            }
            for (driver, p) in replays {
                var p = p
                let n = p.count
                if driver.sendRTP(&p) { packets += 1; bytes += n }
            }
            targets.removeAll(keepingCapacity: true)
            if packets > 0 { state.withLock { _ in stream.counters.packetsOut += packets; stream.counters.bytesOut += bytes } }
        }
    }

    /// Under the lock: a publisher whose offer listed no `a=ssrc` for a kind gets it from that kind's first packet,
    /// found by the MID header extension (RFC 8843 §9.2) or else by the payload type; only the section's codec
    /// payload type counts (an RTX packet carries the same MID).
    private static func learnSSRC(_ ssrc: UInt32, _ pt: UInt8, _ packet: [UInt8], _ stream: Stream) {
        guard stream.audioSSRC == nil || stream.videoSSRC == nil else { return }
        var isAudio = pt == stream.audioPT, isVideo = pt == stream.videoPT
        if let id = stream.audioSource.mid ?? stream.videoSource.mid, let r = RTPHeaderExtensions.valueRange(in: packet, id: id) {
            isAudio = isAudio && stream.audioMid.map { packet[r].elementsEqual($0.utf8) } == true
            isVideo = isVideo && stream.videoMid.map { packet[r].elementsEqual($0.utf8) } == true
        }
        if isAudio && stream.audioSSRC == nil { stream.audioSSRC = ssrc }
        if isVideo && stream.videoSSRC == nil { stream.videoSSRC = ssrc }
    }

    /// Under the lock: writes one subscriber's copy of a publisher's packet into `out` (its sequence number, its payload
    /// type, its header extensions); false when its rewriter drops the packet (paused, or older than where forwarding
    /// started or resumed) or its extensions cannot be rewritten.
    private static func copy(_ packet: [UInt8], seq: UInt16, ssrc: UInt32, pt: UInt8, isVideo: Bool, for sub: Peer, _ stream: Stream,
                             now: Instant, into out: inout [UInt8]) -> Bool {
        var rewritten = seq
        if var r = sub.rewriters[ssrc] {
            guard let mapped = r.map(seq) else { return false }
            sub.rewriters[ssrc] = r
            rewritten = mapped
        } else {
            sub.rewriters[ssrc] = SequenceRewriter(first: seq)
        }
        if let extensions = isVideo ? sub.videoExtensions : sub.audioExtensions {
            guard extensions.rewrite(packet, into: &out, now: now) else { return false }
        } else {
            out.removeAll(keepingCapacity: true)
            out.append(contentsOf: packet)
        }
        out[2] = UInt8(rewritten >> 8); out[3] = UInt8(rewritten & 0xFF)
        if let subPT = isVideo ? sub.videoPT : sub.audioPT, subPT != pt, pt == (isVideo ? stream.videoPT : stream.audioPT) {
            out[1] = packet[1] & 0x80 | subPT
        }
        return true
    }

    /// A stream's audio-fallback counters and, per judged subscriber peer, its state and last sample.
    private static func fallbackJSON(_ c: RoutedStreamCounters, _ peers: [(String, QualityFallbackMonitor.State, LinkQualitySample?)]) -> JSONValue {
        var subs: [String: JSONValue] = [:]
        for (id, st, sample) in peers {
            var o: [String: JSONValue] = ["state": .string(st.rawValue)]
            if let sample {
                o["loss"] = .double((sample.loss * 1000).rounded() / 1000)
                if let raw = sample.rawLoss { o["rawLoss"] = .double((raw * 1000).rounded() / 1000) }
                if let r = sample.roundTripTime { o["rttMs"] = .double(Double(r.microseconds / 100) / 10) }
                if let j = sample.jitter { o["jitterMs"] = .double(Double(j.microseconds / 100) / 10) }
            }
            subs[id] = .object(o)
        }
        return ["enabled": .bool(c.audioFallbackEnabled), "warnings": .int(Int64(c.qualityWarnings)),
                "warningsLifted": .int(Int64(c.qualityWarningsLifted)), "videoDisabled": .int(Int64(c.qualityVideoDisabled)),
                "videoEnabled": .int(Int64(c.qualityVideoEnabled)), "subscribersVideoDisabled": .int(Int64(c.subscribersVideoDisabled)),
                "subscribers": .object(subs)]
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
                armKeyframeTimer(stream, at: now + pliInterval, now: now)
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

    /// On `queue`, at the end of an aggregation window (a request was sent: while a subscriber still waits for its
    /// first keyframe, or repair requests were folded, another goes).
    private func keyframeWindowEnded(_ stream: Stream) {
        let now = MonotonicClock.now()
        let send = state.withLock { s -> (PeerConnectionDriver, UInt32)? in
            guard s.streams[stream.id] === stream, let pub = stream.publisher?.driver, let ssrc = stream.videoSSRC else { return nil }
            let waiting = stream.subscribers.contains { $0.connected && $0.video && $0.waitingForKeyframe }
            switch stream.keyframes.windowEnded(now: now, receiversWaiting: waiting) {
            case .send:
                stream.counters.keyframeRequestsSent += 1
                armKeyframeTimer(stream, at: now + pliInterval, now: now)
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
    /// Transport counters of a stream's uplink (the publisher's connection): e.g. the transport-wide feedback the
    /// router sends, which is what the publisher's bandwidth estimate runs on.
    public func publisherStats(streamId: String) -> PeerConnectionStats? {
        state.withLock { $0.streams[streamId]?.publisher?.driver }?.stats
    }
    /// Transport counters of a stream's downlinks (its subscribers' connections): NACKs answered, retransmissions.
    public func subscriberStats(streamId: String) -> [PeerConnectionStats] {
        state.withLock { $0.streams[streamId]?.subscribers.compactMap(\.driver) ?? [] }.map(\.stats)
    }
    /// Peer connections the router holds.
    public var peerCount: Int { state.withLock { $0.peers.count } }
    /// Streams the router keeps: with a publisher, subscribers, or subscribe offers waiting for the publisher.
    public var streamCount: Int { state.withLock { $0.streams.count } }

    public func statsJSON(apiKey: String?) -> [UInt8] {
        let (snapshot, peers) = state.withLock { s in
            (s.streams.values.map { st in
                (sid: st.sessionId, id: st.id, counters: st.counters,
                 fallback: st.subscribers.compactMap { p in p.quality.map { (p.id, $0.state, $0.lastSample) } })
            }, s.peers.values.map(\.sessionId))
        }
        struct Totals { var peers = 0, packetsIn = 0, bytesIn = 0, packetsOut = 0, bytesOut = 0; var streams: [String: JSONValue] = [:] }
        var sessions: [String: Totals] = [:]
        for (sid, stid, c, fallback) in snapshot {
            if let apiKey, (try? SessionID.parse(sid))?.apiKey != apiKey { continue }
            var t = sessions[sid] ?? Totals(peers: peers.filter { $0 == sid }.count)
            t.packetsIn += c.packetsIn; t.bytesIn += c.bytesIn; t.packetsOut += c.packetsOut; t.bytesOut += c.bytesOut
            t.streams[stid] = [
                "packetsIn": .int(Int64(c.packetsIn)), "bytesIn": .int(Int64(c.bytesIn)), "packetsOut": .int(Int64(c.packetsOut)),
                "bytesOut": .int(Int64(c.bytesOut)), "subscribers": .int(Int64(c.subscribers)),
                "keyframeRequestsSent": .int(Int64(c.keyframeRequestsSent)),
                "keyframeRequestsAggregated": .int(Int64(c.keyframeRequestsAggregated)), "packetsHeld": .int(Int64(c.packetsHeld)),
                "packetsHeldForKeyframe": .int(Int64(c.packetsHeldForKeyframe)), "packetsReplayed": .int(Int64(c.packetsReplayed)),
                "audioFallback": Self.fallbackJSON(c, fallback),
            ]
            sessions[sid] = t
        }
        let sessionsJSON = sessions.mapValues { t -> JSONValue in
            ["peers": .int(Int64(t.peers)), "packetsIn": .int(Int64(t.packetsIn)), "bytesIn": .int(Int64(t.bytesIn)),
             "packetsOut": .int(Int64(t.packetsOut)), "bytesOut": .int(Int64(t.bytesOut)), "streams": .object(t.streams)]
        }
        return JSONValue.object(["sessions": .object(sessionsJSON), "mediaPort": .int(Int64(endpoint.address.port))]).serialized()
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
    /// Forwarding starts at `first`: older packets (late ones, retransmissions) are dropped.
    init(first: UInt16) { lastOut = first; resumeFrom = first }

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
        if let from = resumeFrom {
            let d = Int16(bitPattern: seq &- from)
            if d < 0 { return nil }
            if d > 8192 { resumeFrom = nil }  // well past it: stop comparing before the sequence space wraps
        }
        let out = seq &+ offset
        if let last = lastOut { if Int16(bitPattern: out &- last) > 0 { lastOut = out } } else { lastOut = out }
        return out
    }
}
