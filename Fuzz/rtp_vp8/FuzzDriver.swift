// Fuzz driver for the RTP/VP8/Opus receive parsers (OTWire.FuzzHarness.rtpVP8).
//
// Default build: replays a corpus directory, then a bounded number of seeded mutations of it
// (bit flips, truncation, extension, splices, random bytes); a trap is the failure signal.
//   swift run ot-fuzz-rtp-vp8 [corpus-dir] [iterations] [seed]
// libFuzzer build (coverage-guided; libFuzzer supplies main):
//   swift build --build-path .build/fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DLIBFUZZER --product ot-fuzz-rtp-vp8
//   .build/fuzz/debug/ot-fuzz-rtp-vp8 Fuzz/corpus/rtp_vp8 -max_total_time=60
import Glibc
import OTWire

#if LIBFUZZER
/// libFuzzer's entry: each input is one packet, through a fresh depacketizer.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    var depacketizer = VP8Depacketizer(reorderWindow: 4, capacity: 64)
    FuzzHarness.rtpVP8(bytes, depacketizer: &depacketizer)
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runLibFuzzer(_ argc: UnsafeMutablePointer<Int32>,
                  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                  _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// SwiftPM links an executable's `main` as `<module>_main`; hand control to libFuzzer from there.
@_cdecl("ot_fuzz_rtp_vp8_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var c = argc, v = argv
    return runLibFuzzer(&c, &v) { fuzzOneInput($0, $1) }
}
#else
@main
struct ReplayDriver {
    static func main() {
        let args = CommandLine.arguments
        let dir = args.count > 1 ? args[1] : "Fuzz/corpus/rtp_vp8"
        let iterations = args.count > 2 ? Int(args[2]) ?? 100_000 : 100_000
        let corpus = FuzzMutator.readCorpus(directory: dir)
        var mutator = FuzzMutator(corpus: corpus, seed: args.count > 3 ? UInt64(args[3]) ?? 1 : 1)
        var depacketizer = VP8Depacketizer()
        var events = 0
        for input in corpus { events += FuzzHarness.rtpVP8(input, depacketizer: &depacketizer) }
        for _ in 0..<iterations {
            events += FuzzHarness.rtpVP8(mutator.next(), depacketizer: &depacketizer)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations; \(events) depacketizer events; no crash")
    }
}
#endif
