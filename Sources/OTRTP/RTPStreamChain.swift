import OTBase
import OTWire

/// The send side of one of our SSRCs in an `RTPSession`: the sender-report counters and the `NACKResponder` over its
/// send history (with its `RTXSender` when negotiated). A class, so the session updates it in place per packet.
public final class RTPSendChain {
    public let ssrc: UInt32
    var packets: UInt32 = 0
    var octets: UInt32 = 0
    var lastRTPTimestamp: UInt32 = 0
    var lastSentAt: Instant?
    var clockRate: UInt32 = 90000
    var responder: NACKResponder

    init(ssrc: UInt32, rtx: RTXSender?, keepsPackets: Bool) {
        self.ssrc = ssrc
        responder = NACKResponder(rtx: rtx, keepsPackets: keepsPackets)
    }

    /// Counts a packet we sent and, with `history`, records it for NACK answers (a copy, when the responder keeps them).
    func sent(sequence: UInt16, rtpTimestamp: UInt32, clockRate: UInt32, payloadBytes: Int, packet: [UInt8], history: Bool, now: Instant) {
        packets &+= 1
        octets &+= UInt32(truncatingIfNeeded: payloadBytes)
        lastRTPTimestamp = rtpTimestamp
        lastSentAt = now
        self.clockRate = clockRate
        if history { responder.store(sequence: sequence, packet: packet) }
    }

    /// The RTP timestamp our media clock reads at `now` (the last packet's, advanced by the time since it was sent).
    func rtpTime(at now: Instant) -> UInt32 {
        let elapsed = lastSentAt.map { now - $0 } ?? .zero
        return lastRTPTimestamp &+ UInt32(truncatingIfNeeded: elapsed.microseconds * Int64(clockRate) / 1_000_000)
    }
}

/// The receive side of one remote SSRC in an `RTPSession`: `RTPReceiveStatistics` (report blocks), `NACKGenerator`
/// (what to NACK and what to give up) and `KeyframeRequestPacer` (PLI/FIR pacing). It exists from the first packet or
/// keyframe request; statistics and NACK state start with the first packet (and start again after a BYE).
public final class RTPReceiveChain {
    public let ssrc: UInt32
    /// Media arrived since the chain was made or reset.
    private(set) var hasMedia = false
    var stats: RTPReceiveStatistics
    var nack = NACKGenerator()
    var keyframes = KeyframeRequestPacer()

    init(ssrc: UInt32) {
        self.ssrc = ssrc
        stats = RTPReceiveStatistics(ssrc: ssrc, clockRate: 90000)
    }

    /// Counts an arriving packet and updates what is missing. Returns the change in the generator's recovered count.
    func received(sequence: UInt16, rtpTimestamp: UInt32, clockRate: UInt32, nackEnabled: Bool, now: Instant) -> Int {
        if !hasMedia {
            hasMedia = true
            stats = RTPReceiveStatistics(ssrc: ssrc, clockRate: clockRate)
        }
        stats.record(sequence: sequence, rtpTimestamp: rtpTimestamp, now: now)
        guard nackEnabled else { return 0 }
        let recovered = nack.recovered
        nack.received(sequence: sequence, now: now)
        return nack.recovered - recovered
    }

    /// The SSRC said BYE: its statistics and NACK state start afresh with its next packet (keyframe pacing stays).
    func reset() {
        hasMedia = false
        nack = NACKGenerator()
    }
}
