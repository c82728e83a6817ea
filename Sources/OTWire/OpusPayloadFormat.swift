import OTBase

/// Opus (RFC 7587): one Opus packet per RTP payload, 48 kHz clock, two channels announced, in-band FEC.
public struct OpusPayloadFormat: RTPPayloadFormat {
    public init() {}
    public var name: String { "opus" }
    public var kind: MediaKind { .audio }
    public var clockRate: UInt32 { UInt32(OpusPayload.clockRate) }
    public var channels: UInt16? { 2 }
    public var fmtp: String? { "minptime=10;useinbandfec=1" }
    public var rtcpFeedback: [String] { ["transport-cc"] }
    public var preferredPayloadType: UInt8 { 111 }
    /// Every Opus packet decodes on its own.
    public func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool { !payload.isEmpty }
    public func frameID(_ payload: ArraySlice<UInt8>) -> UInt16? { nil }
    /// The TOC byte (RFC 6716 §3.1).
    public func clearPrefixLength(isKeyframe: Bool) -> Int { 1 }
    public func makePacketizer(maxPayloadSize: Int) -> OpusPacketizer { OpusPacketizer(maxPayloadSize: maxPayloadSize) }
    public func makeDepacketizer(reorderWindow: Int) -> OpusDepacketizer { OpusDepacketizer() }
}
