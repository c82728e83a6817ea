/// Errors from reading a byte format: where it stopped and why.
public struct WireError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Reads big-endian (network order) fields from a byte slice, throwing on truncation.
public struct ByteReader {
    public let bytes: ArraySlice<UInt8>
    public private(set) var offset: Int

    public init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes; self.offset = bytes.startIndex }
    public init(_ bytes: [UInt8]) { self.init(bytes[...]) }

    /// Bytes left to read.
    public var remaining: Int { bytes.endIndex - offset }

    private mutating func need(_ n: Int, _ what: StaticString) throws {
        guard n >= 0, remaining >= n else { throw WireError("truncated \(what): need \(n) bytes at offset \(offset - bytes.startIndex), have \(remaining)") }
    }

    public mutating func u8(_ what: StaticString = "u8") throws -> UInt8 {
        try need(1, what); defer { offset += 1 }; return bytes[offset]
    }
    public mutating func u16(_ what: StaticString = "u16") throws -> UInt16 {
        try need(2, what); defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }
    public mutating func u24(_ what: StaticString = "u24") throws -> UInt32 {
        try need(3, what); defer { offset += 3 }
        return UInt32(bytes[offset]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2])
    }
    public mutating func u32(_ what: StaticString = "u32") throws -> UInt32 {
        try need(4, what); defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
    public mutating func u64(_ what: StaticString = "u64") throws -> UInt64 {
        let hi = try u32(what), lo = try u32(what)
        return UInt64(hi) << 32 | UInt64(lo)
    }
    public mutating func take(_ n: Int, _ what: StaticString = "bytes") throws -> ArraySlice<UInt8> {
        try need(n, what); defer { offset += n }; return bytes[offset..<offset + n]
    }
    public mutating func skip(_ n: Int, _ what: StaticString = "padding") throws { try need(n, what); offset += n }
    /// The unread rest.
    public mutating func rest() -> ArraySlice<UInt8> { defer { offset = bytes.endIndex }; return bytes[offset...] }
}

/// Appends big-endian (network order) fields to a byte array.
public struct ByteWriter {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) { bytes = []; bytes.reserveCapacity(capacity) }

    public var count: Int { bytes.count }
    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { bytes.append(UInt8(v >> 8)); bytes.append(UInt8(truncatingIfNeeded: v)) }
    public mutating func u24(_ v: UInt32) { for s in [16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(s))) } }
    public mutating func u32(_ v: UInt32) { for s in [24, 16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(s))) } }
    public mutating func u64(_ v: UInt64) { u32(UInt32(v >> 32)); u32(UInt32(truncatingIfNeeded: v)) }
    public mutating func append<C: Collection>(_ data: C) where C.Element == UInt8 { bytes.append(contentsOf: data) }
    public mutating func zeros(_ n: Int) { bytes.append(contentsOf: repeatElement(0, count: n)) }
    /// Overwrites a 16-bit field written earlier (lengths known only at the end).
    public mutating func set16(at index: Int, _ v: UInt16) { bytes[index] = UInt8(v >> 8); bytes[index + 1] = UInt8(truncatingIfNeeded: v) }
    public mutating func set32(at index: Int, _ v: UInt32) {
        for i in 0..<4 { bytes[index + i] = UInt8(truncatingIfNeeded: v >> UInt32(24 - 8 * i)) }
    }
}
