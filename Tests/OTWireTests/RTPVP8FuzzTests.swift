import XCTest
@testable import OTWire

/// Seeded, bounded fuzzing of the receive parsers: nothing may trap, whatever the bytes.
final class RTPVP8FuzzTests: XCTestCase {
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static var corpusDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/rtp_vp8")
    }

    func loadCorpus() throws -> [[UInt8]] {
        let files = try FileManager.default.contentsOfDirectory(at: Self.corpusDirectory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "bin" }.sorted { $0.path < $1.path }
        return try files.map { [UInt8](try Data(contentsOf: $0)) }
    }

    func testCorpusAndEveryTruncationParseWithoutTrapping() throws {
        let corpus = try loadCorpus()
        XCTAssertGreaterThanOrEqual(corpus.count, 8)
        var d = VP8Depacketizer()
        var parsed = 0
        for input in corpus {
            for n in 0...input.count {
                FuzzHarness.rtpVP8(Array(input.prefix(n)), depacketizer: &d)
                if (try? RTPPacket(parsing: Array(input.prefix(n)))) != nil { parsed += 1 }
            }
        }
        // Well-formed seeds parse; truncations and broken seeds are rejected with errors instead.
        XCTAssertGreaterThan(parsed, 0)
        XCTAssertThrowsError(try RTPPacket(parsing: corpus[0].prefix(5)))
    }

    func testSeededMutationsAndRandomBytesNeverTrap() throws {
        let corpus = try loadCorpus()
        var rng = SplitMix64(state: 0x5EED)
        var d = VP8Depacketizer(reorderWindow: 8)
        var accepted = 0
        for i in 0..<20_000 {
            var b: [UInt8]
            if i % 5 == 0 {
                b = (0..<Int.random(in: 0...1500, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if !b.isEmpty { b[0] = 0x80 | (b[0] & 0x3F) }  // mostly valid version, so deeper code runs
            } else {
                b = corpus[Int.random(in: 0..<corpus.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0 where !b.isEmpty: b[Int.random(in: 0..<b.count, using: &rng)] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
                    case 1 where !b.isEmpty: b.removeLast(Int.random(in: 0..<b.count, using: &rng))
                    case 2: b += (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    default: if !b.isEmpty { b[Int.random(in: 0..<b.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
                    }
                }
            }
            FuzzHarness.rtpVP8(b, depacketizer: &d)
            if (try? RTPPacket(parsing: b)) != nil { accepted += 1 }
        }
        XCTAssertGreaterThan(accepted, 1000, "the mutations must reach the depacketizer, not only the header check")
    }

    func testOversizedPayloadIsHandled() throws {
        var d = VP8Depacketizer()
        let huge = RTPPacket(marker: true, payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 1,
                             payload: ([0x10] + [UInt8](repeating: 0x10, count: 65_000))[...])
        var frames = 0
        d.insert(try RTPPacket(parsing: huge.serialized())) { if case .frame = $0 { frames += 1 } }
        XCTAssertEqual(frames, 1, "a single-packet keyframe of any size is reassembled")
    }
}
