import Foundation
import OTBase
@testable import OTMedia
import OTTransport
import OTWire
import Synchronization
import XCTest

/// A peer connection on loopback with the media pipelines: sends the test pattern and a tone, decodes what
/// arrives. Pipelines run on the test thread (`tick`); the connection's IO thread only queues packets.
final class MediaPeer: @unchecked Sendable {
    static let width = 320, height = 240
    let driver: PeerConnectionDriver
    let audioSSRC: UInt32, videoSSRC: UInt32
    private let inbox = Mutex<[([UInt8], Instant)]>([])
    private let keyframeWanted = Mutex(false)
    private let connectedAt = Mutex<Instant?>(nil)
    let videoSender: VideoSendPipeline
    let audioSender: AudioSendPipeline
    let videoReceiver: VideoReceivePipeline
    let audioReceiver: AudioReceivePipeline
    let pattern: TestPatternSource
    var frameNumber: UInt32 = 0
    var audioSample = 0
    var stamps: [TestPatternStamp] = []
    var undecodableFrames = 0
    var firstFrameAt: Instant?
    var pcm: [Int16] = []
    private var nextAudioPull: Instant?

    init(seed: UInt32, sendVideo: Bool = true, sendAudio: Bool = true) throws {
        audioSSRC = 0x1000_0000 + seed
        videoSSRC = 0x2000_0000 + seed
        let config = PeerConnectionConfig(audioTrack: sendAudio ? SDPLocalTrack(ssrc: audioSSRC, streamID: "ms\(seed)", trackID: "a\(seed)", cname: "ot\(seed)") : nil,
                                          videoTrack: sendVideo ? SDPLocalTrack(ssrc: videoSSRC, streamID: "ms\(seed)", trackID: "v\(seed)", cname: "ot\(seed)") : nil)
        let box = WeakMediaPeer()
        driver = try PeerConnectionDriver(config: config) { e in box.peer?.handle(e) }
        // The offer's extmap ids: 1 = mid.
        videoSender = try VideoSendPipeline(config: VideoSendConfig(ssrc: videoSSRC, encoder: VP8EncoderConfig(width: Self.width, height: Self.height, bitrateKbps: 600),
                                                                    extensionIds: RTPHeaderExtensionIds(mid: 1), mid: "1"))
        audioSender = try AudioSendPipeline(config: AudioSendConfig(ssrc: audioSSRC, extensionIds: RTPHeaderExtensionIds(mid: 1), mid: "0"))
        videoReceiver = try VideoReceivePipeline()
        audioReceiver = try AudioReceivePipeline()
        pattern = try TestPatternSource(width: Self.width, height: Self.height)
        box.peer = self
    }

    private func handle(_ e: PeerConnectionEvent) {
        switch e {
        case .rtp(let b): inbox.withLock { $0.append((b, MonotonicClock.now())) }
        case .keyframeRequested: keyframeWanted.withLock { $0 = true }
        case .connected: connectedAt.withLock { $0 = MonotonicClock.now() }
        default: break
        }
    }

    var isConnected: Bool { connectedAt.withLock { $0 != nil } }

    /// Sends one video frame of the pattern (frame numbers count up).
    func sendVideoFrame(now: Instant) throws {
        if keyframeWanted.withLock({ v in defer { v = false }; return v }) { videoSender.requestKeyframe() }
        let f = pattern.render(frameNumber: frameNumber, timestampMicros: now.micros)
        frameNumber += 1
        try videoSender.send(f, now: now) { p in driver.sendRTP(&p) }
    }

    /// Sends `ms` of a 440 Hz tone.
    func sendAudio(ms: Int, now: Instant) throws {
        let n = 48 * ms
        let pcm = (0..<n).map { Int16(8000 * sin(2 * Double.pi * 440 * Double(audioSample + $0) / 48_000)) }
        audioSample += n
        try audioSender.send(pcm, settings: AudioDeviceSettings(), now: now) { p in driver.sendRTP(&p) }
    }

    /// Feeds what arrived into the receive pipelines and runs their timers; plays out audio every 20 ms.
    func receive(now: Instant) throws {
        let packets = inbox.withLock { p in defer { p.removeAll() }; return p }
        var events: [VideoReceiveEvent] = []
        for (bytes, at) in packets {
            let packet = try RTPPacket(parsing: bytes)
            switch packet.payloadType {
            case 96: events += videoReceiver.receive(packet, now: at)
            case 111: _ = audioReceiver.receive(packet, now: at)
            default: break  // RTX
            }
        }
        events += videoReceiver.poll(now: now)
        for e in events {
            switch e {
            case .frame(let f):
                if firstFrameAt == nil { firstFrameAt = now }
                if let s = TestPatternReader.read(f.frame) { stamps.append(s) } else { undecodableFrames += 1 }
            case .requestKeyframe:
                if let remote = driver.negotiated?.media.first(where: { $0.kind == "video" })?.remoteSSRCs.first { driver.requestKeyframe(ssrc: remote) }
            case .nack(let seqs):
                if let remote = driver.negotiated?.media.first(where: { $0.kind == "video" })?.remoteSSRCs.first {
                    driver.sendRTCP(RTCP.serialize([.nack(senderSSRC: videoSSRC, mediaSSRC: remote, lost: seqs)]))
                }
            }
        }
        var at = nextAudioPull ?? now
        while at <= now {
            var chunk: [Int16] = []
            audioReceiver.pull(now: at, into: &chunk)
            pcm += chunk
            at = at + .milliseconds(20)
        }
        nextAudioPull = at
    }

    /// Runs sending and receiving on the test thread for `seconds`, paced in 10 ms ticks.
    func run(seconds: Double, sendVideo: Bool = true, sendAudio: Bool = true, until done: () -> Bool = { false }) throws {
        let start = MonotonicClock.now()
        var tick = 0
        while MonotonicClock.now() - start < .microseconds(Int64(seconds * 1_000_000)) {
            let now = MonotonicClock.now()
            if sendAudio && tick % 2 == 0 { try self.sendAudio(ms: 20, now: now) }
            if sendVideo && tick % 3 == 0 { try sendVideoFrame(now: now) }
            try receive(now: now)
            if done() { return }
            tick += 1
            usleep(10_000)
        }
    }
}

/// The connection handler's weak reference to its peer (no retain cycle through the driver).
final class WeakMediaPeer: @unchecked Sendable {
    private let lock = NSLock()
    private weak var value: MediaPeer?
    var peer: MediaPeer? {
        get { lock.lock(); defer { lock.unlock() }; return value }
        set { lock.lock(); value = newValue; lock.unlock() }
    }
}

/// Reads JSON lines from a child's stdout.
final class JSONLines: @unchecked Sendable {
    let lines = Mutex<[String]>([])
    private var partial = ""
    init(_ handle: FileHandle) {
        handle.readabilityHandler = { [self] h in
            let data = h.availableData
            if data.isEmpty { h.readabilityHandler = nil; return }
            partial += String(decoding: data, as: UTF8.self)
            while let nl = partial.firstIndex(of: "\n") {
                lines.withLock { $0.append(String(partial[..<nl])) }
                partial = String(partial[partial.index(after: nl)...])
            }
        }
    }
    func wait(for key: String, _ value: String, seconds: Double = 30) -> [String: Any]? {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            for l in lines.withLock({ $0 }) {
                if let o = try? JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any], o[key] as? String == value { return o }
            }
            usleep(5000)
        }
        return nil
    }
}

/// libotsession's PeerConnection against aiortc (PyPI) on 127.0.0.1, negotiated through SDP: Opus and VP8 both ways.
final class PeerConnectionAiortcTests: XCTestCase {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/aiortc_echo.py")

    func launch(_ args: [String]) throws -> (Process, Pipe, JSONLines, Pipe) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", Self.script.path] + args
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        p.standardInput = stdin; p.standardOutput = stdout; p.standardError = stderr
        try p.run()
        return (p, stdin, JSONLines(stdout.fileHandleForReading), stderr)
    }

    func testOpusAndVP8BothWaysWithAiortcDecodedByContent() throws {
        let (proc, stdin, out, stderr) = try launch(["5"])
        defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }
        let peer = try MediaPeer(seed: 1)
        defer { peer.driver.close() }
        let offer = try peer.driver.createOffer()
        stdin.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["type": "offer", "sdp": offer]) + Data("\n".utf8))
        guard let answer = out.wait(for: "type", "answer")?["sdp"] as? String else {
            let err = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            if err.contains("ModuleNotFoundError") { throw XCTSkip("aiortc not installed: \(err)") }
            return XCTFail("no answer from aiortc: \(err)")
        }
        try peer.driver.setRemoteAnswer(answer)
        let neg = try XCTUnwrap(peer.driver.negotiated)
        XCTAssertEqual(neg.media.map(\.kind), ["audio", "video"])
        XCTAssertEqual(neg.media.map { $0.codec.name.lowercased() }, ["opus", "vp8"])
        XCTAssertTrue(LoopbackPeerWait.wait(seconds: 20) { peer.isConnected }, "connected to aiortc")

        try peer.run(seconds: 4)
        let stats = try XCTUnwrap(out.wait(for: "event", "stats", seconds: 20), "aiortc's report")

        // aiortc decoded our frames (its echo is a re-encode of what it decoded) and our tone.
        XCTAssertGreaterThan(stats["videoFrames"] as? Int ?? 0, 30, "VP8 frames aiortc decoded")
        XCTAssertEqual(stats["width"] as? Int, MediaPeer.width)
        XCTAssertEqual(stats["height"] as? Int, MediaPeer.height)
        XCTAssertEqual(stats["audioHz"] as? Double ?? 0, 440, accuracy: 10, "the tone aiortc decoded from our Opus")

        // We decoded aiortc's VP8 and read our own frame counters back through both codecs.
        let numbers = peer.stamps.map(\.frameNumber)
        XCTAssertGreaterThan(numbers.count, 30, "frames decoded from aiortc (unreadable: \(peer.undecodableFrames))")
        XCTAssertTrue(numbers.allSatisfy { $0 < peer.frameNumber }, "every counter is one we sent")
        XCTAssertEqual(numbers, numbers.sorted(), "in order")
        XCTAssertGreaterThan(Set(numbers).count, 30, "distinct frames, not a frozen picture")
        // And aiortc's Opus: the tone at 440 Hz in the last second we played out.
        let tail = Array(peer.pcm.suffix(48_000))
        XCTAssertEqual(tail.count, 48_000)
        let peak = stride(from: 100.0, through: 2000.0, by: 5.0).max { goertzel(tail, frequency: $0) < goertzel(tail, frequency: $1) } ?? 0
        XCTAssertEqual(peak, 440, accuracy: 10, "the tone decoded from aiortc's Opus (spectral peak)")
        XCTAssertGreaterThan(peer.audioReceiver.stats.totalSamplesReceived, 48_000 * 2, "seconds of audio decoded")
        print("AIORTC_MEDIA aiortc decoded \(stats["videoFrames"] ?? 0) video frames, audio \(stats["audioHz"] ?? 0) Hz; we decoded \(numbers.count) stamped frames (\(peer.undecodableFrames) unstamped), tone peak \(peak) Hz, audio \(peer.audioReceiver.stats); our stats \(peer.driver.stats)")
    }

    /// Connection setup on loopback, offer created -> first decoded video frame: two of our peers, then two
    /// aiortc peers (`aiortc_echo.py pair`), in one run. Prints the figures; asserts only that both complete.
    func testSetupTimeOursVersusAiortc() throws {
        var ours: [Double] = []
        for i in 0..<3 {
            let a = try MediaPeer(seed: 10 + UInt32(i), sendVideo: true, sendAudio: false)
            let b = try MediaPeer(seed: 20 + UInt32(i), sendVideo: false, sendAudio: false)
            defer { a.driver.close(); b.driver.close() }
            let start = MonotonicClock.now()
            try a.driver.setRemoteAnswer(try b.driver.createAnswer(toOffer: try a.driver.createOffer()))
            // The sender starts its camera when connected, as a publisher does.
            XCTAssertTrue(LoopbackPeerWait.wait(seconds: 10) { a.isConnected })
            let end = MonotonicClock.now() + .seconds(10)
            while b.firstFrameAt == nil && MonotonicClock.now() < end {
                try a.sendVideoFrame(now: MonotonicClock.now())
                try b.receive(now: MonotonicClock.now())
                usleep(2_000)
            }
            let first = try XCTUnwrap(b.firstFrameAt, "our pair decoded a frame")
            XCTAssertFalse(b.stamps.isEmpty)
            ours.append(Double((first - start).microseconds) / 1000)
        }
        var theirs: [Double] = []
        for _ in 0..<3 {
            let (proc, _, out, stderr) = try launch(["pair"])
            defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }
            guard let ms = out.wait(for: "event", "pair", seconds: 30)?["ms"] as? Double else {
                let err = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
                if err.contains("ModuleNotFoundError") { throw XCTSkip("aiortc not installed") }
                return XCTFail("aiortc pair did not report: \(err)")
            }
            theirs.append(ms)
        }
        let o = ours.sorted()[1], t = theirs.sorted()[1]
        print(String(format: "SETUP_TIME offer->first decoded frame, median of 3: libotsession %.1f ms, aiortc %.1f ms, ratio aiortc/ours %.2f (ours %@, aiortc %@)",
                     o, t, t / o, ours.map { String(format: "%.1f", $0) }.joined(separator: ","), theirs.map { String(format: "%.1f", $0) }.joined(separator: ",")))
    }
}

enum LoopbackPeerWait {
    static func wait(seconds: Double, _ cond: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end { if cond() { return true }; usleep(2000) }
        return cond()
    }
}
