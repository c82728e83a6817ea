import Foundation
import OTBase
@testable import OTMedia
import OTTransport
import OTTestSupport
import OTWire
import Synchronization
import XCTest

/// A peer connection on loopback with the video pipelines: sends the test pattern, decodes what arrives. Pipelines
/// run on the test thread; the connection's IO thread only queues packets.
final class MediaPeer: @unchecked Sendable {
    static let width = 320, height = 240
    let driver: PeerConnectionDriver
    let videoSSRC: UInt32
    private let inbox = Mutex<[([UInt8], Instant)]>([])
    private let keyframeWanted = Mutex(false)
    private let connectedAt = Mutex<Instant?>(nil)
    let videoSender: VideoSendPipeline
    let videoReceiver: VideoReceivePipeline
    let pattern: TestPatternSource
    var frameNumber: UInt32 = 0
    var stamps: [TestPatternStamp] = []
    var firstFrameAt: Instant?

    init(seed: UInt32, sendVideo: Bool = true) throws {
        videoSSRC = 0x2000_0000 + seed
        let config = PeerConnectionConfig(videoTrack: sendVideo ? SDPLocalTrack(ssrc: videoSSRC, streamID: "ms\(seed)", trackID: "v\(seed)", cname: "ot\(seed)") : nil)
        let box = WeakMediaPeer()
        driver = try PeerConnectionDriver(config: config) { e in box.peer?.handle(e) }
        // The offer's extmap ids: 1 = mid.
        videoSender = try VideoSendPipeline(config: VideoSendConfig(ssrc: videoSSRC, encoder: VideoEncoderConfig(width: Self.width, height: Self.height, bitrateKbps: 600),
                                                                    extensionIds: RTPHeaderExtensionIds(mid: 1), mid: "1"))
        videoReceiver = try VideoReceivePipeline()
        pattern = try TestPatternSource(width: Self.width, height: Self.height)
        box.peer = self
    }

    private func handle(_ e: PeerConnectionEvent) {
        switch e {
        case .rtp(let r): inbox.withLock { $0.append((r.bytes, MonotonicClock.now())) }
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

    /// Feeds what arrived into the receive pipeline and runs its timers.
    func receive(now: Instant) throws {
        let packets = inbox.withLock { p in defer { p.removeAll() }; return p }
        var events: [VideoReceiveEvent] = []
        for (bytes, at) in packets {
            let packet = try RTPPacket(parsing: bytes)
            if packet.payloadType == 96 { events += videoReceiver.receive(packet, now: at) }  // not RTX
        }
        events += videoReceiver.poll(now: now)
        for e in events {
            switch e {
            case .frame(let f):
                if firstFrameAt == nil { firstFrameAt = now }
                if let s = TestPatternReader.read(f.frame) { stamps.append(s) }
            case .requestKeyframe:
                if let remote = driver.negotiated?.media.first(where: { $0.kind == "video" })?.remoteSSRCs.first { driver.requestKeyframe(ssrc: remote) }
            }
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

/// libotsession's PeerConnection against aiortc (PyPI) on 127.0.0.1: connection setup times side by side (media both
/// ways with aiortc through sessions: Tests/interop/test_aiortc_session.py).
final class PeerConnectionAiortcTests: XCTestCase {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/aiortc_echo.py")

    /// Connection setup on loopback, offer created -> first decoded video frame: two of our peers, then two
    /// aiortc peers (`aiortc_echo.py pair`), in one run. Prints the figures; asserts only that both complete.
    func testSetupTimeOursVersusAiortc() throws {
        var ours: [Double] = []
        for i in 0..<3 {
            let a = try MediaPeer(seed: 10 + UInt32(i), sendVideo: true)
            let b = try MediaPeer(seed: 20 + UInt32(i), sendVideo: false)
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
            let child = try PythonChild(Self.script, ["pair"])
            let (proc, out, stderr) = (child.process, child.output, child.stderr)
            defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }
            guard let ms = out.json(where: "event", is: "pair", timeout: 30)?["ms"] as? Double else {
                let err = PythonChild.stopAndReadStderr(proc, stderr)
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
