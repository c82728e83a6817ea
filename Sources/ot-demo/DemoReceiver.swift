import Foundation
import OTBase
import OTMedia
import OTSession

/// The subscribing client's view of the stream: counts and measures every decoded frame (capture-to-render latency
/// from the test pattern's stamp), records the VP8 frames into an IVF file and the PCM into a WAV file, and keeps a
/// picture for the snapshot. Frame and audio callbacks run on the subscriber's media thread; the rest reads under a lock.
final class DemoReceiver: SubscriberDelegate, @unchecked Sendable {
    struct Readback {
        var stamped = 0
        var first: UInt32?
        var last: UInt32?
        /// Counters that did not increase (out of order or repeated).
        var outOfOrder = 0
        /// Places where counters skipped, and the frames skipped there.
        var gaps = 0
        var missing = 0
    }

    private let lock = NSLock()
    private let ivf: IVFWriter
    private let wavPath: String
    private var wav: WAVWriter?
    private var writeError: String?
    private var stats = FrameStats()
    private var readback = Readback()
    private var framesRendered = 0
    private var snapshot: VideoFrame?
    private var snapshotStamped = false
    private var firstRTP: UInt32?
    private var lastRTP: UInt32 = 0
    private var rtpElapsed: Int64 = 0
    /// Size of the encoded frame lent just before the picture.
    private var pendingEncodedBytes = 0
    private var audioSamples = 0
    private var audioBytesSeen = 0
    private var firstFrameAt: Instant?
    private var didConnect = false
    private var failed: OTError?

    init(ivfPath: String, wavPath: String, width: Int, height: Int, codec: VideoCodecType) throws {
        ivf = try IVFWriter(path: ivfPath, width: width, height: height, codec: codec.rawValue)
        self.wavPath = wavPath
    }

    // MARK: SubscriberDelegate

    func subscriberDidConnect(toStream subscriber: Subscriber) { lock.withLock { didConnect = true } }

    func subscriber(_ subscriber: Subscriber, didFailWithError error: OTError) { lock.withLock { failed = failed ?? error } }

    func subscriber(_ subscriber: Subscriber, didReceiveEncodedVideoFrame frame: UnsafeRawBufferPointer, info: EncodedFrameInfo) {
        lock.withLock {
            pendingEncodedBytes = frame.count
            if firstRTP == nil {
                guard info.isKeyframe else { return }  // an IVF file starts with a keyframe
                firstRTP = info.rtpTimestamp
            } else {
                rtpElapsed += Int64(Int32(bitPattern: info.rtpTimestamp &- lastRTP))
            }
            lastRTP = info.rtpTimestamp
            do { try ivf.write(frame: frame, timestamp: UInt64(max(0, rtpElapsed))) } catch { writeError = writeError ?? "received.ivf: \(error)" }
        }
    }

    func subscriber(_ subscriber: Subscriber, didReceiveVideoFrame frame: VideoFrame) {
        let stamp = TestPatternReader.read(frame)
        let now = MonotonicClock.now()
        lock.withLock {
            framesRendered += 1
            if firstFrameAt == nil { firstFrameAt = now }
            stats.videoFrame(bytes: pendingEncodedBytes, capturedAt: stamp.map { Instant(micros: $0.timestampMicros) }, renderedAt: now)
            if let stamp { note(stamp.frameNumber) }
            // Keep a picture now and then (a copy per kept frame only); prefer one whose stamp read back.
            if snapshot == nil || (framesRendered % 30 == 0 && (stamp != nil || !snapshotStamped)) {
                snapshot = frame
                snapshotStamped = stamp != nil
            }
        }
    }

    func subscriber(_ subscriber: Subscriber, didReceiveAudio audio: AudioFrame) {
        let audioBytes = subscriber.stats.audioBytesReceived  // cheap on the media thread; gives the audio bitrate
        let now = MonotonicClock.now()
        lock.withLock {
            stats.audioPacket(bytes: max(0, audioBytes - audioBytesSeen), at: now)
            audioBytesSeen = audioBytes
            do {
                if wav == nil { wav = try WAVWriter(path: wavPath, sampleRate: audio.sampleRate, channels: audio.channels) }
                try wav?.write(audio.samples)
                audioSamples += audio.frameCount
            } catch { writeError = writeError ?? "received.wav: \(error)" }
        }
    }

    private func note(_ n: UInt32) {
        readback.stamped += 1
        defer { readback.last = n }
        if readback.first == nil { readback.first = n }
        guard let last = readback.last else { return }
        if n <= last { readback.outOfOrder += 1 } else if n > last + 1 { readback.gaps += 1; readback.missing += Int(n - last - 1) }
    }

    // MARK: reading (any thread)

    /// The status line: fps, video bitrate, loss and RTT from the subscriber's counters, capture-to-render latency.
    /// `rttMillis` is the subscriber's, or else the publisher's (the one its receivers report).
    func statusLine(_ s: SubscriberStats, rttMillis: Double?) -> String {
        let received = s.videoPacketsReceived + s.audioPacketsReceived, lost = s.videoPacketsLost + s.audioPacketsLost
        let loss = received + lost > 0 ? Double(lost) / Double(received + lost) : 0
        return lock.withLock { stats.statusLine(at: MonotonicClock.now(), lossFraction: loss, rttMillis: rttMillis) }
    }

    /// Whether media reached the subscriber (`subscriberDidConnect`), and its first failure.
    var connected: Bool { lock.withLock { didConnect } }
    var failure: OTError? { lock.withLock { failed } }
    var rendered: Int { lock.withLock { framesRendered } }
    /// When the first picture arrived.
    var firstFrame: Instant? { lock.withLock { firstFrameAt } }
    var stamps: Readback { lock.withLock { readback } }
    var latency: LatencyStats.Summary? { lock.withLock { stats.latency.summary } }
    var picture: VideoFrame? { lock.withLock { snapshot } }
    var recordedAudioSeconds: Double { lock.withLock { wav.map { Double(audioSamples) / Double($0.sampleRate) } ?? 0 } }
    var error: String? { lock.withLock { writeError } }

    /// Closes the recordings (the IVF header gets its frame count); returns the IVF frames written.
    func finish() throws -> (ivfFrames: Int, wavWritten: Bool) {
        try lock.withLock {
            try ivf.close()
            try wav?.close()
            return (ivf.frameCount, wav != nil)
        }
    }
}
