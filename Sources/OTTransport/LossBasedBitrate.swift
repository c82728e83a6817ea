/// The loss-based part of Google Congestion Control (draft-ietf-rmcat-gcc-02 §6) for one receiver:
/// above 10% loss the target drops by half the loss fraction, below 2% it grows 8%, in between it holds.
public struct LossBasedBitrate: Sendable, Equatable {
    public let minKbps: Int
    public let maxKbps: Int
    public private(set) var targetKbps: Int

    public init(minKbps: Int, startKbps: Int, maxKbps: Int) {
        self.minKbps = minKbps; self.maxKbps = maxKbps
        targetKbps = min(max(startKbps, minKbps), maxKbps)
    }

    /// A receiver report's loss fraction (0…1); returns the new target.
    @discardableResult
    public mutating func report(fractionLost loss: Double) -> Int {
        if loss > 0.10 {
            targetKbps = max(minKbps, Int(Double(targetKbps) * (1 - 0.5 * loss)))
        } else if loss < 0.02 {
            targetKbps = min(maxKbps, Int(Double(targetKbps) * 1.08) + 1)
        }
        return targetKbps
    }

    /// Holds the target at or under `kbps` (never under the minimum): the send-side estimator keeps the loss-based
    /// state from running ahead of the delay-based one, so a loss cut starts from what is actually sent.
    public mutating func cap(atMostKbps kbps: Int) {
        targetKbps = max(minKbps, min(targetKbps, kbps))
    }
}
