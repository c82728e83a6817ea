// Fuzz driver for the control plane: every input goes through the HTTP, WebSocket, signaling JSON, token
// (JWT and T1, also signed so that absurd numbers reach the time checks), REST authentication and session id
// parsers (OTWire.FuzzHarness.control); a trap is the failure signal.
//
// Default build: replays a corpus directory, then a bounded number of seeded mutations of it (extreme numbers
// among them).
//   swift run ot-fuzz-control [corpus-dir] [iterations] [seed]
// libFuzzer build (coverage-guided; libFuzzer drives the inputs):
//   swift build --build-path .build/fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DLIBFUZZER --product ot-fuzz-control
//   mkdir -p /tmp/control && cp Fuzz/corpus/control/* /tmp/control/
//   .build/fuzz/debug/ot-fuzz-control /tmp/control -max_total_time=60
import OTWire

#if LIBFUZZER
/// SwiftPM links an executable's `main` as `<module>_main`: libFuzzer takes over from there.
@_cdecl("ot_fuzz_control_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.runLibFuzzer(argc: argc, argv: argv) { FuzzHarness.control($0) }
}
#else
@main
struct ReplayDriver {
    static func main() {
        let corpus = FuzzMutator.readCorpus(directory: FuzzDriver.argument(1, default: "Fuzz/corpus/control"))
        let iterations = FuzzDriver.argument(2, default: 100_000)
        var accepted = 0
        FuzzDriver.replay(corpus: corpus, iterations: iterations, seed: FuzzDriver.argument(3, default: 1), maxRandomLength: 600) {
            accepted += FuzzHarness.control($0)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations through the control plane; \(accepted) accepted; no crash")
    }
}
#endif
