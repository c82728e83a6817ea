// Fuzz driver for the VP9 receive parsers (OTWire.FuzzHarness.rtpVP9): RTP, the RFC 9628 payload descriptor, the
// uncompressed frame header, the router's keyframe test and the depacketizer.
//
// Default build: replays a corpus directory, then a bounded number of seeded mutations of it; a trap is the failure signal.
//   swift run ot-fuzz-rtp-vp9 [corpus-dir] [iterations] [seed]
// libFuzzer build (coverage-guided; libFuzzer drives the inputs):
//   swift build --build-path .build/fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DLIBFUZZER --product ot-fuzz-rtp-vp9
//   .build/fuzz/debug/ot-fuzz-rtp-vp9 /tmp/rtp_vp9 -max_total_time=60
import OTWire

#if LIBFUZZER
/// SwiftPM links an executable's `main` as `<module>_main`: libFuzzer takes over from there, each input one packet
/// through a fresh depacketizer.
@_cdecl("ot_fuzz_rtp_vp9_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.runLibFuzzer(argc: argc, argv: argv) { bytes in
        var depacketizer = VP9Depacketizer(reorderWindow: 4, capacity: 64)
        FuzzHarness.rtpVP9(bytes, depacketizer: &depacketizer)
    }
}
#else
@main
struct ReplayDriver {
    static func main() {
        let corpus = FuzzMutator.readCorpus(directory: FuzzDriver.argument(1, default: "Fuzz/corpus/rtp_vp9"))
        let iterations = FuzzDriver.argument(2, default: 100_000)
        var depacketizer = VP9Depacketizer()
        var events = 0
        FuzzDriver.replay(corpus: corpus, iterations: iterations, seed: FuzzDriver.argument(3, default: 1)) {
            events += FuzzHarness.rtpVP9($0, depacketizer: &depacketizer)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations; \(events) depacketizer events; no crash")
    }
}
#endif
