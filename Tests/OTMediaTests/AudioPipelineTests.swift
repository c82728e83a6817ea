import OTBase
@testable import OTMedia
import OTTransport
import OTWire
import XCTest

final class AudioPipelineTests: XCTestCase {
    struct Outcome {
        var pcm: [Int16] = []
        var kinds: [AudioPlayoutKind] = []
        var dropped = 0
        var sent = 0
        var receiveStats = AudioReceiveStats()
        var sendStats = AudioSendStats()
    }

    /// A 800 Hz tone captured in irregular chunks → AudioSendPipeline → SRTP → seeded lossy, jittery path →
    /// SRTP → AudioReceivePipeline, pulled every 20 ms for `seconds`.
    func runTone(seconds: Int, loss: Double, seed: UInt64, fec: Bool = false,
                 transforms: (any FrameTransform, any FrameTransform) = (IdentityFrameTransform(), IdentityFrameTransform())) throws -> Outcome {
        let material = (0..<SRTPProfile.aes128CmHmacSha1_80.keyingMaterialLength).map { UInt8($0 * 3 & 0xFF) }
        let srtpA = try SRTPContext(profile: .aes128CmHmacSha1_80, keys: SRTPKeys(keyingMaterial: material, profile: .aes128CmHmacSha1_80, isDTLSClient: true))
        let srtpB = try SRTPContext(profile: .aes128CmHmacSha1_80, keys: SRTPKeys(keyingMaterial: material, profile: .aes128CmHmacSha1_80, isDTLSClient: false))
        let settings = AudioDeviceSettings(sampleRate: 48_000, channels: 1)
        let sender = try AudioSendPipeline(config: AudioSendConfig(ssrc: 99, opus: OpusEncoderConfig(fec: fec, expectedLossPercent: fec ? 10 : 0)),
                                           transform: transforms.0)
        let receiver = try AudioReceivePipeline(config: AudioReceiveConfig(useFEC: fec), transform: transforms.1)
        var random = SeededRandom(seed: seed)
        var path = SeededLossyPath(seed: seed &+ 1, lossProbability: loss, baseDelay: .milliseconds(30), maxJitter: .milliseconds(10))
        var tone = ToneGenerator(frequency: 800, amplitude: 0.3, settings: settings)
        var arrivals: [(at: Instant, bytes: [UInt8])] = []
        var out = Outcome()
        let start = Instant(micros: 10_000_000)
        var captured = 0
        let total = seconds * 48_000
        while captured < total {
            let n = min(total - captured, 100 + Int(random.next() % 1400))
            var chunk = [Int16](repeating: 0, count: n)
            chunk.withUnsafeMutableBufferPointer { tone.fill($0) }
            captured += n
            let now = start + .microseconds(Int64(captured) * 1_000_000 / 48_000)
            try sender.send(chunk, settings: settings, now: now) { bytes in
                try srtpA.protectRTP(&bytes)
                out.sent += 1
                if let at = path.arrival(sentAt: now) { arrivals.append((at, bytes)) } else { out.dropped += 1 }
            }
        }
        arrivals.sort { $0.at < $1.at }
        var next = 0
        var frame: [Int16] = []
        for tick in 0..<(seconds * 50 + 10) {
            let now = start + .milliseconds(20 * tick)
            while next < arrivals.count, arrivals[next].at <= now {
                var bytes = arrivals[next].bytes
                try srtpB.unprotectRTP(&bytes)
                receiver.receive(try RTPPacket(parsing: bytes), now: arrivals[next].at)
                next += 1
            }
            out.kinds.append(receiver.pull(now: now, into: &frame))
            out.pcm += frame
        }
        out.receiveStats = receiver.stats
        out.sendStats = sender.stats
        return out
    }

    func assertTone(_ pcm: [Int16], file: StaticString = #filePath, line: UInt = #line) {
        let steady = Array(pcm[min(9600, pcm.count)...])
        XCTAssertGreaterThan(steady.count, 48_000, file: file, line: line)
        XCTAssertEqual(zeroCrossingFrequency(steady), 800, accuracy: 20, file: file, line: line)
        XCTAssertGreaterThan(goertzel(steady, frequency: 800), 30 * goertzel(steady, frequency: 1300), file: file, line: line)
    }

    func concealedMissing(_ kinds: [AudioPlayoutKind]) -> Int {
        kinds.filter { $0 == .concealed(.lost) || $0 == .concealed(.underrun) }.count
    }

    func testToneKeepsItsFrequencyWithoutLoss() throws {
        let o = try runTone(seconds: 3, loss: 0, seed: 11)
        assertTone(o.pcm)
        XCTAssertEqual(o.sendStats.framesEncoded, 150, "3 s in 20 ms frames, whatever the chunk sizes")
        XCTAssertEqual(o.sendStats.packetsSent, 150)
        XCTAssertEqual(o.sendStats.samplesCaptured, 144_000)
        let s = o.receiveStats
        XCTAssertEqual(s.packetsReceived, 150); XCTAssertEqual(s.packetsLost, 0)
        XCTAssertEqual(s.bytesReceived, o.sendStats.bytesSent)
        // Packets that miss their playout time under jitter are concealed and discarded, the rest are played.
        let decoded = o.kinds.filter { $0 == .decoded }.count
        XCTAssertGreaterThanOrEqual(decoded, 147)
        XCTAssertEqual(decoded + s.packetsDiscarded, 150)
        XCTAssertEqual(o.kinds.filter { $0 == .concealed(.lost) }.count, 150 - decoded)
        XCTAssertEqual(s.fecFrames, 0)
        XCTAssertGreaterThan(s.jitter, 0)
        XCTAssertGreaterThanOrEqual(s.jitterBufferTargetDelay, 0.02)
    }

    func testToneKeepsItsFrequencyWithTenPercentLossAndPLCIsCounted() throws {
        let o = try runTone(seconds: 4, loss: 0.10, seed: 5)
        XCTAssertGreaterThan(o.dropped, 10, "the seed drops about 10%")
        assertTone(o.pcm)
        let s = o.receiveStats
        XCTAssertEqual(s.packetsLost, o.dropped)
        let decoded = o.kinds.filter { $0 == .decoded }.count
        XCTAssertEqual(decoded + s.packetsDiscarded + o.dropped, 200)
        // Each lost (or too late) packet is concealed: as lost when later ones are held, else as an underrun.
        XCTAssertGreaterThanOrEqual(concealedMissing(o.kinds), o.dropped)
        XCTAssertGreaterThanOrEqual(o.kinds.filter { $0 == .concealed(.lost) }.count, o.dropped / 2)
        XCTAssertEqual(s.plcFrames, o.kinds.filter { if case .concealed = $0 { true } else { false } }.count, "PLC is counted")
        XCTAssertGreaterThan(s.concealmentEvents, 0)
        XCTAssertGreaterThanOrEqual(s.concealedSamples, o.dropped * 960)
        XCTAssertEqual(s.fecFrames, 0, "no FEC decoding unless the sender codes it")
    }

    func testFECRebuildsLostFramesWhenTheEncoderSendsIt() throws {
        let o = try runTone(seconds: 4, loss: 0.10, seed: 5, fec: true)
        assertTone(o.pcm)
        let s = o.receiveStats
        XCTAssertGreaterThan(s.fecFrames, 0)
        XCTAssertEqual(o.kinds.filter { $0 == .fec }.count, s.fecFrames)
        XCTAssertGreaterThanOrEqual(s.fecFrames + concealedMissing(o.kinds), o.dropped)
    }

    func testPacketsCarryOpusTimestampsMarkerAndAudioLevel() throws {
        let ids = RTPHeaderExtensionIds(mid: 4, audioLevel: 1)
        let sender = try AudioSendPipeline(config: AudioSendConfig(ssrc: 5, extensionIds: ids, mid: "a0",
                                                                   initialSequenceNumber: 7, initialTimestamp: 1000))
        let settings = AudioDeviceSettings()
        var packets: [RTPPacket] = []
        let loud = tone(frequencies: [440], startSample: 0, count: 960 * 3)
        try sender.send(loud, settings: settings, now: .zero) { packets.append(try RTPPacket(parsing: $0)) }
        try sender.send([Int16](repeating: 0, count: 960), settings: settings, now: .zero) { packets.append(try RTPPacket(parsing: $0)) }
        XCTAssertEqual(packets.map(\.sequenceNumber), [7, 8, 9, 10])
        XCTAssertEqual(packets.map(\.timestamp), [1000, 1960, 2920, 3880])
        XCTAssertEqual(packets.map(\.marker), [true, false, false, false])
        XCTAssertEqual(packets.map(\.payloadType), [111, 111, 111, 111])
        let levels = try packets.map { try AudioLevelExtension.decode(XCTUnwrap($0.extensions.value(id: 1))) }
        // Amplitude 8000 sine: RMS 5657 → 15 dBov.
        XCTAssertEqual(levels[0].levelDBov, 15)
        XCTAssertEqual(levels[3].levelDBov, 127, "digital silence")
        XCTAssertEqual(try MidExtension.decode(XCTUnwrap(packets[0].extensions.value(id: 4))), "a0")
        for p in packets { XCTAssertNoThrow(try OpusPayload.packetInfo(p.payload)) }
    }

    func testDTXSkipsSilentFramesAndMarksTheNextTalkspurt() throws {
        let sender = try AudioSendPipeline(config: AudioSendConfig(ssrc: 5, opus: OpusEncoderConfig(dtx: true), initialTimestamp: 0))
        let settings = AudioDeviceSettings()
        var packets: [RTPPacket] = []
        try sender.send(tone(frequencies: [440], startSample: 0, count: 960 * 10), settings: settings, now: .zero) { packets.append(try RTPPacket(parsing: $0)) }
        try sender.send([Int16](repeating: 0, count: 960 * 50), settings: settings, now: .zero) { packets.append(try RTPPacket(parsing: $0)) }
        let beforeTalk = packets.count
        try sender.send(tone(frequencies: [440], startSample: 0, count: 960 * 5), settings: settings, now: .zero) { packets.append(try RTPPacket(parsing: $0)) }
        XCTAssertGreaterThan(sender.stats.dtxFramesSkipped, 10)
        XCTAssertEqual(sender.stats.framesEncoded, 65)
        XCTAssertEqual(sender.stats.packetsSent + sender.stats.dtxFramesSkipped, 65)
        XCTAssertTrue(packets[beforeTalk].marker, "a talkspurt after DTX starts with the marker")
        XCTAssertEqual(packets[beforeTalk].timestamp, 960 * 60, "the clock ran on through the silence")
    }

    func testAudioFramesPassThroughATransform() throws {
        let o = try runTone(seconds: 2, loss: 0, seed: 2, transforms: (XORTransform(key: 0x5A, clearBytes: 1), XORTransform(key: 0x5A, clearBytes: 1)))
        assertTone(o.pcm)
        XCTAssertEqual(o.receiveStats.decodeErrors, 0)
    }

    func testAMismatchedTransformIsCountedNotPlayed() throws {
        let o = try runTone(seconds: 1, loss: 0, seed: 2, transforms: (XORTransform(key: 0x5A, clearBytes: 1), RejectingTransform()))
        XCTAssertEqual(o.receiveStats.transformErrors, 50)
        XCTAssertEqual(o.receiveStats.packetsDiscarded, 50)
        XCTAssertFalse(o.kinds.contains(.decoded))
    }
}

/// A toy transform: XORs every byte after the first `clearBytes` (as frame encryption keeps codec headers clear).
final class XORTransform: FrameTransform, @unchecked Sendable {
    let key: UInt8, clearBytes: Int
    private(set) var calls = 0
    init(key: UInt8, clearBytes: Int) { self.key = key; self.clearBytes = clearBytes }
    var isIdentity: Bool { false }
    private func apply(_ frame: UnsafeRawBufferPointer, _ output: inout [UInt8]) {
        calls += 1
        output.removeAll(keepingCapacity: true)
        for (i, b) in frame.enumerated() { output.append(i < clearBytes ? b : b ^ key) }
    }
    func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws { apply(frame, &output) }
    func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws { apply(frame, &output) }
}

/// A receive-side transform that refuses everything (a frame under an unknown key).
struct RejectingTransform: FrameTransform {
    var isIdentity: Bool { false }
    func transformOutgoing(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        throw OTError(.internalError, "not for sending")
    }
    func transformIncoming(_ frame: UnsafeRawBufferPointer, info: EncodedFrameInfo, into output: inout [UInt8]) throws {
        throw OTError(.internalError, "unknown key")
    }
}
