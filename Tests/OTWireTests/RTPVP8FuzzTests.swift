import OTBase
import XCTest
@testable import OTWire

/// Seeded, bounded fuzzing of the receive parsers: nothing may trap, whatever the bytes.
final class RTPVP8FuzzTests: XCTestCase {
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
        var mutator = FuzzMutator(corpus: corpus, seed: 0x5EED, maxRandomLength: 1500)
        var d = VP8Depacketizer(reorderWindow: 8)
        var accepted = 0
        for _ in 0..<20_000 {
            var b = mutator.next()
            // Half the inputs with a bad RTP version get a good one, so deeper code runs too.
            if b.count > 12 && b.count % 2 == 0 && b[0] & 0xC0 != 0x80 { b[0] = 0x80 | (b[0] & 0x3F) }
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
