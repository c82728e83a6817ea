import OTBase

/// The range checks of the settings' `validate()`: the one place their bounds are checked, for Swift users and the C
/// ABI alike. Each names the setting as the caller's `naming` function calls it (a Swift property, or a C member).
enum SettingsRange {
    /// Throws `.invalidParameter` unless `value` lies in `range`.
    static func check<T: Comparable>(_ value: T, _ range: ClosedRange<T>, _ name: String) throws {
        guard range.contains(value) else { throw OTError(.invalidParameter, "\(name) \(value) is not \(range.lowerBound)..\(range.upperBound)") }
    }

    /// Throws `.invalidParameter` unless `value` lies in `range` milliseconds.
    static func milliseconds(_ value: Duration, _ range: ClosedRange<Int64>, _ name: String) throws {
        guard !(Duration.milliseconds(range.lowerBound)...Duration.milliseconds(range.upperBound)).contains(value) else { return }
        throw OTError(.invalidParameter, "\(name) \(millisecondsText(value)) ms is not \(range.lowerBound)..\(range.upperBound) ms")
    }

    /// A duration in whole milliseconds, without overflowing for the absurd ones.
    private static func millisecondsText(_ d: Duration) -> String {
        let (seconds, attoseconds) = d.components
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        let (total, overflow2) = ms.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        return overflow || overflow2 ? "\(d)" : "\(total)"
    }
}
