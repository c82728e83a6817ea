import OTBase

/// The Opus RTP payload format (RFC 7587): one Opus packet per RTP payload, a 48 kHz RTP clock
/// whatever the coded bandwidth, at most 120 ms per packet.
public enum OpusPayload {
    /// The RTP clock rate for Opus, always 48000.
    public static let clockRate = 48_000
    /// Payloads this short are DTX/comfort-noise frames (RFC 7587 §3.1.3) that a sender may skip.
    public static let dtxMaxLength = 2

    /// What the TOC byte (RFC 6716 §3.1) says about a packet.
    public struct PacketInfo: Equatable, Sendable {
        /// Configuration number 0...31 (mode, bandwidth, frame size).
        public var config: UInt8
        public var stereo: Bool
        /// Number of Opus frames in the packet.
        public var frameCount: Int
        /// Samples per frame at 48 kHz.
        public var samplesPerFrame: Int
        /// Duration in 48 kHz samples: the RTP timestamp increment this packet covers.
        public var samples: Int { frameCount * samplesPerFrame }
        /// SILK-only, hybrid or CELT-only coding.
        public var mode: Mode
        public enum Mode: Sendable { case silk, hybrid, celt }
    }

    /// Parses the TOC (and frame count for code 3) of an Opus packet. Throws `WireError` when the payload is empty,
    /// its framing is impossible, or it lasts over 120 ms.
    public static func packetInfo(_ payload: ArraySlice<UInt8>) throws -> PacketInfo {
        guard let toc = payload.first else { throw WireError("empty Opus payload") }
        let config = toc >> 3
        let samplesPerFrame: Int
        let mode: PacketInfo.Mode
        switch config {
        case 0...11: mode = .silk; samplesPerFrame = [480, 960, 1920, 2880][Int(config % 4)]
        case 12...15: mode = .hybrid; samplesPerFrame = [480, 960][Int(config % 2)]
        default: mode = .celt; samplesPerFrame = [120, 240, 480, 960][Int(config % 4)]
        }
        let frames: Int
        switch toc & 0x03 {
        case 0: frames = 1
        case 1:
            guard (payload.count - 1) % 2 == 0 else { throw WireError("Opus code-1 packet with odd data length") }
            frames = 2
        case 2:
            guard payload.count >= 2 else { throw WireError("Opus code-2 packet truncated") }
            frames = 2
        default:
            guard payload.count >= 2 else { throw WireError("Opus code-3 packet without frame count") }
            frames = Int(payload[payload.startIndex + 1] & 0x3F)
            guard frames > 0 else { throw WireError("Opus code-3 packet with zero frames") }
        }
        guard frames * samplesPerFrame <= 5760 else { throw WireError("Opus packet longer than 120 ms") }
        return PacketInfo(config: config, stereo: toc & 0x04 != 0, frameCount: frames,
                          samplesPerFrame: samplesPerFrame, mode: mode)
    }

    /// True for DTX/comfort-noise payloads a sender need not transmit.
    public static func isDTX(_ payload: ArraySlice<UInt8>) -> Bool { payload.count <= dtxMaxLength }
}
