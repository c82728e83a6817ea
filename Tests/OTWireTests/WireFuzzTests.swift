import Foundation
import OTBase
@testable import OTWire
import XCTest

/// Replays the committed corpus under Fuzz/corpus/<target>/ and a bounded number of seeded mutations
/// of it through the STUN, RTCP and SDP parsers: they may throw, never crash; what parses re-encodes and parses again.
final class WireFuzzTests: XCTestCase {
    static let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus")
    static let mutationsPerFile = 1500

    struct LCG { var s: UInt64; mutating func next(_ n: Int) -> Int { s = s &* 6364136223846793005 &+ 1442695040888963407; return Int((s >> 33) % UInt64(max(1, n))) } }

    func corpus(_ name: String) throws -> [(String, [UInt8])] {
        let dir = Self.corpusRoot.appendingPathComponent(name)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertFalse(files.isEmpty, "empty corpus \(name)")
        return try files.map { ($0, Array(try Data(contentsOf: dir.appendingPathComponent($0)))) }
    }

    func mutate(_ input: [UInt8], _ rng: inout LCG, pool: [[UInt8]]) -> [UInt8] {
        var b = input
        for _ in 0...rng.next(4) {
            switch rng.next(7) {
            case 0 where !b.isEmpty: b[rng.next(b.count)] ^= UInt8(1 << rng.next(8))
            case 1 where !b.isEmpty: b[rng.next(b.count)] = UInt8(truncatingIfNeeded: rng.next(256))
            case 2: b.insert(UInt8(truncatingIfNeeded: rng.next(256)), at: rng.next(b.count + 1))
            case 3 where !b.isEmpty: b.remove(at: rng.next(b.count))
            case 4: b = Array(b.prefix(rng.next(b.count + 1)))
            case 5 where !b.isEmpty: b[rng.next(b.count)] = [0, 0xFF, 0x7F, 0x80, 0x3A, 0x20, 0x0A, 0x2F, 0x3D, 0x3B][rng.next(10)]
            default:
                let other = pool[rng.next(pool.count)]
                let cut = rng.next(b.count + 1), from = rng.next(other.count + 1)
                b = Array(b.prefix(cut)) + Array(other.suffix(from: from))
            }
        }
        return b
    }

    func testSTUNCorpusAndMutations() throws {
        let files = try corpus("stun")
        for (name, bytes) in files { XCTAssertNoThrow(try STUNMessage.parse(bytes), name) }
        var rng = LCG(s: 1)
        var parsed = 0
        for (_, seed) in files {
            for _ in 0..<Self.mutationsPerFile {
                let m = mutate(seed, &rng, pool: files.map(\.1))
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
        var rng = LCG(s: 2)
        var parsed = 0
        for (_, seed) in files {
            for _ in 0..<Self.mutationsPerFile {
                let m = mutate(seed, &rng, pool: files.map(\.1))
                if let packets = try? RTCP.parse(m) {
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
        var rng = LCG(s: 3)
        var parsed = 0
        for (_, seed) in files {
            for _ in 0..<Self.mutationsPerFile {
                let m = mutate(seed, &rng, pool: files.map(\.1))
                let text = String(decoding: m, as: UTF8.self)
                if let sd = try? SessionDescription.parse(text) {
                    parsed += 1
                    XCTAssertNoThrow(try SessionDescription.parse(sd.serialized()), text)
                }
                for line in text.split(separator: "\n") where line.contains("candidate:") {
                    _ = try? SDPCandidate(parsing: String(line))
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
    }
}
