import OTBase
import OTWire

/// Repair counters of an `RTPSession`, summed over its SSRCs.
public struct RTPRepairCounters: Sendable, Equatable {
    /// Sequence numbers we NACKed (each retry counted), packets that arrived after being NACKed, and missing
    /// packets given up on (too old, too many retries, or a gap too large to track).
    public var nackedSequences = 0
    public var nackRepaired = 0
    public var nackGivenUp = 0
    /// Sequence numbers the peer NACKed that were resent, and those no longer (or never) in the cache.
    public var retransmissionsQueued = 0
    public var retransmissionMisses = 0
    public init() {}
}

/// What the RTP session reports.
public enum RTPSessionEvent: Sendable, Equatable {
    /// The remote asked for a keyframe of one of our SSRCs (PLI or FIR).
    case keyframeRequested(ssrc: UInt32)
    /// A new round-trip time: from a report block about one of our SSRCs, or from an XR DLRR answering our RRTR.
    case roundTripTime(Duration)
    /// A remote report about one of our SSRCs.
    case receiverReport(RTCPReportBlock)
    case bye(ssrc: UInt32)
    /// Transport-wide congestion control feedback from the remote.
    case transportFeedback(TransportCCFeedback)
    /// NACK gave up on these packets of a remote SSRC (retries used up, or too old): they will not come; a receiver
    /// waiting for them should stop (and ask for a keyframe).
    case packetsUnrecoverable(ssrc: UInt32, sequences: [UInt16])
    /// Without `Config.sendHistory`: the remote NACKed these packets of one of our SSRCs, sent recently and not resent
    /// within the RTT; answer each with `resend` (from where the packets are kept).
    case retransmissionsRequested(ssrc: UInt32, sequences: [UInt16])
}

/// A sans-IO RTP session: counts what is sent and received, answers NACKs from a retransmission cache,
/// generates NACKs for gaps, sender/receiver reports with SDES, PLI/FIR, transport-wide feedback, and measures RTT.
/// Each SSRC has a chain of OTRTP processors: `RTPSendChain` for ours, `RTPReceiveChain` for the remote's; the
/// transport-wide ones (`TransportCCRecorder`, `RTCPReportScheduler`) are the session's.
/// It works on sequence numbers and SSRCs; RTP header parsing and SRTP protection are the caller's.
public final class RTPSession {
    public struct Config: Sendable {
        /// Our SSRCs; the first is the sender SSRC of our RTCP packets.
        public var localSSRCs: [UInt32]
        public var cname: String
        /// Regular report interval (RFC 3550 §6.2 with a fixed minimum, randomized ±50 %).
        public var reportInterval: Duration = .seconds(1)
        public var nack = true
        /// With `nack`: keep a copy of each packet we send to answer NACKs from. Without, NACKs that call for a resend
        /// are reported (`retransmissionsRequested`) and answered with `resend`: a media router answers every
        /// subscriber of a stream from the stream's one history instead of a copy per subscriber.
        public var sendHistory = true
        /// Put an XR Receiver Reference Time Report in our reports while we receive media and send none, so that the
        /// peer's DLRR answer measures the round trip (RFC 3611 §4.4-4.5; `XRRoundTrip`): a session that sends is
        /// measured by the report blocks about its SSRCs and asks with no RRTR. Every session answers RRTRs.
        public var receiverReferenceTime = true
        /// Seed for the report interval randomization.
        public var seed: UInt64 = 1
        /// How long after the first packet it covers transport-wide feedback is sent.
        public var transportFeedbackInterval: Duration = .milliseconds(50)
        public init(localSSRCs: [UInt32], cname: String) { self.localSSRCs = localSSRCs; self.cname = cname }
    }

    public let config: Config
    /// Repair counters (NACKs sent and answered).
    public private(set) var repair = RTPRepairCounters()
    /// Current RTT estimate: 100 ms until measured, or what `setInitialRoundTripTime` gave until RTCP measures it (report
    /// blocks about our SSRCs, or XR DLRR answers to our RRTRs).
    public private(set) var rtt: Duration = .milliseconds(100)
    /// Whether `rtt` was measured by RTCP.
    public private(set) var rttMeasured = false
    /// The chains of our SSRCs and of the remote's (a handful each: a linear scan finds one).
    private var send: [RTPSendChain] = []
    /// Remote SSRCs beyond this many are not tracked (their packets still go up): a peer cannot make the scan long.
    public static let maxRemoteSSRCs = 32
    private var receive: [RTPReceiveChain] = []
    /// RTX streams for our SSRCs (negotiated), applied to their chains.
    private var rtx: [UInt32: RTXSender] = [:]
    /// What arrives with a transport-wide sequence number, for the feedback.
    private var transportCC = TransportCCRecorder()
    /// The remote SSRC the feedback names (the first that carried a transport-wide number).
    private var transportCCMediaSSRC: UInt32 = 0
    /// Transport-wide feedback messages queued.
    public private(set) var transportFeedbackSent = 0
    private var sentSR = ReferenceTimeLog()
    private var xr = XRRoundTrip()
    private var reports: RTCPReportScheduler
    private var rtcpOut = FIFO<[UInt8]>()
    private var retransmissions = FIFO<[UInt8]>()
    private var events = FIFO<RTPSessionEvent>()
    private var firSequence: UInt8 = 0
    /// Microseconds from `Instant` zero to the NTP epoch (1900), so SR timestamps are wall-clock NTP.
    private let ntpOffsetMicros: Int64

    public init(config: Config, now: Instant) {
        self.config = config
        reports = RTCPReportScheduler(interval: config.reportInterval, seed: config.seed, start: now)
        transportCC.feedbackInterval = config.transportFeedbackInterval
        ntpOffsetMicros = wallClockMillis() * 1000 + 2_208_988_800 * 1_000_000 - now.micros
    }

    private var senderSSRC: UInt32 { config.localSSRCs.first ?? 0 }

    /// Retransmissions of `ssrc` go out on an RTX stream (RFC 4588, negotiated: `a=ssrc-group:FID`, `apt`).
    public func enableRTX(ssrc: UInt32, rtx sender: RTXSender) {
        rtx[ssrc] = sender
        sendChain(ssrc)?.responder.rtx = sender
    }

    // The per-packet lookups index the arrays: `for in` and `first(where:)` allocate in unoptimized builds (an
    // iterator or a closure context), and the allocation tests run there too.
    private func sendChain(_ ssrc: UInt32) -> RTPSendChain? {
        var i = 0
        while i < send.count { if send[i].ssrc == ssrc { return send[i] }; i += 1 }
        return nil
    }
    private func receiveChain(_ ssrc: UInt32) -> RTPReceiveChain? {
        var i = 0
        while i < receive.count { if receive[i].ssrc == ssrc { return receive[i] }; i += 1 }
        return nil
    }
    /// The chain of a remote SSRC, made on first use; nil when `maxRemoteSSRCs` are tracked already.
    private func receiveChainMaking(_ ssrc: UInt32) -> RTPReceiveChain? {
        if let c = receiveChain(ssrc) { return c }
        guard receive.count < Self.maxRemoteSSRCs else { return nil }
        let c = RTPReceiveChain(ssrc: ssrc)
        receive.append(c)
        return c
    }

    /// A round-trip time measured elsewhere (ICE checks, the DTLS handshake), used until RTCP measures one.
    public func setInitialRoundTripTime(_ d: Duration) {
        guard !rttMeasured, d >= .zero else { return }
        rtt = d
    }

    func ntp(_ now: Instant) -> UInt64 {
        let us = UInt64(max(0, now.micros + ntpOffsetMicros))
        return (us / 1_000_000) << 32 | ((us % 1_000_000) << 32) / 1_000_000
    }

    // MARK: media in and out

    /// Records an RTP packet we sent, keeping a copy of the plain `packet` for retransmission (protected again, as a
    /// new packet, when resent).
    public func sent(ssrc: UInt32, sequence: UInt16, rtpTimestamp: UInt32, clockRate: UInt32, payloadBytes: Int, packet: [UInt8], now: Instant) {
        let chain: RTPSendChain
        if let c = sendChain(ssrc) { chain = c } else { chain = RTPSendChain(ssrc: ssrc, rtx: rtx[ssrc], keepsPackets: config.sendHistory); send.append(chain) }
        chain.sent(sequence: sequence, rtpTimestamp: rtpTimestamp, clockRate: clockRate, payloadBytes: payloadBytes, packet: packet,
                   history: config.nack, now: now)
    }

    /// Records an RTP packet we received (after SRTP unprotect). A new gap is NACKed at once; what its SSRC's NACK
    /// generator gave up is reported (`packetsUnrecoverable`).
    public func received(ssrc: UInt32, sequence: UInt16, rtpTimestamp: UInt32, clockRate: UInt32, now: Instant) {
        guard let chain = receiveChainMaking(ssrc) else { return }
        let givenUp = chain.nack.givenUp
        repair.nackRepaired += chain.received(sequence: sequence, rtpTimestamp: rtpTimestamp, clockRate: clockRate,
                                              nackEnabled: config.nack, now: now)
        repair.nackGivenUp += chain.nack.givenUp - givenUp
        // Nothing missing and nothing given up (the common case): nothing to NACK.
        if config.nack, chain.nack.outstanding > 0 || chain.nack.givenUp != givenUp { flushNACKs(chain, now: now) }
    }

    /// Answers a `retransmissionsRequested` packet of `ssrc` with `packet`, kept outside the session (plain RTP, as it
    /// was sent; nil: it is not held any more, counted as a miss): queued for `pollRetransmission`, on the RTX stream
    /// when negotiated.
    public func resend(ssrc: UInt32, _ packet: [UInt8]?) {
        guard let chain = sendChain(ssrc), let packet else { repair.retransmissionMisses += 1; return }
        retransmissions.push(chain.responder.wrapped(packet))
        repair.retransmissionsQueued += 1
    }

    /// Records a packet's transport-wide sequence number (from its header extension) for the feedback.
    public func receivedTransportSequence(_ sequence: UInt16, ssrc: UInt32, now: Instant) {
        transportCC.record(sequence: sequence, arrival: now)
        if transportCCMediaSSRC == 0 { transportCCMediaSSRC = ssrc }
    }

    /// Packets that carried a transport-wide number, and the numbers that never arrived.
    public var transportPacketsReceived: Int { transportCC.packetsRecorded }
    public var transportPacketsLost: Int { transportCC.packetsLost }

    /// Asks for a keyframe of a remote SSRC (a PLI, or a FIR when `useFIR`), paced by a `KeyframeRequestPacer`: one
    /// within two RTTs (at least 100 ms) of the last is held until then, and requests made meanwhile fold into it.
    /// Call it as often as a decoder needs one (e.g. on every tick while it waits for its first keyframe). `paced` false:
    /// the caller paces its requests itself (the router's `KeyframeRequestAggregator`, which knows when the keyframe it
    /// asked for has passed), so this one goes at once.
    public func requestKeyframe(ssrc: UInt32, useFIR: Bool = false, paced: Bool = true, now: Instant) {
        guard paced else { return queueKeyframeRequest(ssrc: ssrc, useFIR: useFIR) }
        if receiveChainMaking(ssrc)?.keyframes.request(useFIR: useFIR, now: now, rtt: rtt) == true {
            queueKeyframeRequest(ssrc: ssrc, useFIR: useFIR)
        }
    }

    private func queueKeyframeRequest(ssrc: UInt32, useFIR: Bool) {
        if useFIR {
            firSequence &+= 1
            rtcpOut.push(RTCP.serialize([.fir(senderSSRC: senderSSRC, entries: [.init(ssrc: ssrc, sequence: firSequence)])]))
        } else {
            rtcpOut.push(RTCP.serialize([.pli(senderSSRC: senderSSRC, mediaSSRC: ssrc)]))
        }
    }

    /// Keyframe requests sent and folded (pacing), over all remote SSRCs.
    public var keyframeRequestCounters: (sent: Int, folded: Int) {
        receive.reduce((0, 0)) { ($0.0 + $1.keyframes.sent, $0.1 + $1.keyframes.folded) }
    }

    /// Queues transport-wide feedback for what arrived since the last one.
    private func sendTransportFeedback() {
        guard let fb = transportCC.feedback(senderSSRC: senderSSRC, mediaSSRC: transportCCMediaSSRC) else { return }
        rtcpOut.push(RTCP.serialize([.transportCC(fb)]))
        transportFeedbackSent += 1
    }

    /// Handles a received (already unprotected) RTCP compound packet: every packet of it that parses
    /// (`RTCP.parseCompound`: a malformed one is skipped, the others are handled). Returns what it read, for a caller
    /// that looks at the packets too or counts what was skipped.
    @discardableResult
    public func handleRTCP(_ bytes: [UInt8], now: Instant) -> RTCPCompound {
        let compound = RTCP.parseCompound(bytes)
        for p in compound.packets {
            switch p {
            case .senderReport(let sr):
                if let c = receiveChain(sr.ssrc), c.hasMedia { c.stats.senderReport(ntpTime: sr.ntpTime, now: now) }
                reportBlocks(sr.reports, now: now)
            case .receiverReport(_, let reports):
                reportBlocks(reports, now: now)
            case .nack(_, let media, let lost):
                if let chain = sendChain(media) {
                    let missedBefore = chain.responder.missed
                    // A NACK repeated within the round trip is a duplicate only once the round trip is measured: the
                    // default or a handshake's estimate would hold back the retries of a receiver on a short path.
                    let rtt = rttMeasured ? rtt : .zero
                    if chain.responder.keepsPackets {
                        let packets = chain.responder.packets(for: lost, now: now, rtt: rtt)
                        retransmissions.push(contentsOf: packets)
                        repair.retransmissionsQueued += packets.count
                    } else {
                        let wanted = chain.responder.resendable(lost, now: now, rtt: rtt)
                        if !wanted.isEmpty { events.push(.retransmissionsRequested(ssrc: media, sequences: wanted)) }
                    }
                    repair.retransmissionMisses += chain.responder.missed - missedBefore
                } else {
                    repair.retransmissionMisses += lost.count
                }
            case .pli(_, let media):
                if sendChain(media) != nil || config.localSSRCs.contains(media) { events.push(.keyframeRequested(ssrc: media)) }
            case .fir(_, let entries):
                for e in entries where sendChain(e.ssrc) != nil || config.localSSRCs.contains(e.ssrc) { events.push(.keyframeRequested(ssrc: e.ssrc)) }
            case .bye(let ssrcs, _):
                for s in ssrcs { receiveChain(s)?.reset(); events.push(.bye(ssrc: s)) }
            case .transportCC(let fb):
                events.push(.transportFeedback(fb))
            case .extendedReport(let ssrc, let blocks):
                if let d = xr.received(senderSSRC: ssrc, blocks: blocks, localSSRC: senderSSRC, now: now) { measuredRoundTrip(d) }
            case .sourceDescription, .other:
                break
            }
        }
        return compound
    }

    private func reportBlocks(_ blocks: [RTCPReportBlock], now: Instant) {
        for b in blocks where sendChain(b.ssrc) != nil {
            events.push(.receiverReport(b))
            if let d = sentSR.roundTrip(mid: b.lastSR, delay: b.delaySinceLastSR, now: now) { measuredRoundTrip(d) }
        }
    }

    private func measuredRoundTrip(_ d: Duration) {
        rtt = d
        rttMeasured = true
        events.push(.roundTripTime(d))
    }

    /// NACKs what `chain` has due and reports what it gave up.
    private func flushNACKs(_ chain: RTPReceiveChain, now: Instant) {
        let givenUpBefore = chain.nack.givenUp
        let lost = chain.nack.outstanding > 0 ? chain.nack.poll(now: now, rtt: rtt) : []
        repair.nackGivenUp += chain.nack.givenUp - givenUpBefore
        let abandoned = chain.nack.takeGivenUp()
        if !abandoned.isEmpty { events.push(.packetsUnrecoverable(ssrc: chain.ssrc, sequences: abandoned)) }
        guard !lost.isEmpty else { return }
        repair.nackedSequences += lost.count
        // One FCI list per packet keeps each NACK small.
        rtcpOut.push(RTCP.serialize([.nack(senderSSRC: senderSSRC, mediaSSRC: chain.ssrc, lost: lost)]))
    }

    // MARK: timers and output

    /// Sends periodic reports, NACK retries and held keyframe requests that are due.
    public func handleTimeout(now: Instant) {
        for chain in receive {
            if config.nack, chain.hasMedia { flushNACKs(chain, now: now) }
            if let useFIR = chain.keyframes.poll(now: now, rtt: rtt) { queueKeyframeRequest(ssrc: chain.ssrc, useFIR: useFIR) }
        }
        if let due = transportCC.feedbackDue, due <= now { sendTransportFeedback() }
        guard reports.due(now: now) else { return }
        var packets: [RTCPPacket] = []
        var blocks: [RTCPReportBlock] = []
        for chain in receive.sorted(by: { $0.ssrc < $1.ssrc }) where chain.hasMedia { blocks.append(chain.stats.reportBlock(now: now)) }
        let sending = send.filter { $0.lastSentAt.map { now - $0 < .seconds(2) } ?? false }.sorted { $0.ssrc < $1.ssrc }
        let ntpNow = ntp(now)
        if let s = sending.first {
            packets.append(.senderReport(RTCPSenderReport(ssrc: s.ssrc, ntpTime: ntpNow, rtpTime: s.rtpTime(at: now), packetCount: s.packets,
                                                          octetCount: s.octets, reports: Array(blocks.prefix(31)))))
            sentSR.record(ntp: ntpNow, at: now)
            for o in sending.dropFirst() {
                packets.append(.senderReport(RTCPSenderReport(ssrc: o.ssrc, ntpTime: ntpNow, rtpTime: o.rtpTime(at: now),
                                                              packetCount: o.packets, octetCount: o.octets)))
            }
        } else {
            packets.append(.receiverReport(ssrc: senderSSRC, reports: Array(blocks.prefix(31))))
        }
        packets.append(.sourceDescription([RTCPSDESChunk(ssrc: senderSSRC, items: [(1, config.cname)])]))
        // Receiving and sending nothing, no report block will measure our round trip: an RRTR asks for a DLRR instead.
        let referenceTime = config.receiverReferenceTime && sending.isEmpty && !blocks.isEmpty
        if let x = xr.report(senderSSRC: senderSSRC, referenceTime: referenceTime, ntp: ntpNow, now: now) { packets.append(x) }
        rtcpOut.push(RTCP.serialize(packets))
    }

    /// The next RTCP compound packet to protect and send.
    public func pollRTCP() -> [UInt8]? { rtcpOut.pop() }
    /// The next packet to resend as it is (as stored by `sent`, or given to `resend`), in answer to a NACK.
    public func pollRetransmission() -> [UInt8]? { retransmissions.pop() }
    public func pollEvent() -> RTPSessionEvent? { events.pop() }
    /// The earliest of the next report, NACK retry or give-up, held keyframe request and transport-wide feedback
    /// (no allocation: it is asked after every packet).
    public func pollTimeout() -> Instant? {
        var earliest = reports.nextReportAt
        if let due = transportCC.feedbackDue { earliest = min(earliest, due) }
        var i = 0
        while i < receive.count {
            let chain = receive[i]
            if config.nack, chain.nack.outstanding > 0, let t = chain.nack.nextPoll(rtt: rtt) { earliest = min(earliest, t) }
            if let t = chain.keyframes.nextDeadline(rtt: rtt) { earliest = min(earliest, t) }
            i += 1
        }
        return earliest
    }

    /// Reception statistics of a remote SSRC.
    public func statistics(ssrc: UInt32) -> RTPReceiveStatistics? { receiveChain(ssrc).flatMap { $0.hasMedia ? $0.stats : nil } }
    /// NACK counters of a remote SSRC: (sequence numbers NACKed, recovered, given up, outstanding).
    public func nackCounters(ssrc: UInt32) -> (nacked: Int, recovered: Int, givenUp: Int, outstanding: Int)? {
        receiveChain(ssrc).flatMap { $0.hasMedia ? ($0.nack.nacked, $0.nack.recovered, $0.nack.givenUp, $0.nack.outstanding) : nil }
    }
    /// Retransmission counters of one of our SSRCs: packets resent and their (unprotected) bytes, NACKed sequence
    /// numbers no longer held.
    public func retransmissionCounters(ssrc: UInt32) -> (packets: Int, bytes: Int, misses: Int)? {
        sendChain(ssrc).map { ($0.responder.resent, $0.responder.resentBytes, $0.responder.missed) }
    }
}
