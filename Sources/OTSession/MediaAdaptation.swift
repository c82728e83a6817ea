/// The subscriber's audio fallback: from each second's packet counts, warns when loss exceeds the threshold,
/// drops video after `windowSeconds` bad seconds in a row, lifts the warning after a good second (loss under
/// half the threshold) and restores video after `windowSeconds` good seconds.
struct VideoQualityMonitor: Sendable, Equatable {
    enum Action: Sendable, Equatable { case warn, liftWarning, disableVideo, enableVideo }

    let lossThreshold: Double
    let windowSeconds: Int
    private(set) var videoDisabled = false
    private(set) var warned = false
    private var badSeconds = 0
    private var goodSeconds = 0

    init(lossThreshold: Double, windowSeconds: Int) {
        self.lossThreshold = lossThreshold
        self.windowSeconds = max(1, windowSeconds)
    }

    /// One second's packets received and lost (either may be 0); returns what to do.
    mutating func second(received: Int, lost: Int) -> Action? {
        let lost = max(0, lost), received = max(0, received)
        guard received + lost > 0 else { return nil }
        let loss = Double(lost) / Double(received + lost)
        if loss > lossThreshold {
            badSeconds += 1; goodSeconds = 0
            if !videoDisabled && badSeconds >= windowSeconds {
                videoDisabled = true; warned = false
                return .disableVideo
            }
            if !videoDisabled && !warned { warned = true; return .warn }
        } else if loss < lossThreshold / 2 {
            goodSeconds += 1; badSeconds = 0
            if videoDisabled && goodSeconds >= windowSeconds { videoDisabled = false; return .enableVideo }
            if warned { warned = false; return .liftWarning }
        }
        return nil
    }
}
