import Foundation
import OTBase
import Synchronization
import XCTest
@testable import OTMedia

/// Collects everything a device captures.
private final class CaptureRecorder: AudioCaptureSink {
    let samples = Mutex<[Int16]>([])
    let chunkSizes = Mutex<[Int]>([])
    let settingsSeen = Mutex<AudioDeviceSettings?>(nil)
    let onChunk: (@Sendable (Int) -> Void)?
    init(onChunk: (@Sendable (Int) -> Void)? = nil) { self.onChunk = onChunk }
    func audioCaptured(_ s: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings) {
        samples.withLock { $0.append(contentsOf: s) }
        let n = chunkSizes.withLock { $0.append(s.count); return $0.count }
        settingsSeen.withLock { $0 = settings }
        onChunk?(n)
    }
}

final class AudioDeviceTests: XCTestCase {
    func testHeadlessToneHasRequestedFrequencyLevelAndContinuity() throws {
        let settings = AudioDeviceSettings(sampleRate: 48_000, channels: 1)
        let device = try HeadlessAudioDevice(capture: .tone(frequency: 1000, amplitude: 0.5), captureSettings: settings,
                                             chunkMillis: 10, clocking: .manual)
        let rec = CaptureRecorder()
        device.setCaptureSink(rec)
        device.tick()
        XCTAssertTrue(rec.samples.withLock { $0.isEmpty }, "nothing before startCapture")
        try device.startCapture()
        for _ in 0..<100 { device.tick() }
        let s = rec.samples.withLock { $0 }
        XCTAssertEqual(s.count, 48_000, "100 chunks of 10 ms")
        XCTAssertEqual(Set(rec.chunkSizes.withLock { $0 }), [480])
        XCTAssertEqual(Int(s.map { abs(Int($0)) }.max() ?? 0), 16_384, accuracy: 10)
        let rms = sqrt(s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count))
        XCTAssertEqual(rms, 0.5 * 32767 / 2.0.squareRoot(), accuracy: 50)
        var crossings = 0
        for i in 1..<s.count where (s[i - 1] < 0) != (s[i] < 0) { crossings += 1 }
        XCTAssertEqual(crossings, 2000, accuracy: 2, "1 kHz: two zero crossings per period over 1 s")
        // No jump at chunk boundaries: the biggest step is that of the sine itself.
        let maxStep = zip(s, s.dropFirst()).map { abs(Int($0) - Int($1)) }.max() ?? 0
        XCTAssertLessThanOrEqual(Double(maxStep), 16_384 * 2 * Double.pi * 1000 / 48_000 + 2)
        device.stopCapture()
        device.tick()
        XCTAssertEqual(rec.samples.withLock { $0.count }, 48_000)
        XCTAssertEqual(device.sampleCounts.captured, 48_000)
    }

    func testHeadlessSilenceStereoTwentyMillisecondChunks() throws {
        let device = try HeadlessAudioDevice(capture: .silence, captureSettings: AudioDeviceSettings(sampleRate: 16_000, channels: 2),
                                             chunkMillis: 20, clocking: .manual)
        let rec = CaptureRecorder()
        device.setCaptureSink(rec)
        try device.startCapture()
        for _ in 0..<5 { device.tick() }
        XCTAssertEqual(rec.chunkSizes.withLock { $0 }, [640, 640, 640, 640, 640])
        XCTAssertTrue(rec.samples.withLock { $0.allSatisfy { $0 == 0 } })
        XCTAssertEqual(rec.settingsSeen.withLock { $0 }, AudioDeviceSettings(sampleRate: 16_000, channels: 2))
    }

    func testHeadlessRejectsBadSettings() {
        XCTAssertThrowsError(try HeadlessAudioDevice(chunkMillis: 15))
        XCTAssertThrowsError(try HeadlessAudioDevice(capture: .tone(frequency: 30_000, amplitude: 1)))
        XCTAssertThrowsError(try HeadlessAudioDevice(captureSettings: AudioDeviceSettings(sampleRate: 48_000, channels: 3)))
        XCTAssertThrowsError(try HeadlessAudioDevice(render: .record(maxSamples: 0)))
    }

    func testHeadlessRendersMixOfSubscribersIntoRecording() throws {
        let settings = AudioDeviceSettings(sampleRate: 8_000, channels: 1)
        let device = try HeadlessAudioDevice(render: .record(maxSamples: 200), renderSettings: settings,
                                             chunkMillis: 10, clocking: .manual)
        let mixer = AudioMixer()
        let a = PCMFIFO(capacity: 1000), b = PCMFIFO(capacity: 1000)
        mixer.setInput(a, id: 1); mixer.setInput(b, id: 2)
        device.setRenderSource(mixer)
        a.write((0..<160).map { Int16($0) })
        b.write((0..<100).map { Int16(1000 + $0) })
        try device.startRender()
        device.tick(); device.tick(); device.tick()  // 3 × 80 samples; recording keeps the last 200
        let expected = AudioMixer.mix([(0..<160).map { Int16($0) }, (0..<100).map { Int16(1000 + $0) }])
            + [Int16](repeating: 0, count: 80)
        XCTAssertEqual(device.recordedSamples(), Array(expected.suffix(200)))
        XCTAssertEqual(device.sampleCounts.rendered, 240)
    }

    func testTimerClockedDeviceDeliversChunksAndStops() throws {
        let device = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.1), chunkMillis: 10, clocking: .timer)
        let enough = expectation(description: "10 chunks")
        let rec = CaptureRecorder(onChunk: { n in if n == 10 { enough.fulfill() } })
        device.setCaptureSink(rec)
        try device.startCapture()
        wait(for: [enough], timeout: 10)
        device.stopCapture()
        XCTAssertFalse(device.isCapturing)
        let atStop = rec.chunkSizes.withLock { $0 }
        XCTAssertTrue(atStop.allSatisfy { $0 == 480 })
        let settle = expectation(description: "settle")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(60)) { settle.fulfill() }
        wait(for: [settle], timeout: 5)
        XCTAssertEqual(rec.chunkSizes.withLock { $0.count }, atStop.count, "no chunk after stopCapture returned")
    }

    func testCustomDeviceMovesSamplesOnlyWhileStarted() throws {
        let calls = Mutex<[String]>([])
        let refuseRender = Mutex(true)
        let callbacks = CustomAudioDevice.Callbacks(
            startCapture: { calls.withLock { $0.append("startCapture") }; return true },
            stopCapture: { calls.withLock { $0.append("stopCapture") }; return true },
            startRender: { calls.withLock { $0.append("startRender") }; return !refuseRender.withLock { $0 } },
            stopRender: { calls.withLock { $0.append("stopRender") }; return true })
        let settings = AudioDeviceSettings(sampleRate: 48_000, channels: 1)
        let device = try CustomAudioDevice(captureSettings: settings, renderSettings: settings, callbacks: callbacks)
        let rec = CaptureRecorder()
        device.setCaptureSink(rec)
        let pcm: [Int16] = [1, -2, 3, -4]
        XCTAssertEqual(pcm.withUnsafeBufferPointer { device.writeCaptureData($0) }, 0, "not capturing yet")
        try device.startCapture()
        try device.startCapture()  // idempotent
        XCTAssertEqual(pcm.withUnsafeBufferPointer { device.writeCaptureData($0) }, 4)
        XCTAssertEqual(rec.samples.withLock { $0 }, pcm)

        let fifo = PCMFIFO(capacity: 100)
        let mixer = AudioMixer()
        mixer.setInput(fifo, id: 7)
        device.setRenderSource(mixer)
        fifo.write([10, 20, 30])
        var out = [Int16](repeating: 99, count: 5)
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { device.readRenderData(into: $0) }, 0, "not rendering: silence")
        XCTAssertEqual(out, [0, 0, 0, 0, 0])
        XCTAssertThrowsError(try device.startRender(), "device refused")
        XCTAssertFalse(device.isRendering)
        refuseRender.withLock { $0 = false }
        try device.startRender()
        out = [Int16](repeating: 99, count: 5)
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { device.readRenderData(into: $0) }, 3)
        XCTAssertEqual(out, [10, 20, 30, 0, 0])
        device.stopCapture(); device.stopCapture(); device.stopRender()
        XCTAssertEqual(pcm.withUnsafeBufferPointer { device.writeCaptureData($0) }, 0)
        XCTAssertEqual(calls.withLock { $0 }, ["startCapture", "startRender", "startRender", "stopCapture", "stopRender"])
    }

    func testMixerSaturatesInsteadOfWrapping() {
        XCTAssertEqual(AudioMixer.mix([[30_000, -30_000, 100, 5], [30_000, -30_000, -50], [10]]),
                       [32_767, -32_768, 50, 5])
        let mixer = AudioMixer()
        let a = PCMFIFO(capacity: 10), b = PCMFIFO(capacity: 10)
        mixer.setInput(a, id: 1); mixer.setInput(b, id: 2)
        a.write([20_000, 20_000, -20_000]); b.write([20_000, -1, -20_000])
        var out = [Int16](repeating: 0, count: 4)
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { mixer.renderAudio(into: $0, settings: AudioDeviceSettings()) }, 3)
        XCTAssertEqual(out, [32_767, 19_999, -32_768, 0])
        mixer.removeInput(id: 1)
        mixer.setInput(b, id: 2)
        XCTAssertEqual(mixer.inputCount, 1)
    }

    /// With a backlog limit, a pull that finds too much waiting drops the oldest down to the target (whole frames).
    func testFIFOBacklogLimitTrimsToTheTarget() {
        let fifo = PCMFIFO(capacity: 100, backlog: (limit: 10, target: 4))
        fifo.write((1...10).map { Int16($0) })
        var out = [Int16](repeating: 0, count: 2)
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { fifo.pullAudio(into: $0, settings: AudioDeviceSettings()) }, 2)
        XCTAssertEqual(out, [1, 2], "at the limit: nothing dropped")
        fifo.write((11...14).map { Int16($0) })  // 12 waiting
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { fifo.pullAudio(into: $0, settings: AudioDeviceSettings()) }, 2)
        XCTAssertEqual(out, [11, 12], "trimmed to the newest 4, then 2 taken")
        XCTAssertEqual(fifo.count, 2)
        XCTAssertEqual(fifo.counters.dropped, 8)
        // Stereo: frames stay whole.
        let stereo = PCMFIFO(capacity: 100, backlog: (limit: 6, target: 3))
        stereo.write([1, -1, 2, -2, 3, -3, 4, -4])
        var pair = [Int16](repeating: 0, count: 2)
        _ = pair.withUnsafeMutableBufferPointer { stereo.pullAudio(into: $0, settings: AudioDeviceSettings(channels: 2)) }
        XCTAssertEqual(pair, [3, -3])
    }

    func testFIFODropsOldestWhenFullAndCountsUnderrun() {
        let fifo = PCMFIFO(capacity: 4)
        fifo.write([1, 2, 3])
        fifo.write([4, 5, 6])
        XCTAssertEqual(fifo.count, 4)
        var out = [Int16](repeating: 0, count: 6)
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { fifo.pullAudio(into: $0, settings: AudioDeviceSettings()) }, 4)
        XCTAssertEqual(Array(out.prefix(4)), [3, 4, 5, 6])
        fifo.write([7, 8, 9, 10, 11, 12])
        out = [Int16](repeating: 0, count: 4)
        _ = out.withUnsafeMutableBufferPointer { fifo.pullAudio(into: $0, settings: AudioDeviceSettings()) }
        XCTAssertEqual(out, [9, 10, 11, 12])
        XCTAssertEqual(fifo.counters.dropped, 2 + 2)
        XCTAssertEqual(fifo.counters.underrun, 2)
    }

    func testChunkerRegroupsArbitraryWritesIntoFixedChunks() {
        var chunker = PCMChunker(chunkSamples: 960)
        var chunks: [[Int16]] = []
        var rng = SeededRandom(seed: 11)
        var written: [Int16] = []
        var next: Int16 = 0
        for _ in 0..<200 {
            let n = Int.random(in: 0...2000, using: &rng)
            let block = (0..<n).map { _ -> Int16 in next &+= 1; return next }
            written += block
            block.withUnsafeBufferPointer { chunker.append($0) { chunks.append(Array($0)) } }
        }
        XCTAssertTrue(chunks.allSatisfy { $0.count == 960 })
        XCTAssertEqual(chunks.count, written.count / 960)
        XCTAssertEqual(chunker.pendingCount, written.count % 960)
        XCTAssertEqual(chunks.flatMap { $0 }, Array(written.prefix(chunks.count * 960)))
        chunker.reset()
        XCTAssertEqual(chunker.pendingCount, 0)
    }
}
