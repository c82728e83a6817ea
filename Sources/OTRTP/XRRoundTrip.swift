import OTBase
import OTWire

/// Our last reference timestamps (the middle 32 bits of the NTP time of an SR, or of an XR RRTR) and when each went
/// out, so that the answer about one (LSR + DLSR in a report block, LRR + DLRR in an XR DLRR sub-block) gives the
/// round trip: now − sent − delay (RFC 3550 §6.4.1, RFC 3611 §4.5). Only a timestamp we sent counts: an answer naming
/// another (0 = none received, a stale or forged one) measures nothing. Sans-IO.
struct ReferenceTimeLog: Sendable {
    private var sent: [(mid: UInt32, at: Instant)] = []
    /// Timestamps kept (the oldest goes): answers come within a report interval or two.
    static let capacity = 16
    /// A longer round trip is nonsense (a peer's clock or arithmetic), not a path.
    static let maxRoundTrip: Duration = .seconds(60)

    /// The middle 32 bits of a 64-bit NTP timestamp (RFC 3550 §4).
    static func middle(_ ntp: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: ntp >> 16) }

    mutating func record(ntp: UInt64, at: Instant) {
        sent.append((Self.middle(ntp), at))
        if sent.count > Self.capacity { sent.removeFirst() }
    }

    /// The round trip an answer about `mid` gives at `now`, `delay` (1/65536 s) after the peer received it; nil when
    /// `mid` is not one we sent or the result is negative or longer than `maxRoundTrip`.
    func roundTrip(mid: UInt32, delay: UInt32, now: Instant) -> Duration? {
        guard mid != 0, let s = sent.last(where: { $0.mid == mid }) else { return nil }
        let measured = now - s.at - .microseconds(Int64(delay) * 1_000_000 / 65536)
        guard measured >= .zero, measured <= Self.maxRoundTrip else { return nil }
        return measured
    }
}

/// The round trip of a leg that receives and sends no media, from RTCP XR (RFC 3611): such a leg never gets a report
/// block about a stream of its own (LSR/DLSR), so it puts a Receiver Reference Time Report (RRTR, §4.4) with its NTP
/// time in its reports, and the peer answers with a DLRR sub-block (§4.5: that time's middle 32 bits and the delay
/// since it arrived) in its next one. Every leg answers: the RRTRs received are remembered (the last per sender SSRC,
/// `maxRemembered` senders) and answered once, in the next report. Sans-IO: `RTPSession` asks it for the XR of each
/// compound report and hands it each XR received.
public struct XRRoundTrip: Sendable {
    /// RRTR senders answered per report at most (more are dropped until the next).
    public static let maxRemembered = 8
    private var received: [(ssrc: UInt32, lastRR: UInt32, at: Instant)] = []
    private var sentReferenceTimes = ReferenceTimeLog()

    public init() {}

    /// The XR for the compound report sent at `now` with our NTP time `ntp`: an RRTR when `referenceTime` (the caller's
    /// rule: we receive and send nothing), and a DLRR answering each RRTR received since the last report; nil when
    /// there is neither.
    public mutating func report(senderSSRC: UInt32, referenceTime: Bool, ntp: UInt64, now: Instant) -> RTCPPacket? {
        var blocks: [RTCPXRBlock] = []
        if referenceTime {
            blocks.append(.receiverReferenceTime(ntp: ntp))
            sentReferenceTimes.record(ntp: ntp, at: now)
        }
        if !received.isEmpty {
            blocks.append(.dlrr(received.map {
                RTCPDLRRSubBlock(ssrc: $0.ssrc, lastRR: $0.lastRR,
                                 delaySinceLastRR: UInt32(clamping: max(0, (now - $0.at).microseconds) * 65536 / 1_000_000))
            }))
            received.removeAll(keepingCapacity: true)
        }
        return blocks.isEmpty ? nil : .extendedReport(senderSSRC: senderSSRC, blocks: blocks)
    }

    /// Takes an XR from `senderSSRC` received at `now`: remembers its RRTR, and returns the round trip that its DLRR
    /// sub-block for `localSSRC` (ours) gives; nil when it has none, or one that names no RRTR of ours or gives a
    /// nonsense round trip.
    public mutating func received(senderSSRC: UInt32, blocks: [RTCPXRBlock], localSSRC: UInt32, now: Instant) -> Duration? {
        var measured: Duration?
        for block in blocks {
            switch block {
            case .receiverReferenceTime(let ntp):
                let lastRR = ReferenceTimeLog.middle(ntp)
                if let i = received.firstIndex(where: { $0.ssrc == senderSSRC }) {
                    received[i] = (senderSSRC, lastRR, now)
                } else if received.count < Self.maxRemembered {
                    received.append((senderSSRC, lastRR, now))
                }
            case .dlrr(let subs):
                for d in subs where d.ssrc == localSSRC {
                    if let rtt = sentReferenceTimes.roundTrip(mid: d.lastRR, delay: d.delaySinceLastRR, now: now) { measured = rtt }
                }
            }
        }
        return measured
    }
}
