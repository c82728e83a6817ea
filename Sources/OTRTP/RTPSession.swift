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
    /// A new round-trip time from a report block about one of our SSRCs.
    case roundTripTime(Duration)
    /// A remote report about one of our SSRCs.
    case receiverReport(RTCPReportBlock)
    case bye(ssrc: UInt32)
    /// Transport-wide congestion control feedback from the remote.
    case transportFeedback(TransportCCFeedback)
    /// NACK gave up on these packets of a remote SSRC (retries used up, or too old): they will not come; a receiver
    /// waiting for them should stop (and ask for a keyframe).
    case packetsUnrecoverable(ssrc: UInt32, sequences: [UInt16])
}

/// A sans-IO RTP session: counts what is sent and received, answers NACKs from a retransmission cache,
/// generates NACKs for gaps, sender/receiver reports with SDES, PLI/FIR, and measures RTT.
/// It works on sequence numbers and SSRCs; RTP header parsing and SRTP protection are the caller's.
public final class RTPSession {
    public struct Config: Sendable {
        /// Our SSRCs; the first is the sender SSRC of our RTCP packets.
        public var localSSRCs: [UInt32]
        public var cname: String
        /// Regular report interval (RFC 3550 §6.2 with a fixed minimum, randomized ±50 %).
        public var reportInterval: Duration = .seconds(1)
        public var nack = true
        /// Seed for the report interval randomization.
        public var seed: UInt64 = 1
        public init(localSSRCs: [UInt32], cname: String) { self.localSSRCs = localSSRCs; self.cname = cname }
    }

    struct SendState {
        var packets: UInt32 = 0
        var octets: UInt32 = 0
        var lastRTPTimestamp: UInt32 = 0
        var lastSentAt: Instant?
        var clockRate: UInt32 = 90000
        var cache: NACKResponder
        init(rtx: RTXSender?) { cache = NACKResponder(rtx: rtx) }

        mutating func record(rtpTimestamp: UInt32, clockRate: UInt32, payloadBytes: Int, now: Instant) {
            packets &+= 1
            octets &+= UInt32(truncatingIfNeeded: payloadBytes)
            lastRTPTimestamp = rtpTimestamp
            lastSentAt = now
            self.clockRate = clockRate
        }
    }

    struct ReceiveState {
        var stats: RTPReceiveStatistics
        var nack = NACKGenerator()
    }

    public let config: Config
    /// Repair counters (NACKs sent and answered).
    public private(set) var repair = RTPRepairCounters()
    /// Current RTT estimate: 100 ms until measured, or what `setInitialRoundTripTime` gave until RTCP measures it.
    public private(set) var rtt: Duration = .milliseconds(100)
    private var rttMeasured = false
    private var send: [UInt32: SendState] = [:]
    private var receive: [UInt32: ReceiveState] = [:]
    /// RTX streams for our SSRCs (negotiated), applied to their send state.
    private var rtx: [UInt32: RTXSender] = [:]
    /// Keyframe requests per remote SSRC.
    private var keyframePacers: [UInt32: KeyframeRequestPacer] = [:]
    private var sentSR: [(lsr: UInt32, at: Instant)] = []
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
        ntpOffsetMicros = wallClockMillis() * 1000 + 2_208_988_800 * 1_000_000 - now.micros
    }

    private var senderSSRC: UInt32 { config.localSSRCs.first ?? 0 }

    /// Retransmissions of `ssrc` go out on an RTX stream (RFC 4588, negotiated: `a=ssrc-group:FID`, `apt`).
    public func enableRTX(ssrc: UInt32, rtx sender: RTXSender) {
        rtx[ssrc] = sender
        send[ssrc]?.cache.rtx = sender
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

    /// Records an RTP packet we sent, keeping `packet` for retransmission. Pass the SRTP-protected bytes:
    /// a retransmission is then the same SRTP packet again (a receiver that already has it drops it as a replay).
    public func sent(ssrc: UInt32, sequence: UInt16, rtpTimestamp: UInt32, clockRate: UInt32, payloadBytes: Int, packet: [UInt8], now: Instant) {
        // Mutated in place: a copy of the state would copy the retransmission cache on every packet.
        send[ssrc, default: SendState(rtx: rtx[ssrc])].record(rtpTimestamp: rtpTimestamp, clockRate: clockRate, payloadBytes: payloadBytes, now: now)
        if config.nack { send[ssrc]?.cache.store(sequence: sequence, packet: packet) }
    }

    /// Records an RTP packet we received (after SRTP unprotect).
    public func received(ssrc: UInt32, sequence: UInt16, rtpTimestamp: UInt32, clockRate: UInt32, now: Instant) {
        receive[ssrc, default: ReceiveState(stats: RTPReceiveStatistics(ssrc: ssrc, clockRate: clockRate))]
            .stats.record(sequence: sequence, rtpTimestamp: rtpTimestamp, now: now)
        if config.nack {
            // Only the counters are read around the update (a copy of the generator would copy its table).
            let recovered = receive[ssrc]?.nack.recovered ?? 0, givenUp = receive[ssrc]?.nack.givenUp ?? 0
            receive[ssrc]?.nack.received(sequence: sequence, now: now)
            repair.nackRepaired += (receive[ssrc]?.nack.recovered ?? 0) - recovered
            repair.nackGivenUp += (receive[ssrc]?.nack.givenUp ?? 0) - givenUp
            flushNACKs(now: now)
        }
    }

    /// Asks for a keyframe of a remote SSRC (a PLI, or a FIR when `useFIR`), paced by a `KeyframeRequestPacer`: one
    /// within two RTTs (at least 100 ms) of the last is held until then, and requests made meanwhile fold into it.
    /// Call it as often as a decoder needs one (e.g. on every tick while it waits for its first keyframe). `paced` false:
    /// the caller paces its requests itself (the router's `KeyframeRequestAggregator`, which knows when the keyframe it
    /// asked for has passed), so this one goes at once.
    public func requestKeyframe(ssrc: UInt32, useFIR: Bool = false, paced: Bool = true, now: Instant) {
        guard paced else { return queueKeyframeRequest(ssrc: ssrc, useFIR: useFIR) }
        if keyframePacers[ssrc, default: KeyframeRequestPacer()].request(useFIR: useFIR, now: now, rtt: rtt) {
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
        keyframePacers.values.reduce((0, 0)) { ($0.0 + $1.sent, $0.1 + $1.folded) }
    }

    /// Queues transport-wide congestion control feedback built by the caller.
    public func sendTransportFeedback(_ fb: TransportCCFeedback) { rtcpOut.push(RTCP.serialize([.transportCC(fb)])) }

    /// Handles a received (already unprotected) RTCP compound packet.
    public func handleRTCP(_ bytes: [UInt8], now: Instant) throws {
        for p in try RTCP.parse(bytes) {
            switch p {
            case .senderReport(let sr):
                receive[sr.ssrc]?.stats.senderReport(ntpTime: sr.ntpTime, now: now)
                reportBlocks(sr.reports, now: now)
            case .receiverReport(_, let reports):
                reportBlocks(reports, now: now)
            case .nack(_, let media, let lost):
                let rtt = self.rtt
                let missedBefore = send[media]?.cache.missed ?? 0
                if let packets = send[media]?.cache.packets(for: lost, now: now, rtt: rtt) {
                    retransmissions.push(contentsOf: packets)
                    repair.retransmissionsQueued += packets.count
                    repair.retransmissionMisses += (send[media]?.cache.missed ?? 0) - missedBefore
                } else {
                    repair.retransmissionMisses += lost.count
                }
            case .pli(_, let media):
                if send[media] != nil || config.localSSRCs.contains(media) { events.push(.keyframeRequested(ssrc: media)) }
            case .fir(_, let entries):
                for e in entries where send[e.ssrc] != nil || config.localSSRCs.contains(e.ssrc) { events.push(.keyframeRequested(ssrc: e.ssrc)) }
            case .bye(let ssrcs, _):
                for s in ssrcs { receive[s] = nil; events.push(.bye(ssrc: s)) }
            case .transportCC(let fb):
                events.push(.transportFeedback(fb))
            case .sourceDescription, .other:
                break
            }
        }
    }

    private func reportBlocks(_ blocks: [RTCPReportBlock], now: Instant) {
        for b in blocks where send[b.ssrc] != nil {
            events.push(.receiverReport(b))
            guard b.lastSR != 0, let sent = sentSR.last(where: { $0.lsr == b.lastSR }) else { continue }
            let dlsr = Duration.microseconds(Int64(b.delaySinceLastSR) * 1_000_000 / 65536)
            let measured = now - sent.at - dlsr
            guard measured >= .zero else { continue }
            rtt = measured
            rttMeasured = true
            events.push(.roundTripTime(measured))
        }
    }

    private func flushNACKs(now: Instant) {
        let rtt = self.rtt
        for ssrc in Array(receive.keys) {  // a copy of the keys, so mutating `receive` does not copy it
            let givenUpBefore = receive[ssrc]?.nack.givenUp ?? 0
            let lost = receive[ssrc]?.nack.poll(now: now, rtt: rtt) ?? []
            repair.nackGivenUp += (receive[ssrc]?.nack.givenUp ?? 0) - givenUpBefore
            if let abandoned = receive[ssrc]?.nack.takeGivenUp(), !abandoned.isEmpty {
                events.push(.packetsUnrecoverable(ssrc: ssrc, sequences: abandoned))
            }
            guard !lost.isEmpty else { continue }
            repair.nackedSequences += lost.count
            // One FCI list per packet keeps each NACK small.
            rtcpOut.push(RTCP.serialize([.nack(senderSSRC: senderSSRC, mediaSSRC: ssrc, lost: lost)]))
        }
    }

    // MARK: timers and output

    /// Sends periodic reports, NACK retries and held keyframe requests that are due.
    public func handleTimeout(now: Instant) {
        if config.nack { flushNACKs(now: now) }
        for ssrc in Array(keyframePacers.keys) {
            if let useFIR = keyframePacers[ssrc]?.poll(now: now, rtt: rtt) { queueKeyframeRequest(ssrc: ssrc, useFIR: useFIR) }
        }
        guard reports.due(now: now) else { return }
        var packets: [RTCPPacket] = []
        var blocks: [RTCPReportBlock] = []
        for ssrc in receive.keys.sorted() { if let b = receive[ssrc]?.stats.reportBlock(now: now) { blocks.append(b) } }
        let sending = send.filter { $0.value.lastSentAt.map { now - $0 < .seconds(2) } ?? false }
        if let (ssrc, s) = sending.sorted(by: { $0.key < $1.key }).first {
            let ntpNow = ntp(now)
            let elapsed = s.lastSentAt.map { now - $0 } ?? .zero
            let rtpNow = s.lastRTPTimestamp &+ UInt32(truncatingIfNeeded: elapsed.microseconds * Int64(s.clockRate) / 1_000_000)
            packets.append(.senderReport(RTCPSenderReport(ssrc: ssrc, ntpTime: ntpNow, rtpTime: rtpNow, packetCount: s.packets,
                                                          octetCount: s.octets, reports: Array(blocks.prefix(31)))))
            sentSR.append((UInt32(truncatingIfNeeded: ntpNow >> 16), now))
            if sentSR.count > 16 { sentSR.removeFirst() }
            for (other, o) in sending.sorted(by: { $0.key < $1.key }).dropFirst() {
                let e = o.lastSentAt.map { now - $0 } ?? .zero
                packets.append(.senderReport(RTCPSenderReport(ssrc: other, ntpTime: ntpNow,
                    rtpTime: o.lastRTPTimestamp &+ UInt32(truncatingIfNeeded: e.microseconds * Int64(o.clockRate) / 1_000_000),
                    packetCount: o.packets, octetCount: o.octets)))
            }
        } else {
            packets.append(.receiverReport(ssrc: senderSSRC, reports: Array(blocks.prefix(31))))
        }
        packets.append(.sourceDescription([RTCPSDESChunk(ssrc: senderSSRC, items: [(1, config.cname)])]))
        rtcpOut.push(RTCP.serialize(packets))
    }

    /// The next RTCP compound packet to protect and send.
    public func pollRTCP() -> [UInt8]? { rtcpOut.pop() }
    /// The next packet to resend as it is (as stored by `sent`), in answer to a NACK.
    public func pollRetransmission() -> [UInt8]? { retransmissions.pop() }
    public func pollEvent() -> RTPSessionEvent? { events.pop() }
    public func pollTimeout() -> Instant? {
        let nacks = config.nack ? receive.values.compactMap { $0.nack.nextPoll(rtt: rtt) }.min() : nil
        let keyframes = keyframePacers.values.compactMap { $0.nextDeadline(rtt: rtt) }.min()
        return [reports.nextReportAt, nacks, keyframes].compactMap { $0 }.min()
    }

    /// Reception statistics of a remote SSRC.
    public func statistics(ssrc: UInt32) -> RTPReceiveStatistics? { receive[ssrc]?.stats }
    /// NACK counters of a remote SSRC: (sequence numbers NACKed, recovered, given up, outstanding).
    public func nackCounters(ssrc: UInt32) -> (nacked: Int, recovered: Int, givenUp: Int, outstanding: Int)? {
        receive[ssrc].map { ($0.nack.nacked, $0.nack.recovered, $0.nack.givenUp, $0.nack.outstanding) }
    }
    /// Retransmission counters of one of our SSRCs: packets resent and their (unprotected) bytes, NACKed sequence
    /// numbers no longer held.
    public func retransmissionCounters(ssrc: UInt32) -> (packets: Int, bytes: Int, misses: Int)? {
        send[ssrc].map { ($0.cache.resent, $0.cache.resentBytes, $0.cache.missed) }
    }
}
