import OTMedia
import OTTestSupport
import XCTest

/// The windowed pitch check the PulseAudio tests use (`TonePitch`): it tolerates gaps, never a wrong pitch.
final class TonePitchTests: XCTestCase {
    /// One second of `hz` at half scale, as `ToneGenerator` makes it.
    private func tone(_ hz: Double, samples: Int = 48_000) -> [Int16] {
        var generator = ToneGenerator(frequency: hz, amplitude: 0.5, settings: AudioDeviceSettings())
        var out = [Int16](repeating: 0, count: samples)
        out.withUnsafeMutableBufferPointer { generator.fill($0) }
        return out
    }

    /// What a loaded machine records: every 70 ms, 15 ms of silence (an underrun), and every 110 ms 7 ms of the tone
    /// lost (a dropped chunk: the phase jumps).
    private func withGaps(_ clean: [Int16]) -> [Int16] {
        var out: [Int16] = []
        for (i, s) in clean.enumerated() where i % 5280 >= 336 { out.append(i % 3360 < 720 ? 0 : s) }
        return out
    }

    func testAToneWithGapsHoldsItsPitchWhereTheWholeRecordingDoesNot() {
        let gappy = withGaps(tone(440))
        let pitch = TonePitch(gappy)
        XCTAssertTrue(pitch.holds(440, tolerance: 5), "\(pitch)")
        XCTAssertTrue(TonePitch(tone(440)).holds(440, tolerance: 5))
        // What the check was before: one estimate over the whole recording, pulled off by the gaps.
        XCTAssertGreaterThan(abs(zeroCrossingFrequency(gappy) - 440), 5)
    }

    func testAToneOfAnotherPitchFails() {
        for hz in [430.0, 452, 220, 880, 479] {  // 479: 440 Hz played at 48 kHz, read as 44.1 kHz
            let pitch = TonePitch(tone(hz))
            XCTAssertFalse(pitch.holds(440, tolerance: 5), "\(hz) Hz passed as 440: \(pitch)")
            XCTAssertFalse(TonePitch(withGaps(tone(hz))).holds(440, tolerance: 5), "\(hz) Hz with gaps passed as 440")
            XCTAssertTrue(pitch.holds(hz, tolerance: 5), "\(hz) Hz is not read as itself: \(pitch)")
        }
    }

    func testSilenceOrTooLittleToneFails() {
        XCTAssertFalse(TonePitch([Int16](repeating: 0, count: 48_000)).holds(440, tolerance: 5))
        XCTAssertFalse(TonePitch([Int16](repeating: 30, count: 48_000)).holds(440, tolerance: 5), "low noise is not a tone")
        XCTAssertFalse(TonePitch(tone(440, samples: 960)).holds(440, tolerance: 5), "20 ms of tone is too little to judge")
    }
}
