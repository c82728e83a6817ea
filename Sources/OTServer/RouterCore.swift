import OTBase
import OTRTP
import OTTransport
import OTWire

/// The media router's forwarding state and policies, sans-IO: the streams of the sessions one worker owns, their
/// publishers and subscribers, gating, sequence rewriting, keyframe-request aggregation and the audio-fallback
/// quality monitors. It takes packets, connection events and `now`, and returns forwards (each subscriber's copy of a
/// packet), commands (keyframe requests, quality and publisher-link events) and a next deadline. It owns no socket,
/// thread, lock or timer: its driver (`RouterWorker`) calls it from one thread only.
///
/// Connections are known by `PeerHandle`s the driver chooses; the core never touches a connection.
///
/// Forwarding: RTP from a publisher goes to each subscriber of its stream without decoding; SSRCs are kept (a
/// subscriber's answer declares the publisher's SSRCs); sequence numbers are rewritten per subscriber only across a
/// pause (subscribe-to-audio/video off then on), so the subscriber sees no gap. Video to a subscriber starts at a
/// keyframe (the first-keyframe gate); when the keyframe's first packet arrived after later ones (repaired by NACK),
/// those are replayed from the stream's history. Each subscriber gets its own payload types and header-extension ids.
///
/// Keyframe requests to a publisher are aggregated per `pliInterval` (`KeyframeRequestAggregator`).
///
/// Audio fallback: every `qualityInterval` each judged subscriber's downlink (loss after repair and jitter from its
/// receiver reports, loss on the wire from its transport-wide feedback, RTT) is sampled over its last
/// `LinkQualityWindow.defaultIntervals` intervals into a `QualityFallbackMonitor`; sustained poor quality warns the
/// subscriber, then stops forwarding the stream's video to it (audio continues and keeps the link judged); after
/// `recoverAfter` of good quality video resumes from a keyframe. Streams whose publisher disabled audio fallback, and
/// subscribers that turned video off (unless it is off for quality), are not judged.
final class RouterCore {
    typealias PeerHandle = Int

    struct Config: Sendable {
        /// The keyframe-request aggregation window of one publisher.
        var pliInterval: Duration = .milliseconds(300)
        /// Thresholds and hold times of the audio fallback.
        var quality = QualityFallbackConfig()
        /// How often each subscriber's downlink is judged (at least 100 ms).
        var qualityInterval: Duration = .seconds(1)
    }

    /// What the driver must do for the core.
    enum Command: Equatable {
        /// Ask the publisher's connection for a keyframe of `ssrc`.
        case requestKeyframe(publisher: PeerHandle, ssrc: UInt32)
        /// Tell a subscriber's client about an audio-fallback decision.
        case quality(peerId: String, event: MediaQualityEvent)
        /// A stream's publisher link went down (false) or came back (true).
        case publisherLink(streamId: String, up: Bool)
    }

    /// One negotiated kind of a subscriber: its payload type, header-extension ids and mid.
    struct Target {
        var payloadType: UInt8
        var ids: RTPHeaderExtensionIds
        var mid: String
    }

    /// What a subscriber's answer declares for a stream: its SSRCs per kind (outer nil: the publisher does not send
    /// that kind; inner nil: not learnt yet) and the router's RTX SSRC for its video.
    struct Source: Equatable {
        var audio: UInt32??
        var video: UInt32??
        var videoRTX: UInt32
        /// The name of the publisher's video payload format (nil: no video, or a codec without a format).
        var videoFormat: String?
    }

    /// A publisher's or subscriber's connection, as forwarding sees it.
    final class Peer {
        let id: String
        let handle: PeerHandle
        let sessionId: String
        let connectionId: String
        let streamId: String
        let direction: MediaDirection
        /// The stream it publishes or subscribes to (nil once it left it).
        fileprivate(set) var stream: Stream?
        var audio = true
        var video = true
        /// Per SSRC: sequence rewriting across pauses.
        var rewriters = SequenceRewriters()
        /// Video is held until a keyframe starts while the connection is up (new subscriber, or video resumed).
        var waitingForKeyframe = true
        /// The subscriber's connection is up (it can receive the keyframe it waits for).
        var connected = false
        /// When the gate last opened (until the subscriber's first keyframe request after it, or `pliInterval`).
        var gateOpenedAt: Instant?
        /// The keyframe its gate opened at did not reach it (it asked for one right after): it waits for the next one.
        var missedGateKeyframe = false
        var audioTarget: Target?
        var videoTarget: Target?
        /// Rewriters from the publisher's header-extension ids to this subscriber's (redone when the publisher changes).
        var audioExtensions: RTPExtensionRewriter?
        var videoExtensions: RTPExtensionRewriter?
        /// This subscriber's copy of the packet being forwarded: reused, so forwarding does not allocate for it.
        var out: [UInt8] = []
        /// Audio fallback (subscribers of streams that allow it): the downlink's samples and the decision.
        var sampler = LinkQualitySampler()
        var quality: QualityFallbackMonitor?
        /// Video is dropped for quality; `forwardingVideo` is `video && !qualityOff`, as last applied.
        var qualityOff = false
        var forwardingVideo = true

        init(id: String, handle: PeerHandle, sessionId: String, connectionId: String, streamId: String, direction: MediaDirection) {
            self.id = id; self.handle = handle; self.sessionId = sessionId; self.connectionId = connectionId
            self.streamId = streamId; self.direction = direction
        }
    }

    /// One routed stream: its publisher (when it has one), its subscribers and its policies' state.
    final class Stream {
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
        /// The payload format of the publisher's video (what tells a keyframe start; nil: a codec without one).
        var videoFormat: (any RTPPayloadFormat)?
        var subscribers: [Peer] = []
        var counters = RoutedStreamCounters()
        var audioFallbackEnabled = true
        var keyframes: KeyframeRequestAggregator
        /// When the keyframe aggregator's window check is due.
        var keyframeCheckAt: Instant?
        /// The publisher's latest video packets (plain RTP), and the highest sequence number among them: subscribers'
        /// NACKs are answered from here (`retransmissions`), and when a keyframe's first packet arrives late (repaired
        /// by NACK), what came after it is replayed from here. As long as the history each subscriber's connection kept
        /// before (1024 packets: half a second at 2000 packets/s).
        var videoHistory = NACKResponder(capacity: 1024)
        var videoHighest: UInt16?
        /// The publisher's latest audio packets: our clients NACK audio too (every SSRC they receive), and a subscriber's
        /// NACK is answered from here (256 packets: five seconds of 20 ms frames).
        var audioHistory = NACKResponder(capacity: 256)
        /// The RTX SSRC the router declares to subscribers for this stream's video (retransmissions to them).
        let videoRTXSSRC = UInt32.random(in: 1 ... .max)
        /// The publisher's link dropped while the stream had subscribers, and no new one is up yet (they were told).
        var publisherLinkDown = false
        /// Tokens of subscribe offers that arrived before the publisher's (the driver keeps the offers).
        var pending: [Int] = []

        init(id: String, sessionId: String, pliInterval: Duration) {
            self.id = id; self.sessionId = sessionId; keyframes = KeyframeRequestAggregator(interval: pliInterval)
        }
    }

    /// A stream's counters and its judged subscribers' audio-fallback state, copied out for stats.
    struct StreamSnapshot: Sendable {
        var sessionId: String
        var streamId: String
        var counters: RoutedStreamCounters
        var fallback: [(peerId: String, state: QualityFallbackMonitor.State, sample: LinkQualitySample?)]
    }

    let config: Config
    private(set) var peers: [String: Peer] = [:]
    private var byHandle: [PeerHandle: Peer] = [:]
    private(set) var streams: [String: Stream] = [:]
    /// Subscribe-to-audio/video wishes that arrived before their subscriber's connection was made; applied when it is
    /// made, dropped when it closes.
    private var earlySubscriptions: [String: (audio: Bool, video: Bool)] = [:]
    private var commands: [Command] = []
    private var nextQualityAt: Instant

    /// The subscribers the last `receive` forwarded to (their copies in `Peer.out`), and replayed packets.
    private(set) var forwards: [Peer] = []
    private(set) var replays: [(handle: PeerHandle, packet: [UInt8])] = []
    /// The stream of the last `receive`, for `recordSent`.
    private var lastStream: Stream?

    init(config: Config, now: Instant) {
        var c = config
        c.qualityInterval = max(c.qualityInterval, .milliseconds(100))
        self.config = c
        nextQualityAt = now + c.qualityInterval
        forwards.reserveCapacity(64)
    }

    // MARK: outputs

    /// The next command, or nil when there is none.
    func pollCommand() -> Command? { commands.isEmpty ? nil : commands.removeFirst() }

    /// When `handleTimeout` must next be called.
    var nextDeadline: Instant {
        var d = nextQualityAt
        for stream in streams.values { if let t = stream.keyframeCheckAt, t < d { d = t } }
        return d
    }

    // MARK: offers and subscriptions

    /// A publisher's connection was made (it replaces the stream's previous one, whose handle is returned so the
    /// driver closes it). Returns the tokens of the subscribe offers that waited for it.
    func addPublisher(peerId: String, handle: PeerHandle, sessionId: String, connectionId: String, streamId: String,
                      audioFallbackEnabled: Bool, media: [SDPNegotiatedMedia]) -> (replaced: PeerHandle?, pending: [Int]) {
        let peer = Peer(id: peerId, handle: handle, sessionId: sessionId, connectionId: connectionId, streamId: streamId, direction: .publish)
        let stream = streams[streamId] ?? Stream(id: streamId, sessionId: sessionId, pliInterval: config.pliInterval)
        streams[streamId] = stream
        var replaced: PeerHandle?
        if let old = stream.publisher {
            forget(old)
            old.stream = nil
            replaced = old.handle
        }
        stream.publisher = peer
        peer.stream = stream
        stream.audioFallbackEnabled = audioFallbackEnabled
        stream.counters.audioFallbackEnabled = audioFallbackEnabled
        // SSRCs the offer did not list (no a=ssrc) are learnt from the first packets (`learnSSRC`).
        for m in media {
            if m.kind == "audio" {
                (stream.audioSSRC, stream.audioPT, stream.audioSource, stream.audioMid) = (m.remoteSSRCs.first, m.codec.payloadType, m.extensionIds, m.mid)
            }
            if m.kind == "video" {
                (stream.videoSSRC, stream.videoPT, stream.videoSource, stream.videoMid) = (m.remoteSSRCs.first, m.codec.payloadType, m.extensionIds, m.mid)
                stream.videoFormat = PayloadFormats.format(for: m.codec)
            }
        }
        for sub in stream.subscribers { Self.pairExtensions(sub, stream) }
        remember(peer)
        defer { stream.pending = [] }
        return (replaced, stream.pending)
    }

    /// What a subscriber of `streamId` is answered with, or nil when the stream has no publisher yet: then the offer
    /// waits (its `token` is returned by `addPublisher` when the publisher comes).
    func source(forSubscriberOf streamId: String, sessionId: String, token: Int) -> Source? {
        guard let stream = streams[streamId], stream.publisher != nil else {
            let stream = streams[streamId] ?? Stream(id: streamId, sessionId: sessionId, pliInterval: config.pliInterval)
            streams[streamId] = stream
            stream.pending.append(token)
            return nil
        }
        return Source(audio: stream.audioPT.map { _ in stream.audioSSRC }, video: stream.videoPT.map { _ in stream.videoSSRC },
                      videoRTX: stream.videoRTXSSRC, videoFormat: stream.videoFormat?.name)
    }

    /// A subscriber's connection was made.
    func addSubscriber(peerId: String, handle: PeerHandle, sessionId: String, connectionId: String, streamId: String,
                       audioFallbackEnabled: Bool, media: [SDPNegotiatedMedia], now: Instant) {
        let peer = Peer(id: peerId, handle: handle, sessionId: sessionId, connectionId: connectionId, streamId: streamId, direction: .subscribe)
        for m in media {
            if m.kind == "audio" { peer.audioTarget = Target(payloadType: m.codec.payloadType, ids: m.extensionIds, mid: m.mid) }
            if m.kind == "video" { peer.videoTarget = Target(payloadType: m.codec.payloadType, ids: m.extensionIds, mid: m.mid) }
        }
        remember(peer)
        guard let stream = streams[streamId] else { return }
        peer.stream = stream
        Self.pairExtensions(peer, stream)
        stream.subscribers.append(peer)
        stream.counters.subscribers = stream.subscribers.count
        if stream.audioFallbackEnabled && audioFallbackEnabled { peer.quality = QualityFallbackMonitor(config: config.quality) }
        if let wish = earlySubscriptions.removeValue(forKey: peerId), applySubscription(peer, stream, audio: wish.audio, video: wish.video) {
            requestKeyframe(stream, .firstKeyframe, now: now)
        }
    }

    /// A connection ended; returns its handle (nil when unknown). Its stream goes when nothing holds it.
    @discardableResult
    func close(peerId: String) -> PeerHandle? {
        earlySubscriptions[peerId] = nil
        guard let peer = peers[peerId] else { return nil }
        forget(peer)
        if let stream = peer.stream {
            if stream.publisher === peer {
                stream.publisher = nil
                publisherLink(stream, up: false)
            } else {
                stream.subscribers.removeAll { $0 === peer }
                stream.counters.subscribers = stream.subscribers.count
                if peer.qualityOff { stream.counters.subscribersVideoDisabled -= 1 }
            }
            peer.stream = nil
            removeIfUnused(stream)
        }
        return peer.handle
    }

    /// Forgets the waiting subscribe offers with these tokens, and the streams only they had made.
    func dropPending(tokens: Set<Int>) {
        guard !tokens.isEmpty else { return }
        for stream in Array(streams.values) where !stream.pending.isEmpty {
            stream.pending.removeAll { tokens.contains($0) }
            removeIfUnused(stream)
        }
    }

    /// The peers of a client connection.
    func peerIds(ofConnection connectionId: String) -> [String] { peers.values.filter { $0.connectionId == connectionId }.map(\.id) }

    /// A subscriber's subscribe-to-audio/video wishes (kept for later when its connection is not made yet).
    func setSubscription(peerId: String, audio: Bool, video: Bool, now: Instant) {
        guard let peer = peers[peerId] else {
            earlySubscriptions[peerId] = (audio, video)
            return
        }
        guard peer.direction == .subscribe, let stream = peer.stream else { return }
        if applySubscription(peer, stream, audio: audio, video: video) { requestKeyframe(stream, .firstKeyframe, now: now) }
    }

    // MARK: connection events

    /// A publisher's connection came up or failed (a failed link leaves the subscribers without media until the
    /// publisher republishes; its new link's `up` ends that).
    func publisherLink(_ handle: PeerHandle, up: Bool) {
        guard let peer = byHandle[handle], let stream = peer.stream, stream.publisher === peer else { return }
        publisherLink(stream, up: up)
    }

    /// Packets of a publisher's SSRC were lost on the uplink for good: the subscribers cannot have them either, so a
    /// keyframe is asked for now rather than when each of them gives up.
    func publisherPacketsUnrecoverable(_ handle: PeerHandle, ssrc: UInt32, now: Instant) {
        guard let peer = byHandle[handle], let stream = peer.stream, stream.publisher === peer, stream.videoSSRC == ssrc else { return }
        requestKeyframe(stream, .repair, now: now)
    }

    /// A subscriber's connection is up: it needs a keyframe.
    func subscriberConnected(_ handle: PeerHandle, now: Instant) {
        guard let peer = byHandle[handle] else { return }
        peer.connected = true
        if let stream = peer.stream { requestKeyframe(stream, .firstKeyframe, now: now) }
    }

    /// A subscriber asked for a keyframe (PLI/FIR). Right after its gate opened, the keyframe it opened at did not reach
    /// it (its first packets were lost on the downlink, and a receiver cannot NACK what came before the first packet it
    /// saw): like a new subscriber's, the request goes at once and again at each window's end until a keyframe passes.
    func subscriberRequestedKeyframe(_ handle: PeerHandle, now: Instant) {
        guard let peer = byHandle[handle], let stream = peer.stream else { return }
        guard let opened = peer.gateOpenedAt, now - opened < config.pliInterval else {
            return requestKeyframe(stream, .repair, now: now)
        }
        peer.gateOpenedAt = nil
        peer.missedGateKeyframe = true
        requestKeyframe(stream, .firstKeyframe, now: now)
    }

    /// A subscriber's receiver report about one of the stream's SSRCs.
    func subscriberReport(_ handle: PeerHandle, _ block: RTCPReportBlock) {
        guard let peer = byHandle[handle], peer.quality != nil else { return }
        let isVideo = peer.stream?.videoSSRC == block.ssrc
        peer.sampler.report(block, clockRate: isVideo ? 90_000 : 48_000)
    }

    /// A subscriber's transport-wide feedback.
    func subscriberFeedback(_ handle: PeerHandle, _ fb: TransportCCFeedback) {
        guard let peer = byHandle[handle], peer.quality != nil else { return }
        peer.sampler.transportFeedback(fb)
    }

    /// The publisher's uplink measured its round trip (`RoutedStreamCounters.publisherRoundTripTime`).
    func publisherRoundTripTime(_ handle: PeerHandle, _ rtt: Duration) {
        guard let peer = byHandle[handle], let stream = peer.stream, stream.publisher === peer else { return }
        stream.counters.publisherRoundTripTime = rtt
    }

    /// A subscriber's round-trip time.
    func subscriberRoundTripTime(_ handle: PeerHandle, _ rtt: Duration) {
        byHandle[handle]?.sampler.roundTripTime = rtt
    }

    // MARK: forwarding

    /// A publisher's RTP packet (plain, after SRTP): fills `forwards` (each subscriber's copy in its `out`) and
    /// `replays`. The packet's stream is remembered for `recordSent`.
    func receive(_ packet: [UInt8], from handle: PeerHandle, now: Instant) {
        forwards.removeAll(keepingCapacity: true)
        if !replays.isEmpty { replays.removeAll() }
        lastStream = nil
        guard packet.count >= 12, let publisher = byHandle[handle], let stream = publisher.stream, stream.publisher === publisher else { return }
        let ssrc = UInt32(packet[8]) << 24 | UInt32(packet[9]) << 16 | UInt32(packet[10]) << 8 | UInt32(packet[11])
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        let pt = packet[1] & 0x7F
        lastStream = stream
        stream.counters.packetsIn += 1
        stream.counters.bytesIn += packet.count
        if ssrc != stream.videoSSRC && ssrc != stream.audioSSRC { Self.learnSSRC(ssrc, pt, packet, stream) }
        let isVideo = ssrc == stream.videoSSRC
        guard isVideo || ssrc == stream.audioSSRC else { return }
        if isVideo {
            stream.videoHistory.store(sequence: seq, packet: packet)
            if let h = stream.videoHighest, Int16(bitPattern: seq &- h) <= 0 {} else { stream.videoHighest = seq }
        } else {
            stream.audioHistory.store(sequence: seq, packet: packet)
        }
        var startsKeyframe: Bool?
        if isVideo && stream.keyframes.awaitingKeyframe {
            startsKeyframe = Self.startsKeyframe(packet, stream)
            if startsKeyframe == true { keyframeForwarded(stream) }
        }
        // Indexed, not `for in`: an iterator allocates in unoptimized builds (the allocation test runs there too).
        var index = 0
        while index < stream.subscribers.count {
            let sub = stream.subscribers[index]
            index += 1
            guard isVideo ? sub.forwardingVideo : sub.audio else { stream.counters.packetsHeld += 1; continue }
            var opened = false
            if isVideo && sub.waitingForKeyframe {
                if startsKeyframe == nil { startsKeyframe = Self.startsKeyframe(packet, stream) }
                // Only a connected subscriber's gate opens: what is sent before its connection is up never arrives, and
                // a gate opened then lets the frames after a lost keyframe through (the keyframe asked for at
                // connection could come after them, out of order, with a loss after it that nothing NACKed).
                guard startsKeyframe == true, sub.connected else {
                    stream.counters.packetsHeld += 1
                    stream.counters.packetsHeldForKeyframe += 1
                    continue
                }
                sub.waitingForKeyframe = false
                sub.gateOpenedAt = now
                opened = true
            }
            guard Self.copy(packet, seq: seq, ssrc: ssrc, pt: pt, isVideo: isVideo, for: sub, stream, now: now, into: &sub.out) else {
                stream.counters.packetsHeld += 1
                continue
            }
            forwards.append(sub)
            // The gate opened at a keyframe start that came after later packets: replay those, in order.
            guard opened, let highest = stream.videoHighest else { continue }
            var next = seq &+ 1
            while Int16(bitPattern: next &- highest) <= 0 {
                var buffer: [UInt8] = []
                if let old = stream.videoHistory.lookup(next),
                   Self.copy(old, seq: next, ssrc: ssrc, pt: pt, isVideo: true, for: sub, stream, now: now, into: &buffer) {
                    replays.append((sub.handle, buffer))
                    stream.counters.packetsReplayed += 1
                }
                next &+= 1
            }
        }
    }

    /// A subscriber's NACK its connection passed up (`retransmissionsRequested`): for each sequence number (the
    /// subscriber's), the stream's packet it was sent as (video or audio), written for the subscriber again (its
    /// sequence number, payload type and header extensions); nil where the stream's history no longer holds it, for
    /// numbers from before the subscriber's last pause, and for other SSRCs.
    func retransmissions(for handle: PeerHandle, ssrc: UInt32, sequences: [UInt16], now: Instant) -> [[UInt8]?] {
        guard let sub = byHandle[handle], sub.direction == .subscribe, let stream = sub.stream,
              ssrc == stream.videoSSRC || ssrc == stream.audioSSRC else {
            return sequences.map { _ in nil }
        }
        let isVideo = ssrc == stream.videoSSRC
        return sequences.map { seq in
            guard let original = sub.rewriters.original(of: seq, ssrc: ssrc),
                  let packet = isVideo ? stream.videoHistory.lookup(original) : stream.audioHistory.lookup(original) else { return nil }
            var out: [UInt8] = []
            return Self.write(packet, as: seq, pt: packet[1] & 0x7F, isVideo: isVideo, for: sub, stream, now: now, into: &out) ? out : nil
        }
    }

    /// Counts what the driver sent of the last `receive`'s forwards and replays.
    func recordSent(packets: Int, bytes: Int) {
        guard let stream = lastStream, packets > 0 else { return }
        stream.counters.packetsOut += packets
        stream.counters.bytesOut += bytes
    }

    // MARK: timers

    /// Runs what is due: keyframe-aggregation window ends and the audio-fallback judgement.
    func handleTimeout(now: Instant) {
        for stream in streams.values {
            guard let t = stream.keyframeCheckAt, t <= now else { continue }
            stream.keyframeCheckAt = nil
            keyframeWindowEnded(stream, now: now)
        }
        if nextQualityAt <= now {
            judgeQuality(now: now)
            nextQualityAt = now + config.qualityInterval
        }
    }

    // MARK: stats

    var peerCount: Int { peers.count }
    var streamCount: Int { streams.count }
    func handle(of peerId: String) -> PeerHandle? { peers[peerId]?.handle }
    func publisherHandle(streamId: String) -> PeerHandle? { streams[streamId]?.publisher?.handle }
    func subscriberHandles(streamId: String) -> [PeerHandle] { streams[streamId]?.subscribers.map(\.handle) ?? [] }
    func counters(streamId: String) -> RoutedStreamCounters? { streams[streamId]?.counters }
    /// Every stream's counters and fallback state, and the session of every peer.
    func snapshot() -> (streams: [StreamSnapshot], peerSessions: [String]) {
        (streams.values.map { st in
            StreamSnapshot(sessionId: st.sessionId, streamId: st.id, counters: st.counters,
                           fallback: st.subscribers.compactMap { p in p.quality.map { (p.id, $0.state, $0.lastSample) } })
        }, peers.values.map(\.sessionId))
    }

    // MARK: private

    private func remember(_ peer: Peer) {
        if let old = peers[peer.id], old !== peer { byHandle[old.handle] = nil }
        peers[peer.id] = peer
        byHandle[peer.handle] = peer
    }

    private func forget(_ peer: Peer) {
        if peers[peer.id] === peer { peers[peer.id] = nil }
        byHandle[peer.handle] = nil
    }

    /// The stream's publisher link went down (`up` false) or came back; reported when that is news (down only matters
    /// to a stream with subscribers, up only after a reported down).
    private func publisherLink(_ stream: Stream, up: Bool) {
        guard up == stream.publisherLinkDown, up || !stream.subscribers.isEmpty else { return }
        stream.publisherLinkDown = !up
        commands.append(.publisherLink(streamId: stream.id, up: up))
    }

    /// A stream with no publisher, no subscriber and no waiting offer is removed.
    private func removeIfUnused(_ stream: Stream) {
        guard stream.publisher == nil, stream.subscribers.isEmpty, stream.pending.isEmpty, streams[stream.id] === stream else { return }
        streams[stream.id] = nil
    }

    /// A subscriber's extension rewriters from the stream's publisher's ids to its own.
    private static func pairExtensions(_ sub: Peer, _ stream: Stream) {
        sub.audioExtensions = sub.audioTarget.map { RTPExtensionRewriter(source: stream.audioSource, target: $0.ids, mid: $0.mid) }
        sub.videoExtensions = sub.videoTarget.map { RTPExtensionRewriter(source: stream.videoSource, target: $0.ids, mid: $0.mid) }
    }

    /// A subscriber's subscribe-to-audio/video wishes applied to forwarding; true when video resumed and needs a keyframe.
    private func applySubscription(_ peer: Peer, _ stream: Stream, audio: Bool, video: Bool) -> Bool {
        if let ssrc = stream.audioSSRC, audio != peer.audio {
            if !audio { peer.rewriters.pause(ssrc) } else { peer.rewriters.resume(ssrc) }
        }
        peer.audio = audio
        peer.video = video
        return Self.gateVideo(peer, stream)
    }

    /// Applies `video && !qualityOff` to forwarding (pausing or resuming the video sequence rewriter); true when
    /// video resumed and needs a keyframe.
    private static func gateVideo(_ peer: Peer, _ stream: Stream) -> Bool {
        let on = peer.video && !peer.qualityOff
        guard on != peer.forwardingVideo else { return false }
        peer.forwardingVideo = on
        guard let ssrc = stream.videoSSRC else { return false }
        if !on {
            peer.rewriters.pause(ssrc)
            peer.sampler.forget(ssrc: ssrc)
            return false
        }
        peer.rewriters.resume(ssrc)
        peer.waitingForKeyframe = true
        return true
    }

    /// A keyframe request for a stream's publisher, sent or folded by the stream's aggregator.
    private func requestKeyframe(_ stream: Stream, _ kind: KeyframeRequestAggregator.Kind, now: Instant) {
        guard let pub = stream.publisher, let ssrc = stream.videoSSRC else { return }
        switch stream.keyframes.request(kind, now: now) {
        case .send:
            stream.counters.keyframeRequestsSent += 1
            stream.keyframeCheckAt = now + config.pliInterval
            commands.append(.requestKeyframe(publisher: pub.handle, ssrc: ssrc))
        case .folded:
            stream.counters.keyframeRequestsAggregated += 1
        case .checkAt(let t):
            stream.counters.keyframeRequestsAggregated += 1
            stream.keyframeCheckAt = t
        }
    }

    /// A keyframe start passed the router: it serves every request so far.
    private func keyframeForwarded(_ stream: Stream) {
        stream.keyframes.keyframeForwarded()
        var i = 0  // indexed: an iterator allocates in unoptimized builds, where the forwarding allocation test runs
        while i < stream.subscribers.count { stream.subscribers[i].missedGateKeyframe = false; i += 1 }
    }

    /// At the end of an aggregation window (a request was sent: while a subscriber still waits for its first keyframe,
    /// or repair requests were folded, another goes).
    private func keyframeWindowEnded(_ stream: Stream, now: Instant) {
        guard let pub = stream.publisher, let ssrc = stream.videoSSRC else { return }
        let waiting = stream.subscribers.contains { $0.connected && $0.video && ($0.waitingForKeyframe || $0.missedGateKeyframe) }
        switch stream.keyframes.windowEnded(now: now, receiversWaiting: waiting) {
        case .send:
            stream.counters.keyframeRequestsSent += 1
            stream.keyframeCheckAt = now + config.pliInterval
            commands.append(.requestKeyframe(publisher: pub.handle, ssrc: ssrc))
        case .checkAt(let t):
            stream.keyframeCheckAt = t
        case .folded:
            break
        }
    }

    /// Samples each judged subscriber's downlink and applies the decisions.
    private func judgeQuality(now: Instant) {
        var keyframes: [Stream] = []
        for peer in peers.values where peer.direction == .subscribe && peer.quality != nil {
            // Audio-only streams have no video to drop.
            guard let stream = peer.stream, stream.videoSSRC != nil else { continue }
            let sample = peer.sampler.sample()
            // A subscriber that turned video off has nothing to warn about (unless video is off for quality: then the
            // link stays judged, so it comes back when the subscriber wants it again).
            if !peer.video && !peer.qualityOff {
                if peer.quality?.warned == true {
                    stream.counters.qualityWarningsLifted += 1
                    commands.append(.quality(peerId: peer.id, event: .videoDisableWarningLifted))
                }
                peer.quality = QualityFallbackMonitor(config: config.quality)
                continue
            }
            guard let sample else { continue }
            switch peer.quality?.observe(sample, now: now) {
            case .warn:
                stream.counters.qualityWarnings += 1
                commands.append(.quality(peerId: peer.id, event: .videoDisableWarning))
            case .liftWarning:
                stream.counters.qualityWarningsLifted += 1
                commands.append(.quality(peerId: peer.id, event: .videoDisableWarningLifted))
            case .disableVideo:
                peer.qualityOff = true
                _ = Self.gateVideo(peer, stream)
                stream.counters.qualityVideoDisabled += 1
                stream.counters.subscribersVideoDisabled += 1
                commands.append(.quality(peerId: peer.id, event: .videoDisabled))
            case .enableVideo:
                peer.qualityOff = false
                if Self.gateVideo(peer, stream), !keyframes.contains(where: { $0 === stream }) { keyframes.append(stream) }
                stream.counters.qualityVideoEnabled += 1
                stream.counters.subscribersVideoDisabled -= 1
                commands.append(.quality(peerId: peer.id, event: .videoEnabled))
            case nil:
                break
            }
        }
        for stream in keyframes { requestKeyframe(stream, .firstKeyframe, now: now) }
    }

    /// A publisher whose offer listed no `a=ssrc` for a kind gets it from that kind's first packet, found by the MID
    /// header extension (RFC 8843 §9.2) or else by the payload type; only the section's codec payload type counts (an
    /// RTX packet carries the same MID).
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

    /// Writes one subscriber's copy of a publisher's packet into `out` (its sequence number, its payload type, its
    /// header extensions); false when its rewriter drops the packet (paused, or older than where forwarding started or
    /// resumed) or its extensions cannot be rewritten.
    private static func copy(_ packet: [UInt8], seq: UInt16, ssrc: UInt32, pt: UInt8, isVideo: Bool, for sub: Peer, _ stream: Stream,
                             now: Instant, into out: inout [UInt8]) -> Bool {
        guard let rewritten = sub.rewriters.map(seq, ssrc: ssrc) else { return false }
        return write(packet, as: rewritten, pt: pt, isVideo: isVideo, for: sub, stream, now: now, into: &out)
    }

    /// Writes a publisher's packet for one subscriber as its sequence number `seq`; false when its extensions cannot be
    /// rewritten.
    private static func write(_ packet: [UInt8], as seq: UInt16, pt: UInt8, isVideo: Bool, for sub: Peer, _ stream: Stream,
                              now: Instant, into out: inout [UInt8]) -> Bool {
        // Each rewriter is passed where it is stored, in place: calling it on the class's property copied it (its arrays
        // retained and released per forward), and so did taking it out as a value.
        switch isVideo ? rewrite(packet, with: &sub.videoExtensions, now: now, into: &out)
                       : rewrite(packet, with: &sub.audioExtensions, now: now, into: &out) {
        case false?: return false
        case true?: break
        case nil:
            out.removeAll(keepingCapacity: true)
            out.append(contentsOf: packet)
        }
        out[2] = UInt8(seq >> 8); out[3] = UInt8(seq & 0xFF)
        if let subPT = (isVideo ? sub.videoTarget : sub.audioTarget)?.payloadType, subPT != pt, pt == (isVideo ? stream.videoPT : stream.audioPT) {
            out[1] = packet[1] & 0x80 | subPT
        }
        return true
    }

    /// `rewriter`'s rewrite of `packet` into `out` (nil: no rewriter).
    private static func rewrite(_ packet: [UInt8], with rewriter: inout RTPExtensionRewriter?, now: Instant, into out: inout [UInt8]) -> Bool? {
        rewriter?.rewrite(packet, into: &out, now: now)
    }

    /// True when a video packet of the stream carries the first packet of a keyframe, as its payload format says.
    private static func startsKeyframe(_ packet: [UInt8], _ stream: Stream) -> Bool {
        guard let format = stream.videoFormat else { return false }
        return PayloadFormats.isKeyframeStart(format, rtpPacket: packet)
    }
}

/// A subscriber's `SequenceRewriter`s by SSRC: a short list (a stream has an audio and a video SSRC), so the forwarding
/// path finds its rewriter without hashing.
struct SequenceRewriters {
    private var entries: [(ssrc: UInt32, rewriter: SequenceRewriter)] = []

    /// (A plain loop: `firstIndex(where:)` allocates its closure's context in unoptimized builds, where the
    /// forwarding path's allocation test runs too.)
    private func index(_ ssrc: UInt32) -> Int? {
        var i = 0
        while i < entries.count { if entries[i].ssrc == ssrc { return i }; i += 1 }
        return nil
    }

    /// The sequence number to send for `seq` of `ssrc`, or nil to drop it; the first packet of an SSRC starts its rewriter.
    mutating func map(_ seq: UInt16, ssrc: UInt32) -> UInt16? {
        if let i = index(ssrc) { return entries[i].rewriter.map(seq) }
        entries.append((ssrc, SequenceRewriter(first: seq)))
        return seq
    }

    /// Pauses `ssrc` (starting its rewriter paused when it has none).
    mutating func pause(_ ssrc: UInt32) {
        if let i = index(ssrc) { entries[i].rewriter.pause() } else {
            var r = SequenceRewriter()
            r.pause()
            entries.append((ssrc, r))
        }
    }

    /// The publisher's sequence number of `out`, one that `ssrc`'s rewriter gave out (nil: none, or from before its
    /// last resume).
    func original(of out: UInt16, ssrc: UInt32) -> UInt16? {
        index(ssrc).flatMap { entries[$0].rewriter.original(of: out) }
    }

    /// Resumes `ssrc` when it has a rewriter.
    mutating func resume(_ ssrc: UInt32) {
        if let i = index(ssrc) { entries[i].rewriter.resume() }
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
    /// The first number given out with the current offset (nil once well past it).
    private var offsetFrom: UInt16?

    init() {}
    /// Forwarding starts at `first`: older packets (late ones, retransmissions) are dropped.
    init(first: UInt16) { lastOut = first; resumeFrom = first; offsetFrom = first }

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
            offsetFrom = seq &+ offset
        }
        if let from = resumeFrom {
            let d = Int16(bitPattern: seq &- from)
            if d < 0 { return nil }
            if d > 8192 { resumeFrom = nil }  // well past it: stop comparing before the sequence space wraps
        }
        let out = seq &+ offset
        if let last = lastOut { if Int16(bitPattern: out &- last) > 0 { lastOut = out } } else { lastOut = out }
        if let from = offsetFrom, Int16(bitPattern: out &- from) > 8192 { offsetFrom = nil }
        return out
    }

    /// The sequence number that was mapped to `out`, when `out` was given out since the offset last changed (between
    /// the first number with that offset and the highest given out); nil otherwise.
    func original(of out: UInt16) -> UInt16? {
        guard let last = lastOut, Int16(bitPattern: last &- out) >= 0 else { return nil }
        if let from = offsetFrom, Int16(bitPattern: out &- from) < 0 { return nil }
        return out &- offset
    }
}
