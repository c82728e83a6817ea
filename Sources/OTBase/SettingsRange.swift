/// The range checks of settings' `validate(naming:)` (the client's session, publisher and subscriber settings in
/// OTSession; the server's ICE policy and media router in OTServer): the one place their bounds are checked, for Swift
/// users, the C ABI and `ot-server`'s flags alike. Each names the setting as the caller's `naming` function calls it
/// (a Swift property, a C member, a command-line flag).
package enum SettingsRange {
    /// Throws `.invalidParameter` unless `value` lies in `range`.
    package static func check<T: Comparable>(_ value: T, _ range: ClosedRange<T>, _ name: String) throws {
        guard range.contains(value) else { throw OTError(.invalidParameter, "\(name) \(value) is not \(range.lowerBound)..\(range.upperBound)") }
    }

    /// Throws `.invalidParameter` unless `value` lies in `range` milliseconds.
    package static func milliseconds(_ value: Duration, _ range: ClosedRange<Int64>, _ name: String) throws {
        try duration(value, range, perSecond: 1000, unit: "ms", name)
    }

    /// Throws `.invalidParameter` unless `value` lies in `range` seconds.
    package static func seconds(_ value: Duration, _ range: ClosedRange<Int64>, _ name: String) throws {
        try duration(value, range, perSecond: 1, unit: "s", name)
    }

    /// Throws unless `value` lies in `range` units (`perSecond` of them a second), saying it in whole units.
    private static func duration(_ value: Duration, _ range: ClosedRange<Int64>, perSecond: Int64, unit: String, _ name: String) throws {
        let unitDuration = Duration.seconds(1) / Int(perSecond)
        guard !((unitDuration * range.lowerBound)...(unitDuration * range.upperBound)).contains(value) else { return }
        throw OTError(.invalidParameter, "\(name) \(wholeUnits(value, perSecond: perSecond)) \(unit) is not \(range.lowerBound)..\(range.upperBound) \(unit)")
    }

    /// A duration in whole units, without overflowing for the absurd ones.
    private static func wholeUnits(_ d: Duration, perSecond: Int64) -> String {
        let (seconds, attoseconds) = d.components
        let (units, overflow) = seconds.multipliedReportingOverflow(by: perSecond)
        let (total, overflow2) = units.addingReportingOverflow(attoseconds / (1_000_000_000_000_000_000 / perSecond))
        return overflow || overflow2 ? "\(d)" : "\(total)"
    }
}
