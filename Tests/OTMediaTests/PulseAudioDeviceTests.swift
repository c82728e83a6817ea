import Foundation
import OTBase
import OTTestSupport
import Synchronization
import XCTest
@testable import OTMedia

/// A render source playing a sine and counting how often it was asked.
private final class ToneSource: AudioRenderSource, @unchecked Sendable {
    private let lock = NSLock()
    private var tone: ToneGenerator
    private var _pulls = 0
    init(_ frequency: Double) { tone = ToneGenerator(frequency: frequency, amplitude: 0.5, settings: AudioDeviceSettings()) }
    var pulls: Int { lock.withLock { _pulls } }
    func renderAudio(into buffer: UnsafeMutableBufferPointer<Int16>, settings: AudioDeviceSettings) -> Int {
        lock.withLock { _pulls += 1; tone.fill(buffer) }
        return buffer.count
    }
}

/// Waits (up to `seconds`, generous for a loaded machine) until `condition` holds.
private func eventually(_ what: String, seconds: Double = 15, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() && Date() < deadline { usleep(20_000) }
    XCTAssertTrue(condition(), "timed out waiting for \(what)", file: file, line: line)
}

/// `PulseAudioDevice` against a private PulseAudio daemon with null sinks.
final class PulseAudioDeviceTests: XCTestCase {
    func testEnumerationListsSinksAndSourcesWithDescriptions() throws {
        let pulse = try PulseAudioServer(sinks: ["alpha", "beta"])
        let sinks = try PulseAudioDevice.sinks(server: pulse.server)
        XCTAssertEqual(sinks.map(\.name), ["alpha", "beta"])
        XCTAssertTrue(sinks.allSatisfy { !$0.description.isEmpty && !$0.isMonitor })
        XCTAssertEqual(sinks.filter(\.isDefault).count, 1)
        try pulse.pactl(["set-default-sink", "beta"])
        XCTAssertEqual(try PulseAudioDevice.sinks(server: pulse.server).first(where: \.isDefault)?.name, "beta")
        let sources = try PulseAudioDevice.sources(server: pulse.server)
        XCTAssertEqual(Set(sources.map(\.name)), ["alpha.monitor", "beta.monitor"])
        XCTAssertTrue(sources.allSatisfy(\.isMonitor))
        XCTAssertTrue(PulseAudioDevice.isServerReachable(server: pulse.server))
    }

    /// Without a sound server the device reports `deviceUnavailable` and captures silence on the headless device.
    func testNoSoundServerFallsBackToHeadless() throws {
        let missing = "unix:/nonexistent-\(UInt32.random(in: 0 ... .max))/native"
        XCTAssertFalse(PulseAudioDevice.isServerReachable(server: missing))
        XCTAssertThrowsError(try PulseAudioDevice.sources(server: missing)) { XCTAssertEqual(($0 as? OTError)?.code, .deviceUnavailable) }
        let device = try PulseAudioDevice(server: missing, source: "mic")
        let errors = Mutex<[DeviceError]>([])
        let observation = device.observeErrors { e in errors.withLock { $0.append(e) } }
        let rec = TimedAudioRecorder()
        device.setCaptureSink(rec)
        try device.startCapture()
        XCTAssertTrue(device.isCapturing)
        XCTAssertTrue(device.usingFallback.capture)
        eventually("the error event") { !errors.withLock { $0 }.isEmpty }
        let e = try XCTUnwrap(errors.withLock { $0.first })
        XCTAssertEqual(e.kind, .microphone); XCTAssertEqual(e.device, "mic"); XCTAssertEqual(e.error.code, .deviceUnavailable)
        eventually("silence from the headless stand-in") { rec.chunkCount >= 20 }
        XCTAssertTrue(rec.samples.allSatisfy { $0 == 0 })
        device.stopCapture()
        XCTAssertFalse(device.isCapturing)
        let n = rec.chunkCount
        usleep(100_000)
        XCTAssertEqual(rec.chunkCount, n, "nothing is captured after stopCapture")
        observation.cancel()
    }

    /// A server without the named source: `deviceUnavailable`, then silence from the headless stand-in; the next start
    /// tries the server again (and succeeds once the source exists).
    func testMissingNamedSourceFallsBackAndIsRetriedOnTheNextStart() throws {
        let pulse = try PulseAudioServer(sinks: ["alpha"])
        let device = try PulseAudioDevice(server: pulse.server, source: "later.monitor")
        let errors = Mutex<[DeviceError]>([])
        let observation = device.observeErrors { e in errors.withLock { $0.append(e) } }
        defer { observation.cancel() }
        let rec = TimedAudioRecorder()
        device.setCaptureSink(rec)
        try device.startCapture()
        eventually("the error event") { !errors.withLock { $0 }.isEmpty }
        XCTAssertEqual(errors.withLock { $0.first?.error.code }, .deviceUnavailable)
        XCTAssertTrue(device.usingFallback.capture)
        eventually("silence") { rec.chunkCount >= 10 }
        device.stopCapture()
        try pulse.pactl(["load-module", "module-null-sink", "sink_name=later", "rate=48000", "channels=1"])
        try device.startCapture()
        XCTAssertFalse(device.usingFallback.capture, "the source exists now")
        XCTAssertEqual(errors.withLock { $0.count }, 1)
        device.stopCapture()
    }

    /// A tone played to one sink comes back from its monitor: both directions, through the server.
    func testPlayoutAndCaptureThroughANullSink() throws {
        let pulse = try PulseAudioServer(sinks: ["alpha"])
        let speaker = try PulseAudioDevice(server: pulse.server, sink: "alpha")
        let microphone = try PulseAudioDevice(server: pulse.server, source: "alpha.monitor")
        let tone = ToneSource(440)
        speaker.setRenderSource(tone)
        let rec = TimedAudioRecorder()
        microphone.setCaptureSink(rec)
        try microphone.startCapture()
        try speaker.startRender()
        defer { speaker.stopRender(); microphone.stopCapture() }
        XCTAssertEqual(speaker.usingFallback.render, false)
        XCTAssertEqual(microphone.usingFallback.capture, false)
        eventually("1 s of captured audio") { rec.samples.count >= 48_000 }
        let tail = rec.samples.suffix(24_000)
        let pitch = TonePitch(tail)
        XCTAssertTrue(pitch.holds(440, tolerance: 5), "not a 440 Hz tone: \(pitch)")
        XCTAssertGreaterThan(tail.map { abs(Int($0)) }.max() ?? 0, 8000, "the tone is loud, not noise")
    }

    /// With no sink named, playout follows the system default when it changes.
    func testDefaultSinkFollowsTheSystemDefault() throws {
        let pulse = try PulseAudioServer(sinks: ["alpha", "beta"])
        try pulse.pactl(["set-default-sink", "alpha"])
        let speaker = try PulseAudioDevice(server: pulse.server)
        speaker.setRenderSource(ToneSource(300))
        try speaker.startRender()
        defer { speaker.stopRender() }
        func sinkOfOurStream() -> String? {
            // "index  sink  client  driver  spec": the sink's index; map it to its name.
            let inputs = (try? pulse.pactl(["list", "short", "sink-inputs"])) ?? ""
            let sinks = (try? pulse.pactl(["list", "short", "sinks"])) ?? ""
            guard let sinkIndex = inputs.split(separator: "\n").first?.split(separator: "\t").dropFirst().first else { return nil }
            return sinks.split(separator: "\n").first { $0.split(separator: "\t").first == sinkIndex }.map { String($0.split(separator: "\t")[1]) }
        }
        eventually("the stream on alpha") { sinkOfOurStream() == "alpha" }
        try pulse.pactl(["set-default-sink", "beta"])
        eventually("the stream moved to beta") { sinkOfOurStream() == "beta" }
        XCTAssertFalse(speaker.usingFallback.render)
    }

    /// A named sink that disappears: `deviceLost`, and playout goes on (discarded) on the headless device.
    func testLostSinkReportsAndFallsBack() throws {
        let pulse = try PulseAudioServer(sinks: ["alpha", "beta"])
        let speaker = try PulseAudioDevice(server: pulse.server, sink: "beta")
        let errors = Mutex<[DeviceError]>([])
        let observation = speaker.observeErrors { e in errors.withLock { $0.append(e) } }
        defer { observation.cancel() }
        let tone = ToneSource(300)
        speaker.setRenderSource(tone)
        try speaker.startRender()
        defer { speaker.stopRender() }
        eventually("playout") { tone.pulls >= 5 }
        XCTAssertFalse(speaker.usingFallback.render)
        try pulse.unplug(sink: "beta")
        eventually("the loss event") { !errors.withLock { $0 }.isEmpty }
        let e = try XCTUnwrap(errors.withLock { $0.first })
        XCTAssertEqual(e.kind, .speaker); XCTAssertEqual(e.device, "beta"); XCTAssertEqual(e.error.code, .deviceLost)
        XCTAssertTrue(speaker.isRendering)
        XCTAssertTrue(speaker.usingFallback.render)
        let pulls = tone.pulls
        eventually("the mix still pulled, now by the headless device") { tone.pulls >= pulls + 20 }
    }
}
