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

/// SplitMix64: a small seeded generator so runs are reproducible.
struct Rng {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func pick(_ corpus: [[UInt8]]) -> [UInt8]? { corpus.isEmpty ? nil : corpus[Int(next() % UInt64(corpus.count))] }
}

func readCorpus(_ path: String) -> [[UInt8]] {
    guard let d = opendir(path) else { return [] }
    defer { closedir(d) }
    var files: [[UInt8]] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard !name.hasPrefix(".") else { continue }
        guard let f = fopen(path + "/" + name, "rb") else { continue }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        fclose(f)
        files.append(bytes)
    }
    return files
}

func mutate(_ input: [UInt8], corpus: [[UInt8]], rng r: inout Rng) -> [UInt8] {
    var b = input
    for _ in 0..<(1 + Int(r.next() % 4)) {
        switch r.next() % 6 {
        case 0 where !b.isEmpty: b[Int(r.next() % UInt64(b.count))] ^= UInt8(1 << (r.next() % 8))
        case 1 where !b.isEmpty: b.removeLast(Int(r.next() % UInt64(b.count)))
        case 2: b += (0..<Int(r.next() % 64)).map { _ in UInt8(truncatingIfNeeded: r.next()) }
        case 3 where !b.isEmpty: b[Int(r.next() % UInt64(b.count))] = UInt8(truncatingIfNeeded: r.next())
        case 4: if let other = r.pick(corpus) { b = Array(b.prefix(Int(r.next() % 32))) + other.dropFirst(Int(r.next() % 16)) }
        default: b = (0..<Int(r.next() % 1600)).map { _ in UInt8(truncatingIfNeeded: r.next()) }
        }
    }
    return b
}

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
        var rng = Rng(state: args.count > 3 ? UInt64(args[3]) ?? 1 : 1)
        let corpus = readCorpus(dir)
        var depacketizer = VP8Depacketizer()
        var events = 0
        for input in corpus { events += FuzzHarness.rtpVP8(input, depacketizer: &depacketizer) }
        for _ in 0..<iterations {
            let input = mutate(rng.pick(corpus) ?? [], corpus: corpus, rng: &rng)
            events += FuzzHarness.rtpVP8(input, depacketizer: &depacketizer)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations; \(events) depacketizer events; no crash")
    }
}
#endif
