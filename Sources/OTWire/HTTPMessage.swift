import OTBase

/// An HTTP/1.1 header list: order kept, names compared case-insensitively.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(String, String)] = []) {
        for (n, v) in fields { add(n, v) }
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// Replaces every field of that name with one.
    public mutating func set(_ name: String, _ value: String) {
        fields.removeAll { $0.name.lowercased() == name.lowercased() }
        fields.append((name, value))
    }

    /// The first value of a field, by case-insensitive name.
    public subscript(_ name: String) -> String? {
        let lower = name.lowercased()
        return fields.first { $0.name.lowercased() == lower }?.value
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// A parsed HTTP/1.1 request.
public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The request target as sent (path and query).
    public var target: String
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(method: String, target: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.method = method; self.target = target; self.headers = headers; self.body = body
    }

    /// The path part of the target, without the query.
    public var path: String {
        if let q = target.firstIndex(of: "?") { return String(target[..<q]) }
        return target
    }

    /// The query part decoded as form fields.
    public var query: [String: String] {
        guard let q = target.firstIndex(of: "?") else { return [:] }
        return FormEncoding.decode(String(target[target.index(after: q)...]))
    }

    /// Serialises the request (a Content-Length is added when there is a body and none is set).
    public func serialized() -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\n"
        var h = headers
        if !body.isEmpty && h["Content-Length"] == nil { h.add("Content-Length", String(body.count)) }
        for f in h { head += "\(f.name): \(f.value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }
}

/// A parsed or built HTTP/1.1 response.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, reason: String? = nil, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status; self.reason = reason ?? HTTPResponse.reasonPhrase(status); self.headers = headers; self.body = body
    }

    /// A response with a JSON body and `Content-Type: application/json` exactly.
    public static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }

    /// Serialises the response; Content-Length is always written (also 0), except for 1xx and 204.
    public func serialized() -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason)\r\n"
        var h = headers
        if status >= 200 && status != 204 && status != 304 && h["Content-Length"] == nil {
            h.add("Content-Length", String(body.count))
        }
        for f in h { head += "\(f.name): \(f.value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 204: "No Content"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Payload Too Large"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        default: "Status \(status)"
        }
    }
}

/// Incremental HTTP/1.1 message parser: feed bytes as they arrive, take whole
/// messages out. Bodies need `Content-Length` (chunked bodies are refused).
public struct HTTPParser: Sendable {
    public enum Kind: Sendable { case request, response }
    public let kind: Kind
    /// Largest accepted head (request line plus headers).
    public var maxHeadBytes: Int
    /// Largest accepted body.
    public var maxBodyBytes: Int
    private var buffer: [UInt8] = []
    private var scanFrom = 0

    public init(kind: Kind, maxHeadBytes: Int = 16 * 1024, maxBodyBytes: Int = 1 << 20) {
        self.kind = kind; self.maxHeadBytes = maxHeadBytes; self.maxBodyBytes = maxBodyBytes
    }

    /// Bytes received but not yet part of a returned message (e.g. WebSocket frames after an upgrade).
    public var leftover: [UInt8] { buffer }

    /// Drops any buffered bytes and returns them.
    public mutating func takeLeftover() -> [UInt8] { defer { buffer = []; scanFrom = 0 }; return buffer }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 { buffer.append(contentsOf: bytes) }

    /// The next complete request, or nil when more bytes are needed.
    public mutating func nextRequest() throws -> HTTPRequest? {
        guard let (start, headers, body) = try nextMessage() else { return nil }
        let parts = start.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, parts[2].hasPrefix("HTTP/1.") else {
            throw WireError("bad HTTP request line: \(start.prefix(80))")
        }
        return HTTPRequest(method: String(parts[0]), target: String(parts[1]), headers: headers, body: body)
    }

    /// The next complete response, or nil when more bytes are needed.
    public mutating func nextResponse() throws -> HTTPResponse? {
        guard let (start, headers, body) = try nextMessage() else { return nil }
        let parts = start.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]), (100...599).contains(code) else {
            throw WireError("bad HTTP status line: \(start.prefix(80))")
        }
        return HTTPResponse(status: code, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers, body: body)
    }

    private mutating func nextMessage() throws -> (String, HTTPHeaders, [UInt8])? {
        // Find the end of the head: CRLF CRLF.
        var end = -1
        var i = max(0, scanFrom - 3)
        while i + 3 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 { end = i; break }
            i += 1
        }
        if end < 0 {
            if buffer.count > maxHeadBytes { throw WireError("HTTP head longer than \(maxHeadBytes) bytes") }
            scanFrom = buffer.count
            return nil
        }
        guard end <= maxHeadBytes else { throw WireError("HTTP head longer than \(maxHeadBytes) bytes") }
        guard let head = String(validating: buffer[0..<end], as: UTF8.self) else { throw WireError("HTTP head is not UTF-8") }
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let start = lines.removeFirst()
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw WireError("bad HTTP header line: \(line.prefix(80))") }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(" ") else { throw WireError("bad HTTP header name: \(name.prefix(80))") }
            let value = line[line.index(after: colon)...].trimmingSpaces()
            headers.add(name, value)
        }
        if let te = headers["Transfer-Encoding"], te.lowercased() != "identity" {
            throw WireError("chunked HTTP bodies are not supported")
        }
        var length = 0
        if let cl = headers["Content-Length"] {
            guard let n = Int(cl.trimmingSpaces()), n >= 0 else { throw WireError("bad Content-Length: \(cl.prefix(40))") }
            guard n <= maxBodyBytes else { throw WireError("HTTP body of \(n) bytes is over \(maxBodyBytes)") }
            length = n
        }
        let bodyStart = end + 4
        guard buffer.count >= bodyStart + length else { scanFrom = buffer.count; return nil }
        let body = Array(buffer[bodyStart..<bodyStart + length])
        buffer.removeFirst(bodyStart + length)
        scanFrom = 0
        return (start, headers, body)
    }
}

/// `application/x-www-form-urlencoded` and percent-encoding helpers.
public enum FormEncoding {
    /// Decodes `a=1&b=x+y` (both `+` and `%20` mean space). Later duplicates win.
    public static func decode(_ s: String) -> [String: String] {
        var out: [String: String] = [:]
        for pair in s.split(separator: "&") where !pair.isEmpty {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let k = percentDecode(String(kv[0]))
            out[k] = kv.count > 1 ? percentDecode(String(kv[1])) : ""
        }
        return out
    }

    /// Percent-decodes, turning `+` into a space; invalid escapes are kept literally.
    public static func percentDecode(_ s: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            let c = u[i]
            if c == UInt8(ascii: "+") { bytes.append(32); i += 1; continue }
            if c == UInt8(ascii: "%"), i + 2 < u.count, let h = hexValue(u[i + 1]), let l = hexValue(u[i + 2]) {
                bytes.append(h << 4 | l); i += 3; continue
            }
            bytes.append(c); i += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Form-encodes fields in the given order (space as `+`).
    public static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    /// Percent-encodes everything but unreserved characters; space becomes `+`.
    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            case 32: out += "+"
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension StringProtocol {
    /// The string without leading and trailing spaces and tabs (HTTP headers, SDP attributes).
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
