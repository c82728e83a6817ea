import OTBase
import XCTest
@testable import OTWire

/// Seeded, bounded fuzzing of the VP9 receive parsers (Fuzz/corpus/rtp_vp9, `ot-fuzz-rtp-vp9`): the RFC 9628 payload
/// descriptor, the uncompressed frame header, the router's keyframe test and the depacketizer; nothing may trap.
final class RTPVP9FuzzTests: XCTestCase {
    static let corpusDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/rtp_vp9").path
    /// A VP9 keyframe's uncompressed header (profile 0, sync code, BT.601, 320×240), as the corpus's keyframes start.
    static let keyframeHeader: [UInt8] = [0x82, 0x49, 0x83, 0x42, 0x20, 0x13, 0xF0, 0x0E, 0xF0]

    /// What our packetizer sends for a 3000-byte keyframe and a delta frame (three and one packets).
    static func packetizerOutput() -> [[UInt8]] {
        var p = VP9Packetizer(maxPayloadSize: 1200, initialPictureId: 0x7FFE)
        var packets: [[UInt8]] = []
        var seq: UInt16 = 0
        let frames = [keyframeHeader + [UInt8](repeating: 0xA5, count: 2991), [0x86, 0x00] + [UInt8](repeating: 0x5A, count: 300)]
        for (i, frame) in frames.enumerated() {
            frame.withUnsafeBytes { raw in
                p.packetize(raw, nonReference: false, layer: nil) { payload, last in
                    packets.append(RTPPacket(marker: last, payloadType: 98, sequenceNumber: seq, timestamp: 3000 * UInt32(i),
                                             ssrc: 9, payload: payload).serialized())
                    seq &+= 1
                }
            }
        }
        return packets
    }

    func testCorpusPacketizerOutputAndEveryTruncationParseWithoutTrapping() throws {
        let corpus = FuzzMutator.readCorpus(directory: Self.corpusDirectory)
        XCTAssertGreaterThanOrEqual(corpus.count, 12)
        var descriptors = 0, frames: [ReceivedEncodedFrame] = []
        for input in corpus + Self.packetizerOutput() {
            if let rtp = try? RTPPacket(parsing: input), let (d, _) = try? VP9PayloadDescriptor.parse(rtp.payload) {
                descriptors += 1
                // A non-flexible descriptor (what we write) writes back to one that parses the same.
                if !d.flexible {
                    var again: [UInt8] = []
                    d.write(into: &again)
                    again.append(0)
                    XCTAssertEqual(try VP9PayloadDescriptor.parse(again[...]).0, d)
                }
            }
            var d = VP9Depacketizer()
            for n in 0...input.count { FuzzHarness.rtpVP9(Array(input.prefix(n)), depacketizer: &d) }
        }
        XCTAssertGreaterThanOrEqual(descriptors, corpus.count - 5 + 4, "the seeds but the five broken ones, and the packetizer's")
        // The packetizer's keyframe reassembles, its size read from the header.
        var d = VP9Depacketizer()
        for packet in Self.packetizerOutput() {
            d.insert(try RTPPacket(parsing: packet)) { if case .frame(let f) = $0 { frames.append(f) } }
        }
        XCTAssertEqual(frames.map(\.isKeyframe), [true, false])
        XCTAssertEqual(frames.first?.keyframeSize?.width, 320)
        XCTAssertEqual(frames.first?.data.count, 3000)
    }

    func testSeededMutationsAndRandomBytesNeverTrap() throws {
        let corpus = FuzzMutator.readCorpus(directory: Self.corpusDirectory) + Self.packetizerOutput()
        var mutator = FuzzMutator(corpus: corpus, seed: 0x9F9, maxRandomLength: 1500)
        var d = VP9Depacketizer(reorderWindow: 8)
        var accepted = 0, events = 0
        for _ in 0..<20_000 {
            var b = mutator.next()
            // Half the inputs with a bad RTP version get a good one, so deeper code runs too.
            if b.count > 12 && b.count % 2 == 0 && b[0] & 0xC0 != 0x80 { b[0] = 0x80 | (b[0] & 0x3F) }
            events += FuzzHarness.rtpVP9(b, depacketizer: &d)
            if let p = try? RTPPacket(parsing: b), (try? VP9PayloadDescriptor.parse(p.payload)) != nil { accepted += 1 }
        }
        XCTAssertGreaterThan(accepted, 1000, "the mutations must reach the descriptor and the depacketizer, not only the header check")
        XCTAssertGreaterThan(events, 0)
        XCTAssertGreaterThan(d.stats.malformedPackets, 0, "malformed descriptors are counted, not trapped on")
    }
}
