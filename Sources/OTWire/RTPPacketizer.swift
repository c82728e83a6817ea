import OTBase

/// Splits one encoded frame into RTP payloads (the RTP marker goes on the last).
public protocol RTPPacketizer: Sendable {
    /// Bytes available per RTP payload.
    var maxPayloadSize: Int { get set }
    /// Packetizes one frame; `emit` gets each payload (valid only during the call) and whether it ends the frame.
    /// `nonReference` and `layer` are what the encoder said of the frame (formats without such fields ignore them).
    /// Returns the number of payloads, 0 for an empty frame.
    @discardableResult
    mutating func packetize(_ frame: UnsafeRawBufferPointer, nonReference: Bool, layer: TemporalLayerInfo?,
                            emit: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows -> Int
}

extension RTPPacketizer {
    /// Packetizes a frame of no particular layer.
    @discardableResult
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, emit: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows -> Int {
        try packetize(frame, nonReference: false, layer: nil, emit: emit)
    }
}
