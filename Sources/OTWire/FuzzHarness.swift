import OTBase

/// Entry points that feed arbitrary bytes through the receive-side parsers, for the fuzz target
/// (`Fuzz/`) and the seeded fuzz tests. Every input must return normally: parsers throw, never trap.
public enum FuzzHarness {
    /// Parses `data` as RTP; on success looks up extensions, parses the VP8 descriptor and Opus TOC, and
    /// feeds the packet to `depacketizer`. Returns the number of events the depacketizer produced.
    @discardableResult
    public static func rtpVP8(_ data: [UInt8], depacketizer: inout VP8Depacketizer) -> Int {
        _ = try? VP8PayloadDescriptor.parse(data[...])
        _ = VP8FrameHeader.keyframeSize(data[...])
        _ = try? OpusPayload.packetInfo(data[...])
        guard let packet = try? RTPPacket(parsing: data) else { return 0 }
        for e in packet.extensions.elements {
            _ = try? AbsSendTime.decode(e.value)
            _ = try? TransportWideSequenceNumber.decode(e.value)
            _ = try? AudioLevelExtension.decode(e.value)
            _ = try? MidExtension.decode(e.value)
        }
        _ = packet.extensions.value(id: 1)
        var events = 0
        depacketizer.insert(packet) { event in
            events += 1
            if case .frame(let f) = event { _ = VP8FrameHeader.keyframeSize(f.data) }
        }
        return events
    }
}
