import FoundationEssentials
import OTBase
import OTWire

/// An HTTP proxy for CONNECT tunnels (OpenTok's `proxyURL`): `http://[user:password@]host[:port]` (port 80 by
/// default; credentials go as `Proxy-Authorization: Basic`, RFC 9110 §11.7.1).
public struct ProxyEndpoint: Sendable, Equatable {
    public var host: String
    public var port: UInt16
    /// `user:password`, as in the URL (percent-decoded).
    public var credentials: String?

    public init(host: String, port: UInt16, credentials: String? = nil) { self.host = host; self.port = port; self.credentials = credentials }

    /// Parses a proxy URL; throws `.invalidParameter` naming what is wrong.
    public static func parse(_ url: String) throws -> ProxyEndpoint {
        func bad(_ why: String) -> OTError { OTError(.invalidParameter, "proxy URL \"\(url.prefix(200))\": \(why)") }
        guard url.lowercased().hasPrefix("http://") else {
            throw bad(url.lowercased().hasPrefix("https://") ? "the proxy is reached over http:// (the tunnel inside carries TLS)" : "expected http://host:port")
        }
        var rest = Substring(url.dropFirst(7))
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...] == "/" else { throw bad("a proxy URL has no path") }
            rest = rest[..<slash]
        }
        var credentials: String?
        if let at = rest.lastIndex(of: "@") {
            guard let decoded = String(rest[..<at]).removingPercentEncodingStrict, decoded.contains(":") else {
                throw bad("credentials must be user:password")
            }
            credentials = decoded
            rest = rest[rest.index(after: at)...]
        }
        let (host, port) = try HostPort.parse(rest, defaultPort: 80, context: bad)
        return ProxyEndpoint(host: host, port: port, credentials: credentials)
    }
}

extension String {
    /// Percent-decoding that fails on a malformed escape or bytes that are not UTF-8.
    var removingPercentEncodingStrict: String? {
        var out: [UInt8] = []
        var it = Array(utf8)[...]
        while let b = it.popFirst() {
            guard b == 0x25 else { out.append(b); continue }
            guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            out.append(v)
            it = it.dropFirst(2)
        }
        return String(validating: out, as: UTF8.self)
    }
}

/// The client side of an HTTP CONNECT tunnel (RFC 9110 §9.3.6), sans-IO: sends the request, reads the proxy's answer
/// (a head of at most 16 KiB), and is open after a 2xx; bytes after the head are the tunnel's first. Any other
/// answer throws `.connectionFailed` naming the proxy's status ("407 Proxy Authentication Required").
public final class HTTPConnectTunnel: StreamLayer {
    public static let maxHeadBytes = 16 * 1024

    private let target: String
    private let credentials: String?
    private var head: [UInt8] = []
    private var outgoing: [UInt8] = []
    private var incoming: [UInt8] = []
    private var held: [UInt8] = []
    public private(set) var isOpen = false
    public let peerClosed = false

    /// A tunnel to `host:port` through a proxy (credentials `user:password`, or nil).
    public init(host: String, port: UInt16, credentials: String? = nil) {
        target = HostPort.authority(host, port)
        self.credentials = credentials
    }

    public func start() throws {
        var req = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let c = credentials { req += "Proxy-Authorization: Basic \(Data(c.utf8).base64EncodedString())\r\n" }
        outgoing += Array((req + "\r\n").utf8)
    }

    public func receive(_ bytes: UnsafeRawBufferPointer) throws {
        if isOpen { incoming += bytes; return }
        head += bytes
        guard let end = Self.headEnd(head) else {
            if head.count > Self.maxHeadBytes { throw OTError(.connectionFailed, "proxy: its answer to CONNECT is over \(Self.maxHeadBytes) bytes") }
            return
        }
        let statusLine = String(decoding: head[..<(head.firstIndex(of: 0x0D) ?? end)], as: UTF8.self)
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw OTError(.connectionFailed, "proxy: not an HTTP answer to CONNECT: \(statusLine.prefix(100))")
        }
        guard (200..<300).contains(status) else {
            throw OTError(.connectionFailed, "proxy refused CONNECT \(target): \(statusLine.dropFirst(parts[0].count + 1).prefix(100))")
        }
        isOpen = true
        incoming += head[(end + 4)...]
        head = []
        outgoing += held
        held = []
    }

    public func write(_ bytes: [UInt8]) throws {
        if isOpen { outgoing += bytes } else { held += bytes }
    }

    public func shutdown() {}

    public func takeOutgoing() -> [UInt8] { defer { outgoing = [] }; return outgoing }
    public func takeIncoming() -> [UInt8] { defer { incoming = [] }; return incoming }

    private static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 0x0D && b[i + 1] == 0x0A && b[i + 2] == 0x0D && b[i + 3] == 0x0A { return i }
        return nil
    }
}
