/// A client role, as carried by tokens.
public enum SessionRole: String, Sendable, Codable, CaseIterable {
    case subscriber, publisher, publisheronly, moderator

    public var canPublish: Bool { self != .subscriber }
    public var canSubscribe: Bool { self != .publisheronly }
    /// Whether the role may send signals (publisher and moderator only).
    public var canSignal: Bool { self == .publisher || self == .moderator }
    public var canForceMute: Bool { self == .moderator }
    public var canForceDisconnect: Bool { self == .moderator }
}
