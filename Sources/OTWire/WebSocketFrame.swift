import OTBase

/// WebSocket opcodes (RFC 6455 §5.2).
public enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10
    public var isControl: Bool { rawValue >= 8 }
}

/// One WebSocket frame.
public struct WebSocketFrame: Sendable, Equatable {
    public var fin: Bool
    public var opcode: WebSocketOpcode
    public var payload: [UInt8]

    public init(fin: Bool = true, opcode: WebSocketOpcode, payload: [UInt8]) {
        self.fin = fin; self.opcode = opcode; self.payload = payload
    }

    /// Encodes the frame; with a `maskKey` (clients must mask) the payload is masked.
    public func encoded(maskKey: (UInt8, UInt8, UInt8, UInt8)? = nil) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(payload.count + 14)
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        let n = payload.count
        if n < 126 {
            out.append(maskBit | UInt8(n))
        } else if n <= 0xFFFF {
            out.append(maskBit | 126); out.append(UInt8(n >> 8)); out.append(UInt8(n & 0xFF))
        } else {
            out.append(maskBit | 127)
            for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(n) >> UInt64(s))) }
        }
        if let (a, b, c, d) = maskKey {
            let key = [a, b, c, d]
            out.append(contentsOf: key)
            let base = out.count
            out.append(contentsOf: payload)
            for i in 0..<n { out[base + i] ^= key[i & 3] }
        } else {
            out.append(contentsOf: payload)
        }
        return out
    }

    /// A close frame with a status code and reason.
    public static func close(code: UInt16, reason: String = "") -> WebSocketFrame {
        var p: [UInt8] = [UInt8(code >> 8), UInt8(code & 0xFF)]
        p.append(contentsOf: reason.utf8.prefix(120))
        return WebSocketFrame(opcode: .close, payload: p)
    }
}

/// A whole message after reassembly, or a control frame.
public enum WebSocketMessage: Sendable, Equatable {
    case text(String)
    case binary([UInt8])
    case ping([UInt8])
    case pong([UInt8])
    /// Close with code (1005 when none was sent) and reason.
    case close(UInt16, String)
}

/// A violation of RFC 6455 found while reading, with the close code to answer it with: 1002 (protocol error),
/// 1007 (a text message or close reason that is not UTF-8) or 1009 (a message over the size limit).
public struct WebSocketError: Error, Equatable, CustomStringConvertible, Sendable {
    public let closeCode: UInt16
    public let message: String
    public init(_ closeCode: UInt16, _ message: String) { self.closeCode = closeCode; self.message = message }
    public var description: String { "\(message) (close \(closeCode))" }

    static func protocolError(_ m: String) -> WebSocketError { WebSocketError(1002, m) }
}

/// Incremental frame reader with reassembly of fragmented messages.
/// `requireMasked`: a server requires masked client frames (RFC 6455 §5.1), a client refuses them.
public struct WebSocketReader: Sendable {
    public let requireMasked: Bool
    public var maxMessageBytes: Int
    private var buffer: [UInt8] = []
    private var readOffset = 0
    private var fragments: [UInt8] = []
    private var fragmentOpcode: WebSocketOpcode?

    public init(requireMasked: Bool, maxMessageBytes: Int = 1 << 20) {
        self.requireMasked = requireMasked; self.maxMessageBytes = maxMessageBytes
    }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if readOffset > 0 && readOffset == buffer.count { buffer.removeAll(keepingCapacity: true); readOffset = 0 }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, or nil when more bytes are needed. Throws `WebSocketError` on protocol violations
    /// (the connection should then be closed with its `closeCode`).
    public mutating func next() throws -> WebSocketMessage? {
        while true {
            guard let frame = try nextFrame() else { compact(); return nil }
            if frame.opcode.isControl {
                guard frame.fin, frame.payload.count <= 125 else { throw WebSocketError.protocolError("fragmented or oversized control frame") }
                switch frame.opcode {
                case .ping: return .ping(frame.payload)
                case .pong: return .pong(frame.payload)
                default:
                    if frame.payload.count == 1 { throw WebSocketError.protocolError("close frame with a one-byte body") }
                    if frame.payload.count >= 2 {
                        let code = UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1])
                        // Codes a peer may send (RFC 6455 §7.4): 1000–1003, 1007–1014, 3000–4999.
                        guard (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code) else {
                            throw WebSocketError.protocolError("close code \(code) may not be sent")
                        }
                        guard let reason = String(validating: frame.payload[2...], as: UTF8.self) else {
                            throw WebSocketError(1007, "close reason is not UTF-8")
                        }
                        return .close(code, reason)
                    }
                    return .close(1005, "")
                }
            }
            if frame.opcode == .continuation {
                guard let op = fragmentOpcode else { throw WebSocketError.protocolError("continuation frame without a started message") }
                guard fragments.count + frame.payload.count <= maxMessageBytes else { throw WebSocketError(1009, "message over \(maxMessageBytes) bytes") }
                fragments.append(contentsOf: frame.payload)
                if frame.fin {
                    let whole = fragments
                    fragments = []; fragmentOpcode = nil
                    return try message(op, whole)
                }
                continue
            }
            guard fragmentOpcode == nil else { throw WebSocketError.protocolError("new data frame inside a fragmented message") }
            if frame.fin { return try message(frame.opcode, frame.payload) }
            fragmentOpcode = frame.opcode
            fragments = frame.payload
        }
    }

    private func message(_ op: WebSocketOpcode, _ payload: [UInt8]) throws -> WebSocketMessage {
        if op == .text {
            guard let s = String(validating: payload, as: UTF8.self) else { throw WebSocketError(1007, "text message is not UTF-8") }
            return .text(s)
        }
        return .binary(payload)
    }

    private mutating func compact() {
        if readOffset > 4096 && readOffset * 2 > buffer.count {
            buffer.removeFirst(readOffset); readOffset = 0
        }
    }

    private mutating func nextFrame() throws -> WebSocketFrame? {
        let avail = buffer.count - readOffset
        guard avail >= 2 else { return nil }
        let b0 = buffer[readOffset], b1 = buffer[readOffset + 1]
        guard b0 & 0x70 == 0 else { throw WebSocketError.protocolError("reserved bits set without an extension") }
        guard let op = WebSocketOpcode(rawValue: b0 & 0x0F) else { throw WebSocketError.protocolError("unknown opcode \(b0 & 0x0F)") }
        let masked = b1 & 0x80 != 0
        guard masked == requireMasked else {
            throw WebSocketError.protocolError(masked ? "server frame must not be masked" : "client frame must be masked")
        }
        var len = UInt64(b1 & 0x7F)
        var pos = readOffset + 2
        if len == 126 {
            guard avail >= 4 else { return nil }
            len = UInt64(buffer[pos]) << 8 | UInt64(buffer[pos + 1]); pos += 2
        } else if len == 127 {
            guard avail >= 10 else { return nil }
            len = 0
            for i in 0..<8 { len = len << 8 | UInt64(buffer[pos + i]) }
            pos += 8
        }
        guard len <= UInt64(maxMessageBytes) else { throw WebSocketError(1009, "frame of \(len) bytes is over \(maxMessageBytes)") }
        let n = Int(len)
        let keyLen = masked ? 4 : 0
        guard buffer.count - pos >= keyLen + n else { return nil }
        var payload = Array(buffer[(pos + keyLen)..<(pos + keyLen + n)])
        if masked {
            let k0 = buffer[pos], k1 = buffer[pos + 1], k2 = buffer[pos + 2], k3 = buffer[pos + 3]
            let key = [k0, k1, k2, k3]
            for i in 0..<n { payload[i] ^= key[i & 3] }
        }
        readOffset = pos + keyLen + n
        return WebSocketFrame(fin: b0 & 0x80 != 0, opcode: op, payload: payload)
    }
}

/// The opening handshake (RFC 6455 §4).
public enum WebSocketHandshake {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
    public static func acceptKey(for key: String) -> String {
        TokenCrypto.base64(TokenCrypto.sha1(Array((key + guid).utf8)))
    }

    /// A fresh random `Sec-WebSocket-Key`.
    public static func makeKey() -> String { TokenCrypto.base64(TokenCrypto.randomBytes(16)) }

    /// Whether a request asks for a WebSocket upgrade.
    public static func isUpgrade(_ req: HTTPRequest) -> Bool {
        req.method == "GET" && (req.headers["Upgrade"]?.lowercased() == "websocket")
            && (req.headers["Connection"]?.lowercased().contains("upgrade") ?? false)
    }

    /// The server's 101 response, or a 400 error when the request is not a valid upgrade.
    public static func serverResponse(to req: HTTPRequest) throws -> HTTPResponse {
        guard isUpgrade(req) else { throw WireError("not a WebSocket upgrade request") }
        guard req.headers["Sec-WebSocket-Version"] == "13" else { throw WireError("unsupported WebSocket version") }
        guard let key = req.headers["Sec-WebSocket-Key"], let raw = TokenCrypto.base64Decode(key), raw.count == 16 else {
            throw WireError("missing or bad Sec-WebSocket-Key")
        }
        return HTTPResponse(status: 101, headers: HTTPHeaders([
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", acceptKey(for: key)),
        ]))
    }

    /// The client's upgrade request.
    public static func clientRequest(host: String, path: String, key: String) -> HTTPRequest {
        HTTPRequest(method: "GET", target: path, headers: HTTPHeaders([
            ("Host", host), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"),
        ]))
    }

    /// Checks the server's answer to our upgrade request.
    public static func validate(response: HTTPResponse, key: String) throws {
        guard response.status == 101 else { throw WireError("WebSocket upgrade refused with HTTP \(response.status)") }
        guard response.headers["Sec-WebSocket-Accept"] == acceptKey(for: key) else { throw WireError("bad Sec-WebSocket-Accept") }
    }
}
