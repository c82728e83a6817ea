import OTBase

/// How one codec's frames travel in RTP: the seam between a codec and the RTP, SDP, router and E2EE code, which
/// ask the format instead of knowing the codec. VP8 (RFC 7741) and Opus (RFC 7587) are the first implementations.
public protocol RTPPayloadFormat: Sendable {
    associatedtype Packetizer: RTPPacketizer
    associatedtype Depacketizer: RTPDepacketizer
    /// The encoding name of `a=rtpmap` ("VP8", "opus"); compared case-insensitively.
    var name: String { get }
    var kind: MediaKind { get }
    /// The RTP clock rate (Hz).
    var clockRate: UInt32 { get }
    /// Audio channels announced in `a=rtpmap` (nil for video).
    var channels: UInt16? { get }
    /// The `a=fmtp` parameters we announce (nil: none).
    var fmtp: String? { get }
    /// The RTCP feedback we announce for it.
    var rtcpFeedback: [String] { get }
    /// The payload type we offer it under (a dynamic one, 96...127).
    var preferredPayloadType: UInt8 { get }
    /// Whether a remote description's codec is this format (name, clock rate and, for formats with variants, fmtp).
    func matches(_ codec: SDPCodec) -> Bool
    /// True when `payload`, an RTP payload of this format, is the first packet of a keyframe: a receiver that
    /// starts from it can decode (the router forwards from it to a new subscriber).
    func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool
    /// The frame id the payload carries (VP8: the picture id), nil when none; consecutive frames have consecutive ids.
    func frameID(_ payload: ArraySlice<UInt8>) -> UInt16?
    /// Bytes at the start of an encoded frame left in clear by end-to-end encryption, so receivers and the router
    /// can read the frame's header before decrypting (capped by the caller at the frame's length).
    func clearPrefixLength(isKeyframe: Bool) -> Int
    /// The payload bytes (the format's payload header + codec data) that fit an `mtu`-byte datagram after IP/UDP,
    /// an RTP header of `rtpHeaderLength` bytes and `srtpOverhead` bytes of SRTP tag: what its packetizer is given.
    func maxPayloadSize(mtu: Int, rtpHeaderLength: Int, srtpOverhead: Int) -> Int
    func makePacketizer(maxPayloadSize: Int) -> Packetizer
    /// A depacketizer that waits up to `reorderWindow` packets past a missing one before giving up on it.
    func makeDepacketizer(reorderWindow: Int) -> Depacketizer
}

extension RTPPayloadFormat {
    public var channels: UInt16? { nil }
    public var fmtp: String? { nil }
    public func matches(_ codec: SDPCodec) -> Bool {
        codec.name.lowercased() == name.lowercased() && codec.clockRate == clockRate
    }
    /// IPv4 + UDP (28 bytes), the RTP header and the SRTP tag come off the MTU; at least 8 bytes are left.
    public func maxPayloadSize(mtu: Int, rtpHeaderLength: Int, srtpOverhead: Int) -> Int {
        max(mtu - 28 - rtpHeaderLength - srtpOverhead, 8)
    }
    /// The codec line for an offer or an answer under payload type `pt`.
    public func sdpCodec(payloadType pt: UInt8) -> SDPCodec {
        SDPCodec(payloadType: pt, name: name, clockRate: clockRate, channels: channels, fmtp: fmtp, rtcpFeedback: rtcpFeedback)
    }
}
