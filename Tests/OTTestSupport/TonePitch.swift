/// The pitch of a recorded tone judged window by window: under load, capture and playout have gaps (a moment of
/// silence or concealment), which spoil the few short windows they fall in and not the estimate of the rest, so a
/// check stays as strict about the pitch while tolerating them.
///
/// The recording is cut into windows of `windowMillis`; a window with signal energy (RMS at least `minRMS`) is
/// measured from the spacing of its first and last rising zero crossing. Silent windows are left out.
public struct TonePitch: CustomStringConvertible {
    /// The frequency (Hz) each window with signal energy reads, in order.
    public let windows: [Double]

    public init(_ samples: some Collection<Int16>, sampleRate: Int = 48_000, windowMillis: Int = 10, minRMS: Double = 2000) {
        let all = Array(samples), size = max(2, sampleRate * windowMillis / 1000)
        windows = stride(from: 0, to: all.count - size + 1, by: size).compactMap { start in
            let w = all[start..<start + size]
            let energy = w.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(size)
            guard energy >= minRMS * minRMS else { return nil }
            var crossings: [Int] = []
            for i in w.indices.dropFirst() where w[i - 1] < 0 && w[i] >= 0 { crossings.append(i) }
            guard let first = crossings.first, let last = crossings.last, last > first else { return 0 }
            return Double(sampleRate) * Double(crossings.count - 1) / Double(last - first)
        }
    }

    /// The windows that read `hz` within `tolerance`.
    public func windows(at hz: Double, tolerance: Double) -> Int { windows.filter { abs($0 - hz) <= tolerance }.count }

    /// True when the recording holds the tone `hz`: at least `minWindows` windows with signal energy, and at least
    /// `fraction` of them within `tolerance` of it. A tone of another pitch fails every window.
    public func holds(_ hz: Double, tolerance: Double, fraction: Double = 0.6, minWindows: Int = 25) -> Bool {
        windows.count >= minWindows && Double(windows(at: hz, tolerance: tolerance)) >= fraction * Double(windows.count)
    }

    public var description: String {
        "\(windows.count) windows with signal: " + windows.map { String(Int($0.rounded())) }.joined(separator: " ")
    }
}
