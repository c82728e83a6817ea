import OTBase

/// abs-send-time (http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time): 24-bit 6.18 fixed-point seconds.
public enum AbsSendTime {
    public static let uri = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    /// Encodes a time in microseconds (the field wraps every 64 s).
    public static func encode(micros: Int64) -> [UInt8] {
        let v = value(micros: micros)
        return [UInt8(v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)]
    }
    /// The 24-bit value for a time in microseconds.
    public static func value(micros: Int64) -> UInt32 {
        let m = ((micros % 64_000_000) + 64_000_000) % 64_000_000
        return UInt32(truncatingIfNeeded: (m << 18) / 1_000_000) & 0xFF_FFFF
    }
    /// The 24-bit value (units of 2^-18 s).
    public static func decode(_ value: ArraySlice<UInt8>) throws -> UInt32 {
        guard value.count == 3 else { throw WireError("abs-send-time is \(value.count) bytes, expected 3") }
        let s = value.startIndex
        return UInt32(value[s]) << 16 | UInt32(value[s + 1]) << 8 | UInt32(value[s + 2])
    }
}
