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

/// A message the parser refuses, with the status a server answers it with (RFC 9112): 400 for bad syntax or
/// framing, 411 for a chunked request body, 413 for a body over the limit, 431 for a head over the limit, 501 for
/// a transfer coding other than chunked.
public struct HTTPParseError: Error, Equatable, CustomStringConvertible, Sendable {
    public let status: Int
    public let message: String
    public init(_ status: Int, _ message: String) { self.status = status; self.message = message }
    public var description: String { "\(status): \(message)" }
}

/// Incremental HTTP/1.1 message parser: feed bytes as they arrive, take whole messages out. Framing follows
/// RFC 9112 strictly, so that a proxy in front cannot read a message differently: bodies need one
/// `Content-Length` of digits only (repeats must agree); `Transfer-Encoding` is refused (chunked request bodies
/// with 411, a coding other than chunked with 501, with `Content-Length` too with 400); header names are tokens;
/// obsolete line folding, bare CR or LF and NUL are refused. Errors are `HTTPParseError`.
public struct HTTPParser: Sendable {
    public enum Kind: Sendable { case request, response }
    public let kind: Kind
    /// Largest accepted head (request line plus headers).
    public var maxHeadBytes: Int
    /// Largest accepted body.
    public var maxBodyBytes: Int
    private var buffer: [UInt8] = []
    /// Where the unconsumed bytes start (consumed ones are dropped in bulk).
    private var start = 0
    private var scanFrom = 0

    public init(kind: Kind, maxHeadBytes: Int = 16 * 1024, maxBodyBytes: Int = 1 << 20) {
        self.kind = kind; self.maxHeadBytes = maxHeadBytes; self.maxBodyBytes = maxBodyBytes
    }

    /// Bytes received but not yet part of a returned message (e.g. WebSocket frames after an upgrade).
    public var leftover: [UInt8] { Array(buffer[start...]) }

    /// Whether bytes of a next message are buffered.
    public var hasBufferedBytes: Bool { start < buffer.count }

    /// Drops any buffered bytes and returns them.
    public mutating func takeLeftover() -> [UInt8] { defer { buffer = []; start = 0; scanFrom = 0 }; return leftover }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0 && (start == buffer.count || start >= 64 * 1024) {
            buffer.removeFirst(start); scanFrom -= start; start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete request, or nil when more bytes are needed.
    public mutating func nextRequest() throws -> HTTPRequest? {
        guard let (line, headers, body) = try nextMessage() else { return nil }
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].utf8.allSatisfy(Self.isTokenChar), !parts[1].isEmpty,
              parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else {
            throw HTTPParseError(400, "bad HTTP request line: \(line.prefix(80))")
        }
        return HTTPRequest(method: String(parts[0]), target: String(parts[1]), headers: headers, body: body)
    }

    /// The next complete response, or nil when more bytes are needed.
    public mutating func nextResponse() throws -> HTTPResponse? {
        guard let (line, headers, body) = try nextMessage() else { return nil }
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].utf8.count == 3, let code = Int(parts[1]), (100...599).contains(code) else {
            throw HTTPParseError(400, "bad HTTP status line: \(line.prefix(80))")
        }
        return HTTPResponse(status: code, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers, body: body)
    }

    /// RFC 9110 `tchar`.
    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(c)
        }
    }

    private mutating func nextMessage() throws -> (String, HTTPHeaders, [UInt8])? {
        // Find the end of the head: CRLF CRLF.
        var end = -1
        var i = max(start, scanFrom - 3)
        while i + 3 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 { end = i; break }
            i += 1
        }
        if end < 0 {
            if buffer.count - start > maxHeadBytes { throw HTTPParseError(431, "HTTP head longer than \(maxHeadBytes) bytes") }
            scanFrom = buffer.count
            return nil
        }
        guard end - start <= maxHeadBytes else { throw HTTPParseError(431, "HTTP head longer than \(maxHeadBytes) bytes") }
        let (line, headers) = try Self.parseHead(buffer[start..<end])
        let length = try Self.bodyLength(headers, kind: kind, max: maxBodyBytes)
        let bodyStart = end + 4
        guard buffer.count - bodyStart >= length else { scanFrom = end; return nil }
        let body = Array(buffer[bodyStart..<bodyStart + length])
        start = bodyStart + length
        scanFrom = start
        return (line, headers, body)
    }

    /// The start line and the header fields of a head (without its final CRLF CRLF).
    private static func parseHead(_ head: ArraySlice<UInt8>) throws -> (String, HTTPHeaders) {
        // CR and LF only as CRLF pairs; no NUL anywhere.
        var k = head.startIndex
        while k < head.endIndex {
            let c = head[k]
            if c == 0 { throw HTTPParseError(400, "NUL in the HTTP head") }
            if c == 13 { guard k + 1 < head.endIndex, head[k + 1] == 10 else { throw HTTPParseError(400, "bare CR in the HTTP head") }; k += 2; continue }
            if c == 10 { throw HTTPParseError(400, "bare LF in the HTTP head") }
            k += 1
        }
        guard let text = String(validating: head, as: UTF8.self) else { throw HTTPParseError(400, "HTTP head is not UTF-8") }
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let line = String(lines.removeFirst())
        var headers = HTTPHeaders()
        for l in lines {
            if l.first == " " || l.first == "\t" { throw HTTPParseError(400, "obsolete line folding") }
            guard let colon = l.firstIndex(of: ":") else { throw HTTPParseError(400, "bad HTTP header line: \(l.prefix(80))") }
            let name = l[..<colon]
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenChar) else { throw HTTPParseError(400, "bad HTTP header name: \(name.prefix(80))") }
            headers.add(String(name), l[l.index(after: colon)...].trimmingSpaces())
        }
        return (line, headers)
    }

    /// The body length the headers frame (RFC 9112 §6).
    private static func bodyLength(_ headers: HTTPHeaders, kind: Kind, max: Int) throws -> Int {
        let te = headers.fields.filter { $0.name.lowercased() == "transfer-encoding" }
        let cl = headers.fields.filter { $0.name.lowercased() == "content-length" }
        if !te.isEmpty {
            if !cl.isEmpty { throw HTTPParseError(400, "Transfer-Encoding with Content-Length") }
            let codings = te.flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: false) }.map { $0.trimmingSpaces().lowercased() }
            guard codings.last == "chunked" else { throw HTTPParseError(400, "the last transfer coding must be chunked") }
            if codings == ["chunked"] { throw HTTPParseError(411, "chunked bodies are not supported: send Content-Length") }
            throw HTTPParseError(501, "transfer codings other than chunked are not supported")
        }
        guard !cl.isEmpty else { return 0 }
        // Every value (repeated fields, comma lists) must be the same run of digits.
        let values = cl.flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: false) }.map { $0.trimmingSpaces() }
        guard let first = values.first, values.allSatisfy({ $0 == first }) else { throw HTTPParseError(400, "differing Content-Length values") }
        guard !first.isEmpty, first.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw HTTPParseError(400, "bad Content-Length: \(first.prefix(40))")
        }
        let digits = first.drop { $0 == "0" }
        guard digits.count <= 18, let n = Int(digits.isEmpty ? "0" : String(digits)), n <= max else {
            throw HTTPParseError(413, "HTTP body of \(first.prefix(40)) bytes is over \(max)")
        }
        return n
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
