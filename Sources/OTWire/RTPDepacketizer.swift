import OTBase

/// Counters of a depacketizer.
public struct DepacketizerStats: Equatable, Sendable {
    public var framesDelivered = 0
    public var framesDropped = 0
    public var malformedPackets = 0
    public var latePackets = 0
    public var duplicatePackets = 0
    public var keyframeRequests = 0
    /// Times every packet from the next expected on was here and still made no frame (given up like a loss).
    public var unassemblable = 0
    public init() {}
}

/// Why a depacketizer asks the sender for a keyframe (sent as RTCP PLI by the RTP session).
public enum KeyframeRequestReason: Equatable, Sendable {
    /// Packets went missing, so the frames that follow cannot be decoded.
    case packetLoss(missing: Int)
    /// The stream started (or restarted) with frames that need earlier ones.
    case noKeyframeYet
    /// Such frames are still being dropped long after the previous request.
    case stillWaiting
}

/// What a depacketizer reports for the packets fed to it.
public enum DepacketizerEvent: Sendable {
    case frame(ReceivedEncodedFrame)
    case keyframeRequest(KeyframeRequestReason)
}

/// Reassembles frames of one format from RTP packets (sans-IO; frames come in decode order).
public protocol RTPDepacketizer: Sendable {
    /// Feeds one RTP packet of the format; `deliver` receives complete frames and keyframe requests.
    mutating func insert(_ packet: RTPPacket, deliver: (DepacketizerEvent) -> Void)
    /// Whether losing the packet with `sequence` for good leaves what comes next undecodable.
    func needs(_ sequence: UInt16) -> Bool
    /// Whether frames are being dropped until a keyframe arrives.
    var isWaitingForKeyframe: Bool { get }
    /// The first (extended) sequence number missing before packets held, which the stream waits on; nil when none.
    var firstMissing: Int64? { get }
    var stats: DepacketizerStats { get }
}
