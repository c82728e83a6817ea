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
        case deviceFailed(DeviceKind, OTErrorCode)
    }
    private let lock = NSLock()
    private var _events: [Event] = []
    private var _stamps: [TestPatternStamp] = []
    private var _frames = 0
    private var _lastSize = (width: 0, height: 0)
    private var _lastFrame: VideoFrame?
    private var _latencyMicros: [Int64] = []
    private var _audio: [Int16] = []
    private var _audioRate = 0
    private var _audioTotal = 0
    private var _firstLoudAudioMicros: Int64?
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
    /// The last decoded picture.
    var lastFrame: VideoFrame? { lock.withLock { _lastFrame } }
    /// Capture-to-render latencies of stamped frames (the test pattern's capture time and the render time are both
    /// on the monotonic clock of this process).
    var latencyMicros: [Int64] { lock.withLock { _latencyMicros } }
    var audio: (samples: [Int16], rate: Int) { lock.withLock { (_audio, _audioRate) } }
    /// When (monotonic µs) the first audio frame with a sample beyond ±4000 arrived (a tone's onset).
    var firstLoudAudioMicros: Int64? { lock.withLock { _firstLoudAudioMicros } }
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
    func publisher(_ publisher: Publisher, deviceFailed error: DeviceError) { add(.deviceFailed(error.kind, error.error.code)) }

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
            _lastFrame = frame
            if let stamp {
                _stamps.append(stamp)
                _latencyMicros.append(now - stamp.timestampMicros)
            }
        }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame) {
        let now = MonotonicClock.now().micros
        let loud = audio.samples.contains { abs(Int($0)) > 4000 }
        changed {
            if loud, _firstLoudAudioMicros == nil { _firstLoudAudioMicros = now }
            _audio.append(contentsOf: audio.samples)
            _audioTotal += audio.samples.count
            _audioRate = audio.sampleRate
            if _audio.count > 48_000 * 4 { _audio.removeFirst(_audio.count - 48_000 * 4) }
        }
    }
    func subscriber(_ subscriber: Subscriber, statsUpdated stats: SubscriberStats) { changed { _stats.append(stats) } }
}

/// The dominant frequency of mono PCM holding one clean tone, from the spacing of its rising zero crossings. Gaps
/// (playout that ran dry and played silence or concealment for a moment) give a few odd spacings; only spacings
/// within a quarter of the median one count, so a gap does not pull the estimate down.
func toneFrequency(_ samples: ArraySlice<Int16>, sampleRate: Int) -> Double {
    var crossings: [Int] = []
    var prev = samples.first ?? 0
    for (i, s) in samples.enumerated() {
        if prev < 0 && s >= 0 { crossings.append(i) }
        prev = s
    }
    let periods = zip(crossings, crossings.dropFirst()).map { $1 - $0 }
    guard periods.count > 2 else { return 0 }
    let median = periods.sorted()[periods.count / 2]
    let typical = periods.filter { abs($0 - median) * 4 <= median }
    return Double(sampleRate) * Double(typical.count) / Double(typical.reduce(0, +))
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

extension MediaRecorder {
    var publisherStreamCreated: Bool { events.contains { if case .streamCreated = $0 { true } else { false } } }
}

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

/// Publishes a `tonePublisher` (recorded by a new "publisher" recorder) from `session`; returns once the publisher
/// knows its stream and, when given, `watcher` has seen that stream created.
func publishTone(_ session: Session, seenBy watcher: Recorder? = nil, file: StaticString = #filePath, line: UInt = #line) throws
    -> (publisher: Publisher, pubRec: MediaRecorder, stream: StreamInfo) {
    let pubRec = MediaRecorder("publisher")
    let publisher = try tonePublisher(pubRec)
    try session.publish(publisher)
    pubRec.wait("streamCreated", file: file, line: line) { $0.publisherStreamCreated }
    let stream = try XCTUnwrap(publisher.stream, file: file, line: line)
    if let watcher {
        watcher.wait("stream at \(watcher.name)", file: file, line: line) { $0.contains(.streamCreated(stream)) }
    }
    return (publisher, pubRec, stream)
}

/// `session` subscribes to `stream` with a new recorder; returns once `frames` frames have arrived, with the time from
/// subscribing to the first of them.
func subscribe(_ session: Session, to stream: StreamInfo, frames: Int, name: String = "subscriber",
               file: StaticString = #filePath, line: UInt = #line) throws -> (subscriber: Subscriber, subRec: MediaRecorder, firstFrame: Duration) {
    let subRec = MediaRecorder(name)
    let subscriber = Subscriber(stream: stream, delegate: subRec)
    let subscribedAt = MonotonicClock.now()
    try session.subscribe(subscriber)
    subRec.waitForFrames(1, file: file, line: line)
    let firstFrame = MonotonicClock.now() - subscribedAt
    if frames > 1 { subRec.waitForFrames(frames - 1, file: file, line: line) }
    return (subscriber, subRec, firstFrame)
}

/// Two clients of one session: A publishes a `tonePublisher` and B has seen its stream.
struct PublishedTone {
    let a: Session, aRec: Recorder
    let b: Session, bRec: Recorder
    let publisher: Publisher, pubRec: MediaRecorder
    let stream: StreamInfo

    /// B subscribes to the stream (see `subscribe(_:to:frames:)`).
    func subscribeB(frames: Int, file: StaticString = #filePath, line: UInt = #line) throws
        -> (subscriber: Subscriber, subRec: MediaRecorder, firstFrame: Duration) {
        try subscribe(b, to: stream, frames: frames, file: file, line: line)
    }

    func disconnect() {
        try? a.disconnect()
        try? b.disconnect()
    }
}

extension TestServer {
    /// Connects "A" and "B" to session `sid` (each through its proxy when given) and publishes a tone from A.
    func publishTone(_ sid: String, aVia: TCPProxy? = nil, bVia: TCPProxy? = nil,
                     file: StaticString = #filePath, line: UInt = #line) throws -> PublishedTone {
        let (a, aRec) = try client(sid, name: "A", via: aVia, file: file, line: line)
        let (b, bRec) = try client(sid, name: "B", via: bVia, file: file, line: line)
        let (publisher, pubRec, stream) = try OTSessionTests.publishTone(a, seenBy: bRec, file: file, line: line)
        return PublishedTone(a: a, aRec: aRec, b: b, bRec: bRec, publisher: publisher, pubRec: pubRec, stream: stream)
    }

    /// One publish/subscribe cycle in session `sid`: A publishes, B subscribes until 3 frames arrive, both disconnect,
    /// and the subscriber, the publisher and both sessions report their end.
    func publishSubscribeAndDisconnect(_ sid: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let t = try publishTone(sid, file: file, line: line)
        let (_, subRec, _) = try t.subscribeB(frames: 3, file: file, line: line)
        try t.b.disconnect()
        try t.a.disconnect()
        t.pubRec.wait("streamDestroyed", file: file, line: line) {
            $0.events.contains { if case .streamDestroyed = $0 { true } else { false } }
        }
        t.aRec.waitFor(.disconnected, file: file, line: line)
        t.bRec.waitFor(.disconnected, file: file, line: line)
        // The session's end is not a subscriber event (B's messages come in one order: none came before B's end).
        XCTAssertEqual(subRec.events, [.connected], file: file, line: line)
    }

    /// After a warm-up cycle (lazily made threads and sockets of the runtime), three `publishSubscribeAndDisconnect`
    /// cycles in session `sid` leave no more file descriptors or threads than before (give or take a few) and no media
    /// peer on the server. Closing is asynchronous on the server side: waits (bounded) until the descriptors are back
    /// and `settled` holds.
    func assertCyclesReleaseSocketsAndThreads(_ sid: String, label: String, settled: () -> Bool = { true },
                                              file: StaticString = #filePath, line: UInt = #line) throws {
        try publishSubscribeAndDisconnect(sid, file: file, line: line)
        Thread.sleep(forTimeInterval: 0.5)
        let fds = openFileDescriptors(), threads = threadCount()
        for _ in 0..<3 { try publishSubscribeAndDisconnect(sid, file: file, line: line) }
        let deadline = Date().addingTimeInterval(5)
        while (openFileDescriptors() > fds + 2 || !settled()) && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        XCTAssertLessThanOrEqual(openFileDescriptors(), fds + 2, "file descriptors leaked across \(label) cycles", file: file, line: line)
        XCTAssertLessThanOrEqual(threadCount(), threads + 4, "threads leaked across \(label) cycles", file: file, line: line)
        XCTAssertEqual(server.mediaPeerCount, 0, file: file, line: line)
    }

    /// A client of a new session subscribes to its own tone stream: it connects and renders stamped frames, and
    /// unpublishing ends the subscription.
    func assertSubscribingToOwnStream(relayed: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let (a, _) = try client(try session(relayed: relayed), name: "A", file: file, line: line)
        defer { try? a.disconnect() }
        let (publisher, _, stream) = try OTSessionTests.publishTone(a, file: file, line: line)
        let (sub, subRec, _) = try subscribe(a, to: stream, frames: 10, name: "self", file: file, line: line)
        subRec.waitFor(.connected, file: file, line: line)
        XCTAssertFalse(subRec.stamps.isEmpty, file: file, line: line)
        try a.unpublish(publisher)
        // Unpublishing ends the subscription to the own stream at once (not a subscriber event).
        XCTAssertFalse(sub.isConnected, file: file, line: line)
        XCTAssertThrowsError(try a.unsubscribe(sub), file: file, line: line) {
            XCTAssertEqual(($0 as? OTError)?.code, .subscriberNotFound)
        }
    }
}

/// A test case whose every test has a fresh routed `TestServer` (media through its `MediaRouter`).
class RoutedServerTestCase: XCTestCase {
    var server: TestServer!
    var router: MediaRouter!

    override func setUpWithError() throws {
        server = try TestServer(routed: true)
        router = server.router
    }

    override func tearDown() {
        server = nil
        router = nil
    }
}
