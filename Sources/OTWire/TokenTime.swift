import FoundationEssentials
import OTBase

/// Times carried by tokens (`exp`, `iat`, `expire_time`, `create_time`): whole seconds since 1970 between 0 and
/// the end of year 9999. Anything else (negative, huge, fractional exponents, `nan`, `inf`, signs, hex) is not a
/// time, so a token naming one is refused; no conversion can trap.
public enum TokenTime {
    /// 9999-12-31T23:59:59Z.
    public static let latest: Int64 = 253_402_300_799

    /// A JSON integer, a finite JSON number (fraction dropped) or a string `seconds`, in range; else nil.
    public static func seconds(_ v: JSONValue?) -> Int64? {
        switch v {
        case .int(let i)?: return (0...latest).contains(i) ? i : nil
        case .double(let d)?: return d.isFinite && d >= 0 && d <= Double(latest) ? Int64(d.rounded(.towardZero)) : nil
        case .string(let s)?: return seconds(s)
        default: return nil
        }
    }

    /// ASCII digits with an optional fraction (`1796100000` or `1796100000.5`; at most 12 integer digits), in range;
    /// else nil.
    public static func seconds(_ s: String) -> Int64? {
        let u = Array(s.utf8)
        let dot = u.firstIndex(of: UInt8(ascii: "."))
        let whole = u[..<(dot ?? u.count)]
        let isDigit: (UInt8) -> Bool = { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard !whole.isEmpty, whole.count <= 12, whole.allSatisfy(isDigit) else { return nil }
        if let dot { guard dot + 1 < u.count, u[(dot + 1)...].count <= 20, u[(dot + 1)...].allSatisfy(isDigit) else { return nil } }
        var n: Int64 = 0
        for d in whole { n = n * 10 + Int64(d - UInt8(ascii: "0")) }
        return n <= latest ? n : nil
    }
}
