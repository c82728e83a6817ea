// Fuzz driver for the STUN, RTCP and SDP parsers of OTWire: every input goes through all three
// (and the RFC 7983 demultiplexer and the candidate parser); a trap is the failure signal.
//
// Default build: replays corpus directories, then a bounded number of seeded mutations of them.
//   swift run ot-fuzz-wire [iterations] [seed] [corpus-dir...]
// libFuzzer build (coverage-guided; libFuzzer supplies main):
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
    if let packets = try? RTCP.parse(data) {
        _ = try? RTCP.parse(RTCP.serialize(packets))
    }
    let text = String(decoding: data, as: UTF8.self)
    if let sd = try? SessionDescription.parse(text) {
        _ = try? SessionDescription.parse(sd.serialized())
    }
    if text.hasPrefix("candidate:") || text.hasPrefix("a=candidate:") { _ = try? SDPCandidate(parsing: text) }
}

#if LIBFUZZER
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzWire(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runLibFuzzer(_ argc: UnsafeMutablePointer<Int32>,
                  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                  _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// SwiftPM links an executable's `main` as `<module>_main`; hand control to libFuzzer from there.
@_cdecl("ot_fuzz_wire_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var c = argc, v = argv
    return runLibFuzzer(&c, &v) { fuzzOneInput($0, $1) }
}
#else
@main
struct ReplayDriver {
    static func main() {
        let args = CommandLine.arguments
        let iterations = args.count > 1 ? Int(args[1]) ?? 100_000 : 100_000
        let dirs = args.count > 3 ? Array(args[3...]) : ["Fuzz/corpus/stun", "Fuzz/corpus/rtcp", "Fuzz/corpus/sdp"]
        let corpus = dirs.flatMap { FuzzMutator.readCorpus(directory: $0) }
        guard !corpus.isEmpty else { print("no corpus in \(dirs)"); exit(1) }
        var mutator = FuzzMutator(corpus: corpus, seed: args.count > 2 ? UInt64(args[2]) ?? 1 : 1, maxRandomLength: 600)
        for input in corpus { fuzzWire(input) }
        for _ in 0..<iterations { fuzzWire(mutator.next()) }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations through STUN/RTCP/SDP; no crash")
    }
}
#endif
