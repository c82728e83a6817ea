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
}

func readCorpus(_ path: String) -> [[UInt8]] {
    guard let d = opendir(path) else { return [] }
    defer { closedir(d) }
    var files: [[UInt8]] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard !name.hasPrefix("."), let f = fopen(path + "/" + name, "rb") else { continue }
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
        var rng = Rng(state: args.count > 2 ? UInt64(args[2]) ?? 1 : 1)
        let dirs = args.count > 3 ? Array(args[3...]) : ["Fuzz/corpus/stun", "Fuzz/corpus/rtcp", "Fuzz/corpus/sdp"]
        let corpus = dirs.flatMap(readCorpus)
        guard !corpus.isEmpty else { print("no corpus in \(dirs)"); exit(1) }
        for input in corpus { fuzzWire(input) }
        for _ in 0..<iterations {
            var b = corpus[Int(rng.next() % UInt64(corpus.count))]
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                switch rng.next() % 6 {
                case 0 where !b.isEmpty: b[Int(rng.next() % UInt64(b.count))] ^= UInt8(1 << (rng.next() % 8))
                case 1 where !b.isEmpty: b.removeLast(Int(rng.next() % UInt64(b.count)))
                case 2: b.insert(UInt8(truncatingIfNeeded: rng.next()), at: Int(rng.next() % UInt64(b.count + 1)))
                case 3 where !b.isEmpty: b[Int(rng.next() % UInt64(b.count))] = [0x20, 0x3A, 0x2F, 0x3D, 0x0A, 0][Int(rng.next() % 6)]
                case 4:
                    let other = corpus[Int(rng.next() % UInt64(corpus.count))]
                    b = Array(b.prefix(Int(rng.next() % UInt64(b.count + 1)))) + other.dropFirst(Int(rng.next() % UInt64(other.count + 1)))
                default: b = (0..<Int(rng.next() % 600)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                }
            }
            fuzzWire(b)
        }
        print("replayed \(corpus.count) corpus files and \(iterations) mutations through STUN/RTCP/SDP; no crash")
    }
}
#endif
