import OTBase

/// The media identification (mid) extension (RFC 8843 §15): an ASCII token.
public enum MidExtension {
    public static let uri = "urn:ietf:params:rtp-hdrext:sdes:mid"
    public static func encode(_ mid: String) throws -> [UInt8] {
        let bytes = Array(mid.utf8)
        guard (1...255).contains(bytes.count) else { throw WireError("mid must be 1...255 bytes") }
        return bytes
    }
    public static func decode(_ value: ArraySlice<UInt8>) throws -> String {
        guard !value.isEmpty, value.allSatisfy({ $0 >= 0x21 && $0 < 0x7F }) else { throw WireError("mid is empty or not printable ASCII") }
        return String(decoding: value, as: UTF8.self)
    }
}
