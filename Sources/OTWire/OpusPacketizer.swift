import OTBase

/// One Opus packet is one RTP payload; a frame longer than `maxPayloadSize` is not sent (returns 0).
public struct OpusPacketizer: RTPPacketizer {
    public var maxPayloadSize: Int
    private var scratch: [UInt8] = []
    public init(maxPayloadSize: Int = 1200) { self.maxPayloadSize = maxPayloadSize }
    @discardableResult
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, nonReference: Bool, layer: TemporalLayerInfo?,
                                   emit: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows -> Int {
        guard frame.count > 0, frame.count <= maxPayloadSize else { return 0 }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: frame)
        try emit(scratch[...], true)
        return 1
    }
}
