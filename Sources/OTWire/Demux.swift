/// What a datagram on a shared ICE socket carries, by its first byte (RFC 7983, RFC 5761 for RTCP).
public enum DemuxKind: Sendable, Equatable {
    case stun, zrtp, dtls, turnChannel, rtp, rtcp, unknown

    /// Classifies a datagram: 0–3 STUN, 16–19 ZRTP, 20–63 DTLS, 64–79 TURN channel data,
    /// 128–191 RTP or RTCP (RTCP when the second byte, the packet type, is 192–223).
    @inline(__always)
    public static func classify(_ b: ArraySlice<UInt8>) -> DemuxKind {
        // Subscripts and comparisons only: `first` and `contains` allocated in unoptimized builds (every datagram
        // received comes here; the receive path's allocation test runs in those).
        guard !b.isEmpty else { return .unknown }
        switch b[b.startIndex] {
        case 0...3: return .stun
        case 16...19: return .zrtp
        case 20...63: return .dtls
        case 64...79: return .turnChannel
        case 128...191:
            guard b.count >= 2 else { return .unknown }
            let pt = b[b.startIndex + 1]
            return pt >= 192 && pt <= 223 ? .rtcp : .rtp
        default: return .unknown
        }
    }

    public static func classify(_ b: [UInt8]) -> DemuxKind { classify(b[...]) }
}
