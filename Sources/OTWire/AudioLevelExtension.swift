import OTBase

/// Client-to-mixer audio level (RFC 6464): voice-activity flag and level in -dBov (0...127).
public enum AudioLevelExtension {
    public static let uri = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"
    public static func encode(voiceActivity: Bool, levelDBov: UInt8) -> [UInt8] {
        [(voiceActivity ? 0x80 : 0) | min(levelDBov, 127)]
    }
    public static func decode(_ value: ArraySlice<UInt8>) throws -> (voiceActivity: Bool, levelDBov: UInt8) {
        guard let b = value.first else { throw WireError("audio level extension is empty") }
        return (b & 0x80 != 0, b & 0x7F)
    }
}
