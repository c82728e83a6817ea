import Foundation
import OTBase
@testable import OTWire
import XCTest

/// Replays the committed corpus under Fuzz/corpus/<target>/ and a bounded number of seeded mutations
/// of it through the STUN, RTCP and SDP parsers: they may throw, never crash; what parses re-encodes and parses again.
/// SDP that parses also goes through offer/answer negotiation (both as an offer and as an answer to ours).
final class WireFuzzTests: XCTestCase {
    static let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus")
    static let mutationsPerFile = 1500

    func corpus(_ name: String) throws -> [(String, [UInt8])] {
        let dir = Self.corpusRoot.appendingPathComponent(name)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertFalse(files.isEmpty, "empty corpus \(name)")
        return try files.map { ($0, Array(try Data(contentsOf: dir.appendingPathComponent($0)))) }
    }

    func testSTUNCorpusAndMutations() throws {
        let files = try corpus("stun")
        for (name, bytes) in files { XCTAssertNoThrow(try STUNMessage.parse(bytes), name) }
        var mutator = FuzzMutator(corpus: files.map(\.1), seed: 1)
        var parsed = 0
        for (_, seed) in files {
            for _ in 0..<Self.mutationsPerFile {
                let m = mutator.next(from: seed)
                _ = DemuxKind.classify(m)
                _ = STUNMessage.isSTUN(m[...])
                if let msg = try? STUNMessage.parse(m) {
                    parsed += 1
                    _ = msg.verifyIntegrity(key: [1, 2, 3])
                    XCTAssertNoThrow(try STUNMessage.parse(msg.encode(integrityKey: [1], fingerprint: true)))
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
    }

    func testRTCPCorpusAndMutations() throws {
        let files = try corpus("rtcp")
        for (name, bytes) in files { XCTAssertNoThrow(try RTCP.parse(bytes), name) }
        var mutator = FuzzMutator(corpus: files.map(\.1), seed: 2)
        var parsed = 0
        for (_, seed) in files {
            for _ in 0..<Self.mutationsPerFile {
                let m = mutator.next(from: seed)
                // What a receiver reads (a malformed packet skipped, the others kept) re-encodes into packets that parse.
                let packets = RTCP.parseCompound(m).packets
                if !packets.isEmpty {
                    parsed += 1
                    let again = try RTCP.parse(RTCP.serialize(packets))
                    XCTAssertEqual(again.count, packets.count)
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
    }

    func testSDPCorpusAndMutations() throws {
        let files = try corpus("sdp")
        for (name, bytes) in files { XCTAssertNoThrow(try SessionDescription.parse(String(decoding: bytes, as: UTF8.self)), name) }
        var mutator = FuzzMutator(corpus: files.map(\.1), seed: 3)
        var parsed = 0, answered = 0
        for (_, seed) in files {
            // Whole browser offers are large: fewer mutations each, so the replay stays within a few seconds.
            for _ in 0..<min(Self.mutationsPerFile, 2_500_000 / max(1, seed.count)) {
                let m = mutator.next(from: seed)
                let text = String(decoding: m, as: UTF8.self)
                if let sd = try? SessionDescription.parse(text) {
                    parsed += 1
                    XCTAssertNoThrow(try SessionDescription.parse(sd.serialized()), text)
                    if let answer = FuzzHarness.negotiate(sd) {
                        answered += 1
                        XCTAssertNoThrow(try SessionDescription.parse(answer.serialized()), text)
                    }
                }
                for line in text.split(separator: "\n") where line.contains("candidate:") {
                    _ = try? SDPCandidate(parsing: String(line))
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
        XCTAssertGreaterThan(answered, 0)
    }
}
