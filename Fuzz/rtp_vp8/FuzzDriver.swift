// Fuzz driver for the RTP/VP8/Opus receive parsers (OTWire.FuzzHarness.rtpVP8).
//
// Default build: replays a corpus directory, then a bounded number of seeded mutations of it
// (bit flips, truncation, extension, splices, random bytes); a trap is the failure signal.
//   swift run ot-fuzz-rtp-vp8 [corpus-dir] [iterations] [seed]
// libFuzzer build (coverage-guided; libFuzzer drives the inputs):
//   swift build --build-path .build/fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DLIBFUZZER --product ot-fuzz-rtp-vp8
//   .build/fuzz/debug/ot-fuzz-rtp-vp8 Fuzz/corpus/rtp_vp8 -max_total_time=60
import OTWire

#if LIBFUZZER
/// SwiftPM links an executable's `main` as `<module>_main`: libFuzzer takes over from there, each input one packet
/// through a fresh depacketizer.
@_cdecl("ot_fuzz_rtp_vp8_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.runLibFuzzer(argc: argc, argv: argv) { bytes in
        var depacketizer = VP8Depacketizer(reorderWindow: 4, capacity: 64)
        FuzzHarness.rtpVP8(bytes, depacketizer: &depacketizer)
    }
}
#else
@main
struct ReplayDriver {
    static func main() {
        let corpus = FuzzMutator.readCorpus(directory: FuzzDriver.argument(1, default: "Fuzz/corpus/rtp_vp8"))
        let iterations = FuzzDriver.argument(2, default: 100_000)
        var depacketizer = VP8Depacketizer()
        var events = 0
        FuzzDriver.replay(corpus: corpus, iterations: iterations, seed: FuzzDriver.argument(3, default: 1)) {
            events += FuzzHarness.rtpVP8($0, depacketizer: &depacketizer)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations; \(events) depacketizer events; no crash")
    }
}
#endif
