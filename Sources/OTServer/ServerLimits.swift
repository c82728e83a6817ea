/// Limits and timings of the signaling router (docs/protocol.md, "Limits").
public struct ServerLimits: Sendable {
    /// Connections one session admits (OpenTok code 1027 beyond). OpenTok's hosted service allows 15,000 on a
    /// cluster; one small server is safer with fewer.
    public var maxConnectionsPerSession = 2_000
    /// Connections made with one token at once (1027 beyond; 0: no cap). Tokens can be reused, a leaked one
    /// should not fill a session.
    public var maxConnectionsPerToken = 100
    /// Streams one connection may publish at once (1605 beyond).
    public var maxStreamsPerConnection = 8
    /// Streams one session may hold at once (1605 beyond).
    public var maxStreamsPerSession = 250
    /// Longest stream name, in UTF-8 bytes (1011 beyond).
    public var maxStreamNameBytes = 1000
    /// Largest stream width or height a client may announce (1011 beyond).
    public var maxVideoDimension = 16_384
    /// Sustained signals per second one connection may send.
    public var signalsPerSecond: Double = 200
    /// Signals a connection may send in a burst.
    public var signalBurst: Double = 400
    /// How long a dropped socket's connection stays resumable.
    public var reconnectGrace: Duration = .seconds(10)
    /// Messages kept for a dropped connection during the grace period.
    public var maxQueuedWhileDropped = 1000
    /// Bytes of messages (JSON) kept for a dropped connection during the grace period.
    public var maxQueuedBytesWhileDropped = 1 << 20
    /// Peer connections one connection may have offered at once (OpenTok code 1605 beyond).
    public var maxMediaPeersPerConnection = 64
    /// Reports kept from `reportIssue` (the oldest go first).
    public var maxIssueReports = 1000
    /// Longest issue description kept, in UTF-8 bytes (the rest is cut).
    public var maxIssueDescriptionBytes = 10_000
    public init() {}
}
