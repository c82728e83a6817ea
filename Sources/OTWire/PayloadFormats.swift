import OTBase

/// The payload formats libotsession knows, and queries on them for code that has only a format and bytes.
public enum PayloadFormats {
    public static let vp8 = VP8PayloadFormat()
    public static let vp9 = VP9PayloadFormat()
    public static let opus = OpusPayloadFormat()
    /// Every known format, in our order of preference per kind.
    public static let all: [any RTPPayloadFormat] = [opus, vp8, vp9]
    /// The known video formats, in our order of preference (VP8 first: every WebRTC peer has it).
    public static let video: [any RTPPayloadFormat] = all.filter { $0.kind == .video }

    /// The known format a remote codec line describes, or nil.
    public static func format(for codec: SDPCodec) -> (any RTPPayloadFormat)? {
        all.first { $0.matches(codec) }
    }

    /// The known format with this encoding name (case-insensitive), or nil.
    public static func format(named name: String) -> (any RTPPayloadFormat)? {
        let n = name.lowercased()
        return all.first { $0.name.lowercased() == n }
    }

    /// True when `payload` (an RTP payload of `format`) starts a keyframe. For routers: no allocation.
    public static func isKeyframeStart(_ format: any RTPPayloadFormat, _ payload: ArraySlice<UInt8>) -> Bool {
        format.isKeyframeStart(payload)
    }

    /// True when the plain RTP packet `packet` carries the first packet of a keyframe of `format`; false for bytes
    /// that are not RTP. Reads the header in place (no allocation).
    public static func isKeyframeStart(_ format: any RTPPayloadFormat, rtpPacket packet: [UInt8]) -> Bool {
        guard let range = RTPPacket.payloadRange(in: packet) else { return false }
        return format.isKeyframeStart(packet[range])
    }
}
