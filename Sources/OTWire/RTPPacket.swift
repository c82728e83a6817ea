import OTBase

/// An RTP packet (RFC 3550) viewed over a byte buffer: the fixed header, CSRCs,
/// the RFC 8285 header-extension block, payload and padding.
///
/// Parsing does not copy: `payload` and the extension block are slices of the input.
public struct RTPPacket: Sendable {
    public var marker: Bool
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var csrcs: [UInt32]
    /// The header-extension block (RFC 8285 one-byte or two-byte form, or any other profile).
    public var extensions: RTPHeaderExtensions
    public var payload: ArraySlice<UInt8>
    /// Padding bytes after the payload (the last one holds the count); 0 for none.
    public var paddingLength: Int

    public init(marker: Bool = false, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32,
                csrcs: [UInt32] = [], extensions: RTPHeaderExtensions = RTPHeaderExtensions(),
                payload: ArraySlice<UInt8> = [], paddingLength: Int = 0) {
        self.marker = marker; self.payloadType = payloadType & 0x7F; self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp; self.ssrc = ssrc; self.csrcs = csrcs; self.extensions = extensions
        self.payload = payload; self.paddingLength = paddingLength
    }

    /// Size of the fixed header, CSRCs and extension block.
    public var headerLength: Int { 12 + 4 * csrcs.count + extensions.encodedLength }

    /// Parses a packet; throws `WireError` on anything malformed (never traps).
    public init(parsing bytes: ArraySlice<UInt8>) throws {
        var r = ByteReader(bytes)
        let b0 = try r.u8("RTP header")
        guard b0 >> 6 == 2 else { throw WireError("RTP version \(b0 >> 6), expected 2") }
        let b1 = try r.u8("RTP header")
        marker = b1 & 0x80 != 0
        payloadType = b1 & 0x7F
        sequenceNumber = try r.u16("RTP sequence number")
        timestamp = try r.u32("RTP timestamp")
        ssrc = try r.u32("RTP SSRC")
        let csrcCount = Int(b0 & 0x0F)
        var list: [UInt32] = []
        if csrcCount > 0 {
            list.reserveCapacity(csrcCount)
            for _ in 0..<csrcCount { list.append(try r.u32("RTP CSRC")) }
        }
        csrcs = list
        if b0 & 0x10 != 0 {
            let profile = try r.u16("RTP extension profile")
            let words = Int(try r.u16("RTP extension length"))
            let data = try r.take(words * 4, "RTP extension block")
            extensions = try RTPHeaderExtensions(profile: profile, data: data)
        } else {
            extensions = RTPHeaderExtensions()
        }
        var body = r.rest()
        paddingLength = 0
        if b0 & 0x20 != 0 {
            guard let last = body.last else { throw WireError("RTP padding bit set but no padding") }
            let count = Int(last)
            guard count > 0, count <= body.count else { throw WireError("RTP padding count \(count) exceeds \(body.count) bytes") }
            paddingLength = count
            body = body.dropLast(count)
        }
        payload = body
    }

    /// Parses a whole buffer.
    public init(parsing bytes: [UInt8]) throws { try self.init(parsing: bytes[...]) }

    /// Appends the serialized packet to `out` (reuse `out` with `removeAll(keepingCapacity:)` to avoid allocation).
    public func write(into out: inout [UInt8]) {
        writeHeader(into: &out, padded: paddingLength > 0)
        out.append(contentsOf: payload)
        if paddingLength > 0 {
            for _ in 0..<(paddingLength - 1) { out.append(0) }
            out.append(UInt8(truncatingIfNeeded: paddingLength))
        }
    }

    /// The serialized packet as a new array.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(headerLength + payload.count + paddingLength)
        write(into: &out)
        return out
    }

    /// Appends only the header (fixed part, CSRCs, extensions); the caller appends the payload.
    public func writeHeader(into out: inout [UInt8], padded: Bool = false) {
        let csrcCount = min(csrcs.count, 15)
        var b0: UInt8 = 0x80 | UInt8(csrcCount)
        if padded { b0 |= 0x20 }
        if !extensions.isEmpty { b0 |= 0x10 }
        out.append(b0)
        out.append((marker ? 0x80 : 0) | (payloadType & 0x7F))
        out.append(UInt8(sequenceNumber >> 8)); out.append(UInt8(truncatingIfNeeded: sequenceNumber))
        Self.append32(timestamp, to: &out)
        Self.append32(ssrc, to: &out)
        for c in csrcs.prefix(csrcCount) { Self.append32(c, to: &out) }
        if !extensions.isEmpty { extensions.write(into: &out) }
    }

    @inline(__always) static func append32(_ v: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: v >> 24)); out.append(UInt8(truncatingIfNeeded: v >> 16))
        out.append(UInt8(truncatingIfNeeded: v >> 8)); out.append(UInt8(truncatingIfNeeded: v))
    }
}

/// One header-extension element: an id negotiated in SDP (`a=extmap`) and its value.
public struct RTPHeaderExtensionElement: Equatable, Sendable {
    public var id: UInt8
    public var value: ArraySlice<UInt8>
    public init(id: UInt8, value: ArraySlice<UInt8>) { self.id = id; self.value = value }
}

/// The RTP header-extension block. RFC 8285 one-byte (profile 0xBEDE) and two-byte (0x100x)
/// forms are validated on parse and can be searched by id; other profiles are kept as opaque bytes.
public struct RTPHeaderExtensions: Sendable, Equatable {
    /// The one-byte-header profile.
    public static let oneByteProfile: UInt16 = 0xBEDE
    /// The two-byte-header profile (the low 4 bits are "appbits").
    public static let twoByteProfile: UInt16 = 0x1000

    public private(set) var profile: UInt16
    /// The block's bytes after the 4-byte profile/length word, padded to a multiple of 4.
    public private(set) var data: ArraySlice<UInt8>

    /// No extension block.
    public init() { profile = 0; data = [] }

    /// A block as found on the wire; validates RFC 8285 forms.
    public init(profile: UInt16, data: ArraySlice<UInt8>) throws {
        guard data.count % 4 == 0 else { throw WireError("RTP extension block is \(data.count) bytes, not a multiple of 4") }
        self.profile = profile; self.data = data
        if isOneByte || isTwoByte {
            var error: WireError?
            Self.walk(data, oneByte: isOneByte) { _, _ in true } onError: { error = $0 }
            if let error { throw error }
        }
    }

    /// Builds a block from elements: the one-byte form when every id is 1...14 and every value 1...16 bytes,
    /// otherwise the two-byte form. Throws on ids outside 1...255 or values over 255 bytes.
    public init(_ elements: [RTPHeaderExtensionElement]) throws {
        let oneByte = elements.allSatisfy { (1...14).contains($0.id) && (1...16).contains($0.value.count) }
        var out: [UInt8] = []
        for e in elements {
            guard e.id != 0, e.value.count <= 255 else { throw WireError("RTP extension id \(e.id) / length \(e.value.count) not encodable") }
            if oneByte {
                out.append(e.id << 4 | UInt8(e.value.count - 1))
            } else {
                out.append(e.id); out.append(UInt8(e.value.count))
            }
            out.append(contentsOf: e.value)
        }
        while out.count % 4 != 0 { out.append(0) }
        profile = elements.isEmpty ? 0 : (oneByte ? Self.oneByteProfile : Self.twoByteProfile)
        data = out[...]
    }

    public var isEmpty: Bool { profile == 0 && data.isEmpty }
    public var isOneByte: Bool { profile == Self.oneByteProfile }
    public var isTwoByte: Bool { profile & 0xFFF0 == Self.twoByteProfile }
    /// Bytes this block takes in the header, including the profile/length word.
    public var encodedLength: Int { isEmpty ? 0 : 4 + data.count }

    /// The value of the element with `id`, or nil (also nil for non-RFC 8285 blocks).
    public func value(id: UInt8) -> ArraySlice<UInt8>? {
        guard isOneByte || isTwoByte else { return nil }
        var found: ArraySlice<UInt8>?
        Self.walk(data, oneByte: isOneByte) { eid, value in
            if eid == id { found = value; return false }
            return true
        } onError: { _ in }
        return found
    }

    /// Replaces the value of element `id` in place with one of the same length (e.g. a new abs-send-time or
    /// transport-wide sequence number in a block built once per stream): no allocation when the block's
    /// storage is not shared. Throws when the element is absent or the length differs.
    public mutating func overwrite<C: Collection>(id: UInt8, with value: C) throws where C.Element == UInt8 {
        guard let old = self.value(id: id) else { throw WireError("RTP extension id \(id) not present") }
        guard old.count == value.count else {
            throw WireError("RTP extension id \(id) holds \(old.count) bytes, new value has \(value.count)")
        }
        var i = old.startIndex
        for b in value { data[i] = b; i += 1 }
    }

    /// All elements in order.
    public var elements: [RTPHeaderExtensionElement] {
        guard isOneByte || isTwoByte else { return [] }
        var list: [RTPHeaderExtensionElement] = []
        Self.walk(data, oneByte: isOneByte) { list.append(RTPHeaderExtensionElement(id: $0, value: $1)); return true } onError: { _ in }
        return list
    }

    func write(into out: inout [UInt8]) {
        out.append(UInt8(profile >> 8)); out.append(UInt8(truncatingIfNeeded: profile))
        let words = data.count / 4
        out.append(UInt8(truncatingIfNeeded: words >> 8)); out.append(UInt8(truncatingIfNeeded: words))
        out.append(contentsOf: data)
    }

    /// Visits elements; `visit` returns false to stop.
    private static func walk(_ data: ArraySlice<UInt8>, oneByte: Bool,
                             visit: (UInt8, ArraySlice<UInt8>) -> Bool, onError: (WireError) -> Void) {
        var i = data.startIndex
        while i < data.endIndex {
            let b = data[i]
            if b == 0 { i += 1; continue }  // padding
            let id: UInt8, length: Int, header: Int
            if oneByte {
                id = b >> 4
                if id == 15 { return }  // reserved: stop processing (RFC 8285 §4.2)
                length = Int(b & 0x0F) + 1
                header = 1
            } else {
                guard i + 1 < data.endIndex else { onError(WireError("RTP two-byte extension header truncated")); return }
                id = b
                length = Int(data[i + 1])
                header = 2
            }
            let start = i + header
            guard start + length <= data.endIndex else {
                onError(WireError("RTP extension id \(id) length \(length) overruns the block")); return
            }
            if !visit(id, data[start..<start + length]) { return }
            i = start + length
        }
    }
}

// MARK: - Typed extension values

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

/// transport-wide-cc sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01): 16 bits.
public enum TransportWideSequenceNumber {
    public static let uri = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    public static func encode(_ seq: UInt16) -> [UInt8] { [UInt8(seq >> 8), UInt8(truncatingIfNeeded: seq)] }
    public static func decode(_ value: ArraySlice<UInt8>) throws -> UInt16 {
        guard value.count == 2 else { throw WireError("transport-wide sequence number is \(value.count) bytes, expected 2") }
        return UInt16(value[value.startIndex]) << 8 | UInt16(value[value.startIndex + 1])
    }

    /// Where the 2-byte value of extension `id` sits in a serialized RTP packet (RFC 8285 one- or two-byte
    /// form), without parsing or copying: the transport reads or stamps it in place. Nil when absent or malformed.
    public static func valueOffset(in p: [UInt8], id: UInt8) -> Int? {
        guard let r = RTPHeaderExtensions.valueRange(in: p, id: id), r.count == 2 else { return nil }
        return r.lowerBound
    }
}

extension RTPHeaderExtensions {
    /// Where the value of element `id` sits in a serialized RTP packet (RFC 8285 one- or two-byte form), without
    /// parsing or copying. Nil when absent, or when the header or the block is malformed.
    public static func valueRange(in p: [UInt8], id: UInt8) -> Range<Int>? {
        guard p.count >= 12, p[0] >> 6 == 2, p[0] & 0x10 != 0, id != 0 else { return nil }
        let start = 12 + 4 * Int(p[0] & 0x0F)
        guard p.count >= start + 4 else { return nil }
        let profile = UInt16(p[start]) << 8 | UInt16(p[start + 1])
        let end = start + 4 + 4 * (Int(p[start + 2]) << 8 | Int(p[start + 3]))
        guard end <= p.count else { return nil }
        var i = start + 4
        if profile == oneByteProfile {
            while i < end {
                let b = p[i]
                if b == 0 { i += 1; continue }
                let elementID = b >> 4, length = Int(b & 0x0F) + 1
                if elementID == 15 { return nil }
                guard i + 1 + length <= end else { return nil }
                if elementID == id { return (i + 1)..<(i + 1 + length) }
                i += 1 + length
            }
        } else if profile & 0xFFF0 == twoByteProfile {
            while i + 1 < end {
                let elementID = p[i]
                if elementID == 0 { i += 1; continue }
                let length = Int(p[i + 1])
                guard i + 2 + length <= end else { return nil }
                if elementID == id { return (i + 2)..<(i + 2 + length) }
                i += 2 + length
            }
        }
        return nil
    }
}

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

// MARK: - Sequence tracking

/// Tracks incoming RTP sequence numbers (with 16-bit wrap) and classifies each packet:
/// in order, after a gap (losses), a late (reordered) arrival, or a duplicate.
public struct RTPSequenceTracker: Sendable {
    /// What a newly arrived sequence number means.
    public enum Arrival: Equatable, Sendable {
        /// The first packet seen.
        case first
        /// The next expected packet.
        case inOrder
        /// Newer than expected: `missing` packets were skipped (lost or still in flight).
        case gap(missing: Int)
        /// Older than the newest seen and not seen before: a reordered packet.
        case late
        /// Seen before (within the tracking window).
        case duplicate
        /// Far outside the window (a stream restart or garbage); tracking was reset to it.
        case reset
    }

    /// The highest extended sequence number seen (cycles << 16 | seq), or nil before the first packet.
    public private(set) var highest: Int64?
    /// Bitmap of received packets at and just below `highest` (bit i = highest - i).
    private var window: UInt64 = 0
    /// Largest jump treated as a gap rather than a restart.
    public var maxJump: Int

    public init(maxJump: Int = 3000) { self.maxJump = maxJump }

    /// The extended sequence number for `seq` nearest the highest seen.
    public func extend(_ seq: UInt16) -> Int64 {
        guard let h = highest else { return Int64(seq) }
        let delta = Int64(Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: h)))
        return h + delta
    }

    /// Records a packet and returns how it arrived.
    public mutating func record(_ seq: UInt16) -> Arrival {
        guard let h = highest else { highest = Int64(seq) + 65536; window = 1; return .first }
        let ext = extend(seq)
        let delta = ext - h
        if delta > maxJump || -delta > maxJump {
            highest = Int64(seq) + 65536; window = 1; return .reset
        }
        if delta > 0 {
            window = delta >= 64 ? 1 : (window << UInt64(delta)) | 1
            highest = ext
            return delta == 1 ? .inOrder : .gap(missing: Int(delta - 1))
        }
        if delta == 0 { return .duplicate }
        let back = -delta
        if back >= 64 { return .late }
        let bit: UInt64 = 1 << UInt64(back)
        if window & bit != 0 { return .duplicate }
        window |= bit
        return .late
    }
}
