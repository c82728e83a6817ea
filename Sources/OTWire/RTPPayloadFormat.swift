import OTBase

/// Audio or video: the kind of an m-section and of the formats it can carry.
public enum MediaKind: String, Sendable, Equatable {
    case audio, video
}

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

/// Counters of a depacketizer.
public struct DepacketizerStats: Equatable, Sendable {
    public var framesDelivered = 0
    public var framesDropped = 0
    public var malformedPackets = 0
    public var latePackets = 0
    public var duplicatePackets = 0
    public var keyframeRequests = 0
    /// Times every packet from the next expected on was here and still made no frame (given up like a loss).
    public var unassemblable = 0
    public init() {}
}

/// Why a depacketizer asks the sender for a keyframe (sent as RTCP PLI by the RTP session).
public enum KeyframeRequestReason: Equatable, Sendable {
    /// Packets went missing, so the frames that follow cannot be decoded.
    case packetLoss(missing: Int)
    /// The stream started (or restarted) with frames that need earlier ones.
    case noKeyframeYet
    /// Such frames are still being dropped long after the previous request.
    case stillWaiting
}

/// An encoded frame reassembled from RTP packets by a depacketizer.
public struct ReceivedEncodedFrame: Sendable {
    /// The codec bitstream of the frame (valid until the next call into the depacketizer unless copied).
    public var data: ArraySlice<UInt8>
    public var rtpTimestamp: UInt32
    /// Decodable on its own (audio frames always are).
    public var isKeyframe: Bool
    /// Width and height read from a keyframe's header, when the format carries them.
    public var keyframeSize: (width: Int, height: Int)?
    /// The format's frame id (VP8 picture id), when the payload carries one.
    public var pictureId: UInt16?
    public var temporalLayer: UInt8?
    /// Extended sequence numbers of the first and last packet.
    public var firstSequence: Int64
    public var lastSequence: Int64
    public init(data: ArraySlice<UInt8>, rtpTimestamp: UInt32, isKeyframe: Bool, keyframeSize: (width: Int, height: Int)? = nil,
                pictureId: UInt16? = nil, temporalLayer: UInt8? = nil, firstSequence: Int64, lastSequence: Int64) {
        self.data = data; self.rtpTimestamp = rtpTimestamp; self.isKeyframe = isKeyframe; self.keyframeSize = keyframeSize
        self.pictureId = pictureId; self.temporalLayer = temporalLayer
        self.firstSequence = firstSequence; self.lastSequence = lastSequence
    }
}

/// What a depacketizer reports for the packets fed to it.
public enum DepacketizerEvent: Sendable {
    case frame(ReceivedEncodedFrame)
    case keyframeRequest(KeyframeRequestReason)
}

/// Reassembles frames of one format from RTP packets (sans-IO; frames come in decode order).
public protocol RTPDepacketizer: Sendable {
    /// Feeds one RTP packet of the format; `deliver` receives complete frames and keyframe requests.
    mutating func insert(_ packet: RTPPacket, deliver: (DepacketizerEvent) -> Void)
    /// Whether losing the packet with `sequence` for good leaves what comes next undecodable.
    func needs(_ sequence: UInt16) -> Bool
    /// Whether frames are being dropped until a keyframe arrives.
    var isWaitingForKeyframe: Bool { get }
    /// The first (extended) sequence number missing before packets held, which the stream waits on; nil when none.
    var firstMissing: Int64? { get }
    var stats: DepacketizerStats { get }
}

/// How one codec's frames travel in RTP: the seam between a codec and the RTP, SDP, router and E2EE code, which
/// ask the format instead of knowing the codec. VP8 (RFC 7741) and Opus (RFC 7587) are the first implementations.
public protocol RTPPayloadFormat: Sendable {
    associatedtype Packetizer: RTPPacketizer
    associatedtype Depacketizer: RTPDepacketizer
    /// The encoding name of `a=rtpmap` ("VP8", "opus"); compared case-insensitively.
    var name: String { get }
    var kind: MediaKind { get }
    /// The RTP clock rate (Hz).
    var clockRate: UInt32 { get }
    /// Audio channels announced in `a=rtpmap` (nil for video).
    var channels: UInt16? { get }
    /// The `a=fmtp` parameters we announce (nil: none).
    var fmtp: String? { get }
    /// The RTCP feedback we announce for it.
    var rtcpFeedback: [String] { get }
    /// The payload type we offer it under (a dynamic one, 96...127).
    var preferredPayloadType: UInt8 { get }
    /// Whether a remote description's codec is this format (name, clock rate and, for formats with variants, fmtp).
    func matches(_ codec: SDPCodec) -> Bool
    /// True when `payload`, an RTP payload of this format, is the first packet of a keyframe: a receiver that
    /// starts from it can decode (the router forwards from it to a new subscriber).
    func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool
    /// The frame id the payload carries (VP8: the picture id), nil when none; consecutive frames have consecutive ids.
    func frameID(_ payload: ArraySlice<UInt8>) -> UInt16?
    /// Bytes at the start of an encoded frame left in clear by end-to-end encryption, so receivers and the router
    /// can read the frame's header before decrypting (capped by the caller at the frame's length).
    func clearPrefixLength(isKeyframe: Bool) -> Int
    /// The payload bytes (the format's payload header + codec data) that fit an `mtu`-byte datagram after IP/UDP,
    /// an RTP header of `rtpHeaderLength` bytes and `srtpOverhead` bytes of SRTP tag: what its packetizer is given.
    func maxPayloadSize(mtu: Int, rtpHeaderLength: Int, srtpOverhead: Int) -> Int
    func makePacketizer(maxPayloadSize: Int) -> Packetizer
    /// A depacketizer that waits up to `reorderWindow` packets past a missing one before giving up on it.
    func makeDepacketizer(reorderWindow: Int) -> Depacketizer
}

extension RTPPayloadFormat {
    public var channels: UInt16? { nil }
    public var fmtp: String? { nil }
    public func matches(_ codec: SDPCodec) -> Bool {
        codec.name.lowercased() == name.lowercased() && codec.clockRate == clockRate
    }
    /// IPv4 + UDP (28 bytes), the RTP header and the SRTP tag come off the MTU; at least 8 bytes are left.
    public func maxPayloadSize(mtu: Int, rtpHeaderLength: Int, srtpOverhead: Int) -> Int {
        max(mtu - 28 - rtpHeaderLength - srtpOverhead, 8)
    }
    /// The codec line for an offer or an answer under payload type `pt`.
    public func sdpCodec(payloadType pt: UInt8) -> SDPCodec {
        SDPCodec(payloadType: pt, name: name, clockRate: clockRate, channels: channels, fmtp: fmtp, rtcpFeedback: rtcpFeedback)
    }
}

/// The payload formats libotsession knows, and queries on them for code that has only a format and bytes.
public enum PayloadFormats {
    public static let vp8 = VP8PayloadFormat()
    public static let vp9 = VP9PayloadFormat()
    public static let opus = OpusPayloadFormat()
    /// Every known format, in our order of preference per kind.
    public static let all: [any RTPPayloadFormat] = [opus, vp8, vp9]
    /// The known video formats, in our order of preference (VP8 first: every WebRTC peer has it).
    public static let video: [any RTPPayloadFormat] = all.filter { $0.kind == .video }

    /// The known format a remote codec line describes, or nil.
    public static func format(for codec: SDPCodec) -> (any RTPPayloadFormat)? {
        all.first { $0.matches(codec) }
    }

    /// The known format with this encoding name (case-insensitive), or nil.
    public static func format(named name: String) -> (any RTPPayloadFormat)? {
        let n = name.lowercased()
        return all.first { $0.name.lowercased() == n }
    }

    /// True when `payload` (an RTP payload of `format`) starts a keyframe. For routers: no allocation.
    public static func isKeyframeStart(_ format: any RTPPayloadFormat, _ payload: ArraySlice<UInt8>) -> Bool {
        format.isKeyframeStart(payload)
    }

    /// True when the plain RTP packet `packet` carries the first packet of a keyframe of `format`; false for bytes
    /// that are not RTP. Reads the header in place (no allocation).
    public static func isKeyframeStart(_ format: any RTPPayloadFormat, rtpPacket packet: [UInt8]) -> Bool {
        guard let range = RTPPacket.payloadRange(in: packet) else { return false }
        return format.isKeyframeStart(packet[range])
    }
}

extension RTPPacket {
    /// Where the payload of a serialized RTP packet lies (after CSRCs and extensions, before padding), without
    /// parsing the rest; nil when `p` is not a well-formed RTP packet.
    public static func payloadRange(in p: [UInt8]) -> Range<Int>? {
        guard p.count >= 12, p[0] >> 6 == 2 else { return nil }
        var start = 12 + 4 * Int(p[0] & 0x0F)
        if p[0] & 0x10 != 0 {
            guard p.count >= start + 4 else { return nil }
            start += 4 + 4 * (Int(p[start + 2]) << 8 | Int(p[start + 3]))
        }
        var end = p.count
        if p[0] & 0x20 != 0 {
            guard let pad = p.last, pad > 0 else { return nil }
            end -= Int(pad)
        }
        guard start <= end else { return nil }
        return start..<end
    }
}

/// The 7- or 15-bit picture id of the VP8 and VP9 payload descriptors: one byte, or two with the M bit (0x80) set.
enum DescriptorPictureID {
    static func write(_ pid: UInt16, fifteenBit: Bool, into out: inout [UInt8]) {
        if fifteenBit {
            out.append(0x80 | UInt8(truncatingIfNeeded: pid >> 8) & 0x7F)
            out.append(UInt8(truncatingIfNeeded: pid))
        } else {
            out.append(UInt8(truncatingIfNeeded: pid) & 0x7F)
        }
    }

    /// Reads it (`what`: how errors name its first and second byte); returns the id and whether it had 15 bits.
    static func read(_ r: inout ByteReader, _ what: StaticString, _ what15: StaticString) throws -> (UInt16, Bool) {
        let p0 = try r.u8(what)
        guard p0 & 0x80 != 0 else { return (UInt16(p0), false) }
        return (UInt16(p0 & 0x7F) << 8 | UInt16(try r.u8(what15)), true)
    }
}

// MARK: VP8

/// VP8 (RFC 7741): frames split by `VP8Packetizer` behind a payload descriptor with a 15-bit picture id.
public struct VP8PayloadFormat: RTPPayloadFormat {
    public init() {}
    public var name: String { "VP8" }
    public var kind: MediaKind { .video }
    public var clockRate: UInt32 { 90_000 }
    public var rtcpFeedback: [String] { ["nack", "nack pli", "ccm fir", "transport-cc"] }
    public var preferredPayloadType: UInt8 { 96 }
    public func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool {
        VP8PayloadReader.read(payload)?.0.startsKeyframe ?? false
    }
    public func frameID(_ payload: ArraySlice<UInt8>) -> UInt16? {
        (try? VP8PayloadDescriptor.parse(payload))?.0.pictureId
    }
    /// The VP8 payload header: 10 bytes of a keyframe (with its size), 3 of a delta frame (RFC 6386 §9.1).
    public func clearPrefixLength(isKeyframe: Bool) -> Int { isKeyframe ? 10 : 3 }
    /// Starts at a random picture id.
    public func makePacketizer(maxPayloadSize: Int) -> VP8Packetizer {
        VP8Packetizer(maxPayloadSize: maxPayloadSize, initialPictureId: UInt16.random(in: 0...0x7FFF))
    }
    public func makeDepacketizer(reorderWindow: Int) -> VP8Depacketizer {
        VP8Depacketizer(reorderWindow: reorderWindow, capacity: max(512, 2 * reorderWindow))
    }
}

// MARK: Opus

/// Opus (RFC 7587): one Opus packet per RTP payload, 48 kHz clock, two channels announced, in-band FEC.
public struct OpusPayloadFormat: RTPPayloadFormat {
    public init() {}
    public var name: String { "opus" }
    public var kind: MediaKind { .audio }
    public var clockRate: UInt32 { UInt32(OpusPayload.clockRate) }
    public var channels: UInt16? { 2 }
    public var fmtp: String? { "minptime=10;useinbandfec=1" }
    public var rtcpFeedback: [String] { ["transport-cc"] }
    public var preferredPayloadType: UInt8 { 111 }
    /// Every Opus packet decodes on its own.
    public func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool { !payload.isEmpty }
    public func frameID(_ payload: ArraySlice<UInt8>) -> UInt16? { nil }
    /// The TOC byte (RFC 6716 §3.1).
    public func clearPrefixLength(isKeyframe: Bool) -> Int { 1 }
    public func makePacketizer(maxPayloadSize: Int) -> OpusPacketizer { OpusPacketizer(maxPayloadSize: maxPayloadSize) }
    public func makeDepacketizer(reorderWindow: Int) -> OpusDepacketizer { OpusDepacketizer() }
}

/// One Opus packet is one RTP payload; a frame longer than `maxPayloadSize` is not sent (returns 0).
public struct OpusPacketizer: RTPPacketizer {
    public var maxPayloadSize: Int
    private var scratch: [UInt8] = []
    public init(maxPayloadSize: Int = 1200) { self.maxPayloadSize = maxPayloadSize }
    @discardableResult
    public mutating func packetize(_ frame: UnsafeRawBufferPointer, nonReference: Bool, layer: TemporalLayerInfo?,
                                   emit: (ArraySlice<UInt8>, Bool) throws -> Void) rethrows -> Int {
        guard frame.count > 0, frame.count <= maxPayloadSize else { return 0 }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: frame)
        try emit(scratch[...], true)
        return 1
    }
}

/// Each well-formed Opus payload is a frame of its own; malformed ones (bad TOC framing) are dropped.
public struct OpusDepacketizer: RTPDepacketizer {
    private var unwrapper = RTPSequenceTracker()
    public private(set) var stats = DepacketizerStats()
    public init() {}
    public mutating func insert(_ packet: RTPPacket, deliver: (DepacketizerEvent) -> Void) {
        guard (try? OpusPayload.packetInfo(packet.payload)) != nil else { stats.malformedPackets += 1; return }
        if unwrapper.record(packet.sequenceNumber) == .duplicate { stats.duplicatePackets += 1; return }
        let seq = unwrapper.extend(packet.sequenceNumber)
        stats.framesDelivered += 1
        deliver(.frame(ReceivedEncodedFrame(data: packet.payload, rtpTimestamp: packet.timestamp, isKeyframe: true,
                                            firstSequence: seq, lastSequence: seq)))
    }
    /// Audio frames are independent: no loss leaves later ones undecodable.
    public func needs(_ sequence: UInt16) -> Bool { false }
    public var isWaitingForKeyframe: Bool { false }
    public var firstMissing: Int64? { nil }
}
