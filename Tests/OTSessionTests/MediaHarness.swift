import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// Records a publisher's and a subscriber's delegate messages, decoded frame stamps and received audio.
final class MediaRecorder: PublisherDelegate, SubscriberDelegate, @unchecked Sendable {
    enum Event: Equatable {
        case streamCreated(String), streamDestroyed(String), publisherFailed(Int32)
        case connected, disconnected, reconnected, failed(Int32)
        case videoDisabled(SubscriberVideoEventReason), videoEnabled(SubscriberVideoEventReason)
        case warning, warningLifted
        case muteForced
    }
    private let lock = NSLock()
    private var _events: [Event] = []
    private var _stamps: [TestPatternStamp] = []
    private var _frames = 0
    private var _lastSize = (width: 0, height: 0)
    private var _latencyMicros: [Int64] = []
    private var _audio: [Int16] = []
    private var _audioRate = 0
    private var _audioTotal = 0
    private var _stats: [SubscriberStats] = []
    private var _pubStats: [PublisherStats] = []
    private var _failureMessages: [String] = []
    let cond = NSCondition()
    let name: String
    init(_ name: String = "") { self.name = name }

    var events: [Event] { lock.withLock { _events } }
    var stamps: [TestPatternStamp] { lock.withLock { _stamps } }
    var frames: Int { lock.withLock { _frames } }
    var lastFrameSize: (width: Int, height: Int) { lock.withLock { _lastSize } }
    /// Capture-to-render latencies of stamped frames (the test pattern's capture time and the render time are both
    /// on the monotonic clock of this process).
    var latencyMicros: [Int64] { lock.withLock { _latencyMicros } }
    var audio: (samples: [Int16], rate: Int) { lock.withLock { (_audio, _audioRate) } }
    /// Samples received in all (the kept `audio` is the last 4 s).
    var audioTotal: Int { lock.withLock { _audioTotal } }
    var publisherStats: [PublisherStats] { lock.withLock { _pubStats } }
    /// The messages of the subscriber's failures.
    var failureMessages: [String] { lock.withLock { _failureMessages } }

    private func changed(_ body: () -> Void) {
        lock.withLock(body)
        cond.lock(); cond.broadcast(); cond.unlock()
    }
    private func add(_ e: Event) { changed { _events.append(e) } }

    /// Waits (up to 15 s: a generous bound on a loaded machine) until `pred` holds.
    @discardableResult
    func wait(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ pred: (MediaRecorder) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(15)
        cond.lock(); defer { cond.unlock() }
        while !pred(self) {
            if !cond.wait(until: deadline) { break }
        }
        let ok = pred(self)
        XCTAssertTrue(ok, "\(name): timed out waiting for \(what); events: \(events), frames: \(frames)", file: file, line: line)
        return ok
    }
    func waitFor(_ e: Event, file: StaticString = #filePath, line: UInt = #line) {
        wait("\(e)", file: file, line: line) { $0.events.contains(e) }
    }
    /// Waits until `n` more frames than now have arrived.
    func waitForFrames(_ n: Int, file: StaticString = #filePath, line: UInt = #line) {
        let start = frames
        wait("\(n) more frames", file: file, line: line) { $0.frames >= start + n }
    }

    func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) { add(.streamCreated(stream.id)) }
    func publisher(_ publisher: Publisher, streamDestroyed stream: StreamInfo) { add(.streamDestroyed(stream.id)) }
    func publisher(_ publisher: Publisher, didFailWithError error: OTError) { add(.publisherFailed(error.code.rawValue)) }
    func publisher(_ publisher: Publisher, statsUpdated stats: PublisherStats) { changed { _pubStats.append(stats) } }

    func publisher(_ publisher: Publisher, muteForced active: Bool) { add(.muteForced) }

    func subscriberDidConnect(toStream subscriber: Subscriber) { add(.connected) }
    func subscriberDidDisconnect(fromStream subscriber: Subscriber) { add(.disconnected) }
    func subscriberDidReconnect(toStream subscriber: Subscriber) { add(.reconnected) }
    func subscriber(_ subscriber: Subscriber, didFailWithError error: OTError) {
        changed { _failureMessages.append(error.message); _events.append(.failed(error.code.rawValue)) }
    }
    func subscriber(_ subscriber: Subscriber, videoDisabledWithReason reason: SubscriberVideoEventReason) { add(.videoDisabled(reason)) }
    func subscriber(_ subscriber: Subscriber, videoEnabledWithReason reason: SubscriberVideoEventReason) { add(.videoEnabled(reason)) }
    func subscriberVideoDisableWarning(_ subscriber: Subscriber) { add(.warning) }
    func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber) { add(.warningLifted) }
    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {
        let stamp = TestPatternReader.read(frame)
        let now = MonotonicClock.now().micros
        changed {
            _frames += 1
            _lastSize = (frame.width, frame.height)
            if let stamp {
                _stamps.append(stamp)
                _latencyMicros.append(now - stamp.timestampMicros)
            }
        }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame) {
        changed {
            _audio.append(contentsOf: audio.samples)
            _audioTotal += audio.samples.count
            _audioRate = audio.sampleRate
            if _audio.count > 48_000 * 4 { _audio.removeFirst(_audio.count - 48_000 * 4) }
        }
    }
    func subscriber(_ subscriber: Subscriber, statsUpdated stats: SubscriberStats) { changed { _stats.append(stats) } }
}

/// The dominant frequency of mono PCM, from its rising zero crossings (good enough for one clean tone).
func toneFrequency(_ samples: ArraySlice<Int16>, sampleRate: Int) -> Double {
    var crossings: [Int] = []
    var prev = samples.first ?? 0
    for (i, s) in samples.enumerated() {
        if prev < 0 && s >= 0 { crossings.append(i) }
        prev = s
    }
    guard let first = crossings.first, let last = crossings.last, crossings.count > 2 else { return 0 }
    return Double(crossings.count - 1) * Double(sampleRate) / Double(last - first)
}

/// A flag set once, read from another thread.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// Open file descriptors and threads of this process.
func openFileDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
func threadCount() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1 }

/// A small test-pattern publisher with a 440 Hz tone.
func tonePublisher(_ rec: MediaRecorder, name: String = "cam") throws -> Publisher {
    let device = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.5))
    return try Publisher(delegate: rec, settings: PublisherSettings(name: name, videoSource: .testPattern, audioDevice: device,
                                                                    width: 320, height: 240, fps: 15, startBitrateKbps: 300))
}

/// Prints what a run measured (not asserted: timings depend on the machine's load).
func report(label: String, _ rec: MediaRecorder, firstFrame: Duration) {
    var lat = LatencyStats()
    for l in rec.latencyMicros { lat.add(micros: l) }
    guard let s = lat.summary else { return }
    print(String(format: "[figures] %@: subscribe to first frame %.0f ms; capture-to-render latency n=%d p50 %.1f ms p95 %.1f ms max %.1f ms",
                 label, Double(firstFrame.microseconds) / 1000, s.count, s.p50, s.p95, s.max))
}
