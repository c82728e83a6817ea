/// A report logged through `reportIssue`.
public struct IssueReport: Sendable, Equatable {
    public var issueId: String
    public var sessionId: String
    public var connectionId: String
    public var description: String
    public var timeMillis: Int64
}
