import OTBase

/// Each well-formed Opus payload is a frame of its own; malformed ones (bad TOC framing) are dropped.
public struct OpusDepacketizer: RTPDepacketizer {
    private var unwrapper = RTPSequenceTracker()
    public private(set) var stats = DepacketizerStats()
    public init() {}
    public mutating func insert(_ packet: RTPPacket, deliver: (DepacketizerEvent) -> Void) {
        guard (try? OpusPayload.packetInfo(packet.payload)) != nil else { stats.malformedPackets += 1; return }
        if unwrapper.record(packet.sequenceNumber) == .duplicate { stats.duplicatePackets += 1; return }
        let seq = unwrapper.extend(packet.sequenceNumber)
        stats.framesDelivered += 1
        deliver(.frame(ReceivedEncodedFrame(data: packet.payload, rtpTimestamp: packet.timestamp, isKeyframe: true,
                                            firstSequence: seq, lastSequence: seq)))
    }
    /// Audio frames are independent: no loss leaves later ones undecodable.
    public func needs(_ sequence: UInt16) -> Bool { false }
    public var isWaitingForKeyframe: Bool { false }
    public var firstMissing: Int64? { nil }
}
