import Glibc
import OTBase

/// Seeded mutations of a corpus for the fuzz drivers (`Fuzz/`) and the fuzz tests: bit flips, truncation,
/// random tails, byte overwrites (random or a text token), insertions, splices with another input, and
/// wholly random inputs. The same seed gives the same sequence, so a failing input can be replayed.
public struct FuzzMutator {
    public var corpus: [[UInt8]]
    public var random: SeededRandom
    /// Bytes that often change how text formats (SDP, JSON, HTTP) parse.
    public var tokens: [UInt8] = [0x20, 0x3A, 0x2F, 0x3D, 0x0A, 0x0D, 0x22, 0x7B, 0x7D, 0]
    /// Extreme numbers, written over a run of digits (or inserted): what overflows conversions and range checks.
    public var numbers: [String] = ["1e19", "1e300", "-1e19", "1e400", "nan", "NaN", "inf", "-inf", "Infinity", "-1", "-0", "+2",
                                    "0x10", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                                    "18446744073709551616", "99999999999999999999999999", "4294967296", "65536", "2.5e-324",
                                    "1.7976931348623157e308", "0.0000001", "00000000000000000001", "253402300800"]
    /// The longest wholly random input.
    public var maxRandomLength: Int

    public init(corpus: [[UInt8]], seed: UInt64, maxRandomLength: Int = 1600) {
        self.corpus = corpus; random = SeededRandom(seed: seed); self.maxRandomLength = maxRandomLength
    }

    /// A corpus entry (or an empty input) with one to four mutations applied.
    public mutating func next() -> [UInt8] { next(from: pick()) }

    /// `input` with one to four mutations applied (splices take their second half from the corpus).
    public mutating func next(from input: [UInt8]) -> [UInt8] {
        var b = input
        for _ in 0...below(4) { mutate(&b) }
        return b
    }

    private mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(random.next() % UInt64(n)) }
    private mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: random.next()) }
    private mutating func pick() -> [UInt8] { corpus.isEmpty ? [] : corpus[below(corpus.count)] }

    private mutating func mutate(_ b: inout [UInt8]) {
        switch below(9) {
        case 8: putNumber(&b)
        case 0 where !b.isEmpty: b[below(b.count)] ^= UInt8(1 << below(8))
        case 1 where !b.isEmpty: b.removeLast(below(b.count))
        case 2: for _ in 0..<below(64) { b.append(byte()) }
        case 3 where !b.isEmpty: b[below(b.count)] = byte()
        case 4 where !b.isEmpty: b[below(b.count)] = tokens[below(tokens.count)]
        case 5: b.insert(byte(), at: below(b.count + 1))
        case 6:
            let other = pick()
            b = Array(b.prefix(below(b.count + 1))) + other.dropFirst(below(other.count + 1))
        default: b = (0..<below(maxRandomLength)).map { _ in byte() }
        }
    }

    /// Replaces the run of ASCII digits around a random position with an extreme number (inserts it when the input
    /// has no digit there).
    private mutating func putNumber(_ b: inout [UInt8]) {
        let n = Array(numbers[below(numbers.count)].utf8)
        var i = below(b.count + 1)
        let isDigit: (UInt8) -> Bool = { $0 >= 0x30 && $0 <= 0x39 }
        if let d = b.indices.first(where: { $0 >= i && isDigit(b[$0]) }) { i = d }
        var j = i
        while j < b.count && isDigit(b[j]) { j += 1 }
        b.replaceSubrange(i..<j, with: n)
    }

    /// Every regular file of `directory` (names starting with "." skipped), in name order; empty when the
    /// directory cannot be read.
    public static func readCorpus(directory: String) -> [[UInt8]] {
        guard let d = opendir(directory) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted().compactMap { readFile(directory + "/" + $0) }
    }

    private static func readFile(_ path: String) -> [UInt8]? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        return bytes
    }
}
