import OTBase

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
