import OTBase

/// VP8 (RFC 7741): frames split by `VP8Packetizer` behind a payload descriptor with a 15-bit picture id.
public struct VP8PayloadFormat: RTPPayloadFormat {
    public init() {}
    public var name: String { "VP8" }
    public var kind: MediaKind { .video }
    public var clockRate: UInt32 { 90_000 }
    public var rtcpFeedback: [String] { ["nack", "nack pli", "ccm fir", "transport-cc"] }
    public var preferredPayloadType: UInt8 { 96 }
    public func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool {
        VP8PayloadReader.read(payload)?.0.startsKeyframe ?? false
    }
    public func frameID(_ payload: ArraySlice<UInt8>) -> UInt16? {
        (try? VP8PayloadDescriptor.parse(payload))?.0.pictureId
    }
    /// The VP8 payload header: 10 bytes of a keyframe (with its size), 3 of a delta frame (RFC 6386 §9.1).
    public func clearPrefixLength(isKeyframe: Bool) -> Int { isKeyframe ? 10 : 3 }
    /// Starts at a random picture id.
    public func makePacketizer(maxPayloadSize: Int) -> VP8Packetizer {
        VP8Packetizer(maxPayloadSize: maxPayloadSize, initialPictureId: UInt16.random(in: 0...0x7FFF))
    }
    public func makeDepacketizer(reorderWindow: Int) -> VP8Depacketizer {
        VP8Depacketizer(reorderWindow: reorderWindow, capacity: max(512, 2 * reorderWindow))
    }
}
