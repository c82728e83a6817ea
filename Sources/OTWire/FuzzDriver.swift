/// What the fuzz drivers (`Fuzz/`) share: their command-line arguments, the seeded replay of a corpus and, in a
/// libFuzzer build (`-sanitize=fuzzer -DLIBFUZZER`), the hand-over to libFuzzer.
public enum FuzzDriver {
    /// Command-line argument `index` as a `T`, or `defaultValue` when it is absent or does not parse.
    public static func argument<T: LosslessStringConvertible>(_ index: Int, default defaultValue: T) -> T {
        let args = CommandLine.arguments
        return args.count > index ? T(args[index]) ?? defaultValue : defaultValue
    }

    /// Feeds every input of `corpus` to `body`, then `iterations` seeded mutations of it (`FuzzMutator`).
    public static func replay(corpus: [[UInt8]], iterations: Int, seed: UInt64, maxRandomLength: Int = 1600,
                              _ body: ([UInt8]) -> Void) {
        var mutator = FuzzMutator(corpus: corpus, seed: seed, maxRandomLength: maxRandomLength)
        for input in corpus { body(input) }
        for _ in 0..<iterations { body(mutator.next()) }
    }
}

#if LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
private func llvmFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                                 _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                                 _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// The driver's per-input function (libFuzzer's C callback carries no context).
nonisolated(unsafe) private var fuzzTarget: ([UInt8]) -> Void = { _ in }

/// libFuzzer's callback: one input to `fuzzTarget` (exported under the name libFuzzer's runtime links against).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzTarget(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

extension FuzzDriver {
    /// Hands control to libFuzzer, which calls `body` with each input. A driver calls it from its `main`: SwiftPM
    /// links an executable's `main` as `<module>_main`, which the driver exports with `@_cdecl`.
    public static func runLibFuzzer(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                    _ body: @escaping ([UInt8]) -> Void) -> Int32 {
        fuzzTarget = body
        var c = argc, v = argv
        return llvmFuzzerRunDriver(&c, &v) { fuzzOneInput($0, $1) }
    }
}
#endif
