// Fuzz driver for the STUN, RTCP and SDP parsers of OTWire: every input goes through all three
// (and the RFC 7983 demultiplexer, the candidate parser and SDP offer/answer); a trap is the failure signal.
//
// Default build: replays corpus directories, then a bounded number of seeded mutations of them.
//   swift run ot-fuzz-wire [iterations] [seed] [corpus-dir...]
// libFuzzer build (coverage-guided; libFuzzer drives the inputs):
//   swift build --build-path .build/fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DLIBFUZZER --product ot-fuzz-wire
//   .build/fuzz/debug/ot-fuzz-wire /tmp/wire-corpus -max_total_time=60
import Glibc
import OTWire

/// Feeds one input to every parser; what parses is re-encoded and parsed again.
func fuzzWire(_ data: [UInt8]) {
    _ = DemuxKind.classify(data)
    if STUNMessage.isSTUN(data[...]), let m = try? STUNMessage.parse(data) {
        _ = m.verifyIntegrity(key: [1, 2, 3])
        _ = try? STUNMessage.parse(m.encode(integrityKey: [1], fingerprint: true))
    } else if let m = try? STUNMessage.parse(data) {
        _ = m.encode()
    }
    // What a receiver reads of any input (a malformed packet skipped, the rest kept) re-encodes into packets that all parse.
    let compound = RTCP.parseCompound(data)
    if !compound.packets.isEmpty {
        let again = RTCP.parseCompound(RTCP.serialize(compound.packets))
        if again.skipped != 0 || again.packets.count != compound.packets.count {
            fatalError("RTCP re-encoding: \(compound.packets) read back as \(again)")
        }
    }
    let text = String(decoding: data, as: UTF8.self)
    if let sd = try? SessionDescription.parse(text) {
        _ = try? SessionDescription.parse(sd.serialized())
        if let answer = FuzzHarness.negotiate(sd) { _ = try? SessionDescription.parse(answer.serialized()) }
    }
    if text.hasPrefix("candidate:") || text.hasPrefix("a=candidate:") { _ = try? SDPCandidate(parsing: text) }
}

#if LIBFUZZER
/// SwiftPM links an executable's `main` as `<module>_main`: libFuzzer takes over from there.
@_cdecl("ot_fuzz_wire_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.runLibFuzzer(argc: argc, argv: argv) { fuzzWire($0) }
}
#else
@main
struct ReplayDriver {
    static func main() {
        let iterations = FuzzDriver.argument(1, default: 100_000)
        let args = CommandLine.arguments
        let dirs = args.count > 3 ? Array(args[3...]) : ["Fuzz/corpus/stun", "Fuzz/corpus/rtcp", "Fuzz/corpus/sdp"]
        let corpus = dirs.flatMap { FuzzMutator.readCorpus(directory: $0) }
        guard !corpus.isEmpty else { print("no corpus in \(dirs)"); exit(1) }
        FuzzDriver.replay(corpus: corpus, iterations: iterations, seed: FuzzDriver.argument(2, default: 1), maxRandomLength: 600) {
            fuzzWire($0)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations through STUN/RTCP/SDP; no crash")
    }
}
#endif
