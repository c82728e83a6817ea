import Foundation
import OTBase
@testable import OTWire
import XCTest

/// Replays Fuzz/corpus/control/ and a bounded number of seeded mutations of it (extreme numbers among them) through
/// every control-plane parser (`FuzzHarness.control`): they may refuse, never trap.
final class ControlFuzzTests: XCTestCase {
    static let corpusDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/control")

    func testCorpusAndSeededMutationsNeverTrap() throws {
        let corpus = FuzzMutator.readCorpus(directory: Self.corpusDirectory.path)
        XCTAssertGreaterThanOrEqual(corpus.count, 20)
        var accepted = 0
        for input in corpus { accepted += FuzzHarness.control(input) }
        XCTAssertGreaterThan(accepted, corpus.count / 2, "the seeds are mostly valid")
        var mutator = FuzzMutator(corpus: corpus, seed: 0xC0DE, maxRandomLength: 600)
        var survived = 0
        for _ in 0..<15_000 {
            FuzzHarness.control(mutator.next())
            survived += 1
        }
        XCTAssertEqual(survived, 15_000)
    }

    /// The mutator's number substitution puts extreme values where digits were.
    func testMutatorWritesExtremeNumbers() {
        var m = FuzzMutator(corpus: [Array(#"{"exp":1796100000}"#.utf8)], seed: 7)
        var sawExtreme = false
        for _ in 0..<500 {
            let s = String(decoding: m.next(), as: UTF8.self)
            if s.contains("1e19") || s.contains("nan") || s.contains("9223372036854775808") { sawExtreme = true; break }
        }
        XCTAssertTrue(sawExtreme)
    }
}
