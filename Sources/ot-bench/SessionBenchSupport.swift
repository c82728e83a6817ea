import COTAllocCounter
import COTHeapUsage
import Foundation
import Glibc
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire

/// Shared pieces of the session-level benchmarks (`meeting`, `cycles`, `latency`): an embedded
/// `SessionServer` with a `MediaRouter` on loopback (as the tests run it), connected clients, and a recorder
/// that reads the test pattern's frame counter and capture time back from every rendered frame.

/// Polls `pred` every 5 ms until it holds or `seconds` pass; returns whether it holds.
@discardableResult
func waitUntil(_ seconds: Double, _ pred: () -> Bool) -> Bool {
    let deadline = monotonicSeconds() + seconds
    while !pred() {
        if monotonicSeconds() > deadline { return pred() }
        usleep(5000)
    }
    return true
}

/// The value of an `--name value` option, or `fallback`.
func option(_ args: [String], _ name: String, _ fallback: String) -> String {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return fallback }
    return args[i + 1]
}

func intOption(_ args: [String], _ name: String, _ fallback: Int) throws -> Int {
    let s = option(args, name, "\(fallback)")
    guard let v = Int(s), v > 0 else { throw BenchError("\(name) wants a positive integer, got \(s)") }
    return v
}

/// Open file descriptors, threads and resident memory (bytes) of this process, from /proc, and the bytes
/// glibc's malloc has handed out and not had back (all arenas, `mallinfo2`: in-use chunks + mmapped blocks) and
/// holds free in its arenas.
struct ProcessResources: CustomStringConvertible {
    var fds: Int, threads: Int, rssBytes: Int, heapInUse: Int, heapFree: Int
    /// Bytes in blocks allocated and not yet freed, counted exactly by COTAllocCounter (no allocator caches), less
    /// libdispatch's cached continuations (`dispatchCached`: up to 1024 per thread, until the thread ends).
    var liveBytes: Int, liveBlocks: Int, dispatchCached: Int
    static func sample() -> ProcessResources {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
        var rss = -1
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
            let f = statm.split(separator: " ")
            if f.count > 1, let pages = Int(f[1]) { rss = pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
        }
        return ProcessResources(fds: fds, threads: threads, rssBytes: rss, heapInUse: Int(ot_heap_in_use()),
                                heapFree: Int(ot_heap_free_held()),
                                liveBytes: Int(ot_alloc_live_bytes() - ot_alloc_dispatch_continuation_bytes()),
                                liveBlocks: Int(ot_alloc_live_blocks() - ot_alloc_dispatch_continuation_blocks()),
                                dispatchCached: Int(ot_alloc_dispatch_continuation_bytes()))
    }
    var description: String {
        "fds \(fds), threads \(threads), RSS \(fmt(Double(rssBytes) / 1_048_576)) MiB, heap in use \(fmt(Double(heapInUse) / 1_048_576, 2)) MiB, "
            + "free in arenas \(fmt(Double(heapFree) / 1_048_576, 2)) MiB, live \(fmt(Double(liveBytes) / 1_048_576, 3)) MiB in \(liveBlocks) blocks "
            + "+ Dispatch's continuations \(fmt(Double(dispatchCached) / 1_048_576, 3)) MiB"
    }
}

/// A session delegate that keeps what the benchmarks wait for.
final class BenchSessionDelegate: SessionDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _connected = false, _disconnected = false, _failure: OTError?
    private var _qualityEvents: [String] = []
    private var _streams: [String: StreamInfo] = [:]
    var connected: Bool { lock.withLock { _connected } }
    var disconnected: Bool { lock.withLock { _disconnected } }
    var failure: OTError? { lock.withLock { _failure } }
    /// Streams of others seen (created and not destroyed).
    var streams: [String: StreamInfo] { lock.withLock { _streams } }

    func sessionDidConnect(_ session: Session) { lock.withLock { _connected = true } }
    func sessionDidDisconnect(_ session: Session) { lock.withLock { _disconnected = true } }
    func session(_ session: Session, didFailWithError error: OTError) { lock.withLock { _failure = error } }
    func session(_ session: Session, streamCreated stream: StreamInfo) { lock.withLock { _streams[stream.id] = stream } }
    func session(_ session: Session, streamDestroyed stream: StreamInfo) { lock.withLock { _ = _streams.removeValue(forKey: stream.id) } }
}

/// Records one publisher's or one subscriber's messages and every rendered frame's stamp.
final class StreamRecorder: PublisherDelegate, SubscriberDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _frames = 0, _outOfOrder = 0, _missing = 0, _unstamped = 0
    private var lastNumber: UInt32?
    private var _latency = LatencyStats(capacity: 200_000)
    private var _samples: [Int64] = []
    private var _firstFrameAt: Double?, _lastFrameAt: Double?, _connectedAt: Double?
    private var _renderTimes: [Double] = []
    private var _connected = false, _failure: OTError?
    private var _qualityEvents: [String] = []
    private var _streamCreated = false, _streamDestroyed = false
    let name: String
    init(_ name: String) { self.name = name }

    var frames: Int { lock.withLock { _frames } }
    /// Frames whose counter did not exceed the previous frame's.
    var outOfOrder: Int { lock.withLock { _outOfOrder } }
    /// Counter values skipped between consecutive rendered frames (frames not rendered: lost, dropped or skipped).
    var missing: Int { lock.withLock { _missing } }
    var unstamped: Int { lock.withLock { _unstamped } }
    var latency: LatencyStats { lock.withLock { _latency } }
    /// Every capture-to-render latency, in microseconds.
    var latencySamples: [Int64] { lock.withLock { _samples } }
    var firstFrameAt: Double? { lock.withLock { _firstFrameAt } }
    var lastFrameAt: Double? { lock.withLock { _lastFrameAt } }
    /// `monotonicSeconds()` of every rendered frame, and of `subscriberDidConnect`.
    var renderTimes: [Double] { lock.withLock { _renderTimes } }
    var connectedAt: Double? { lock.withLock { _connectedAt } }
    /// Audio-fallback events, in order: "warning", "lifted", "disabled", "enabled".
    var qualityEvents: [String] { lock.withLock { _qualityEvents } }
    var connected: Bool { lock.withLock { _connected } }
    var failure: OTError? { lock.withLock { _failure } }
    var streamCreated: Bool { lock.withLock { _streamCreated } }
    var streamDestroyed: Bool { lock.withLock { _streamDestroyed } }

    func publisher(_ publisher: Publisher, streamCreated stream: StreamInfo) { lock.withLock { _streamCreated = true } }
    func publisher(_ publisher: Publisher, streamDestroyed stream: StreamInfo) { lock.withLock { _streamDestroyed = true } }
    func publisher(_ publisher: Publisher, didFailWithError error: OTError) { lock.withLock { _failure = error } }
    func subscriberDidConnect(toStream subscriber: Subscriber) {
        let t = monotonicSeconds()
        lock.withLock { _connected = true; _connectedAt = _connectedAt ?? t }
    }
    func subscriber(_ subscriber: Subscriber, didFailWithError error: OTError) { lock.withLock { _failure = error } }
    func subscriberVideoDisableWarning(_ subscriber: Subscriber) { lock.withLock { _qualityEvents.append("warning") } }
    func subscriberVideoDisableWarningLifted(_ subscriber: Subscriber) { lock.withLock { _qualityEvents.append("lifted") } }
    func subscriber(_ subscriber: Subscriber, videoDisabledWithReason reason: SubscriberVideoEventReason) {
        if reason == .qualityChanged { lock.withLock { _qualityEvents.append("disabled") } }
    }
    func subscriber(_ subscriber: Subscriber, videoEnabledWithReason reason: SubscriberVideoEventReason) {
        if reason == .qualityChanged { lock.withLock { _qualityEvents.append("enabled") } }
    }
    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {
        let stamp = TestPatternReader.read(frame)
        let now = MonotonicClock.now().micros
        let t = monotonicSeconds()
        lock.withLock {
            _frames += 1
            if _firstFrameAt == nil { _firstFrameAt = t }
            _lastFrameAt = t
            _renderTimes.append(t)
            guard let stamp else { _unstamped += 1; return }
            _latency.add(micros: now - stamp.timestampMicros)
            _samples.append(now - stamp.timestampMicros)
            if let last = lastNumber {
                if stamp.frameNumber <= last { _outOfOrder += 1 } else { _missing += Int(stamp.frameNumber - last - 1) }
            }
            lastNumber = max(lastNumber ?? 0, stamp.frameNumber)
        }
    }
}

/// An embedded signaling server with a media router, on 127.0.0.1.
final class BenchServer {
    let project = Project.generate()
    let server: SessionServer
    /// The server's own media router.
    let router: MediaRouter
    init() throws {
        server = SessionServer(.init(projects: [project], media: .init()))
        _ = try server.start()
        guard let r = server.mediaRouter else { throw BenchError("the server started no media router") }
        router = r
    }
    func stop() { server.stop() }

    func session(relayed: Bool) throws -> String { try server.createSession(apiKey: project.apiKey, relayed: relayed) }

    /// A connected client (its delegate is kept by the caller: the session holds it weakly).
    func connect(_ sessionId: String) throws -> (Session, BenchSessionDelegate) {
        let d = BenchSessionDelegate()
        let s = Session(apiKey: project.apiKey, sessionId: sessionId, delegate: d, settings: SessionSettings(serverURL: server.signalingURL))
        try s.connect(token: server.token(sessionId: sessionId))
        guard waitUntil(15, { d.connected || d.failure != nil }), d.failure == nil else {
            throw BenchError("client did not connect: \(d.failure.map { "\($0)" } ?? "timed out")")
        }
        return (s, d)
    }
}

/// A test-pattern publisher with a 440 Hz tone from the headless audio device.
func testPatternPublisher(_ rec: StreamRecorder, name: String, width: Int, height: Int, fps: Int, kbps: Int) throws -> Publisher {
    let device = try HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.5))
    return try Publisher(delegate: rec, settings: PublisherSettings(name: name, videoSource: .testPattern, audioDevice: device,
                                                                    width: width, height: height, fps: fps,
                                                                    startBitrateKbps: kbps, maxBitrateKbps: max(kbps, 2000)))
}

/// Publishes and waits for the publisher's own streamCreated.
func publishAndWait(_ session: Session, _ publisher: Publisher, _ rec: StreamRecorder) throws -> StreamInfo {
    try session.publish(publisher)
    guard waitUntil(15, { rec.streamCreated || rec.failure != nil }), let stream = publisher.stream else {
        throw BenchError("\(rec.name): no streamCreated (\(rec.failure.map { "\($0)" } ?? "timed out"))")
    }
    return stream
}

/// Two clients of a new session on `server`: A publishes the test pattern and a tone, B has seen the stream. Keeps the
/// delegates the sessions hold weakly; disconnect both with `close()`.
final class PublishedPair {
    let a: Session, b: Session
    let publisher: Publisher
    let stream: StreamInfo
    private let delegates: (BenchSessionDelegate, BenchSessionDelegate, StreamRecorder)

    init(_ server: BenchServer, relayed: Bool, name: String, width: Int, height: Int, fps: Int, kbps: Int) throws {
        let sid = try server.session(relayed: relayed)
        let (a, aDelegate) = try server.connect(sid)
        let (b, bDelegate) = try server.connect(sid)
        let pubRec = StreamRecorder("publisher")
        do {
            publisher = try testPatternPublisher(pubRec, name: name, width: width, height: height, fps: fps, kbps: kbps)
            let stream = try publishAndWait(a, publisher, pubRec)
            guard waitUntil(15, { bDelegate.streams[stream.id] != nil }) else { throw BenchError("the subscriber did not see the stream") }
            self.stream = stream
        } catch {
            try? a.disconnect(); try? b.disconnect()
            throw error
        }
        self.a = a; self.b = b
        delegates = (aDelegate, bDelegate, pubRec)
    }

    func close() { try? a.disconnect(); try? b.disconnect() }
}

/// `x` rounded to a whole number.
func whole(_ x: Double) -> String { "\(Int(x.rounded()))" }

func latencyLine(_ l: LatencyStats) -> String {
    guard let s = l.summary else { return "no stamped frames" }
    return "n=\(s.count) p50 \(fmt(s.p50)) ms, p95 \(fmt(s.p95)) ms, p99 \(fmt(s.p99)) ms, max \(fmt(s.max)) ms"
}
