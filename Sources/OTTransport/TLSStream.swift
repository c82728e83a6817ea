#if canImport(Glibc)
import Glibc
#endif
import COTShims
import COpenSSL
import OTBase
import OTWire
import Synchronization

/// What OpenSSL last said on this thread (clears its error queue).
func openSSLError() -> String {
    var buf = [CChar](repeating: 0, count: 256)
    otshim_tls_last_error(&buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A TLS server's certificate chain and key (PEM files), in a context for TLS 1.2 and 1.3. Immutable: to reload
/// the files make a new one (`TLSServerCredentials.reload`); connections keep the context they started with.
public final class TLSServerContext: @unchecked Sendable {
    let ctx: OpaquePointer
    /// The files it was loaded from.
    public let certificateFile: String
    public let keyFile: String

    /// Loads the certificate chain (leaf first) and the private key; throws `.invalidParameter` naming the file and
    /// OpenSSL's reason when either cannot be read or they do not match.
    public init(certificateFile: String, keyFile: String) throws {
        self.certificateFile = certificateFile; self.keyFile = keyFile
        guard let ctx = otshim_tls_ctx_new(1) else { throw OTError(.internalError, "TLS: context setup failed: \(openSSLError())") }
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1 else {
            let why = openSSLError()
            SSL_CTX_free(ctx)
            throw OTError(.invalidParameter, "TLS: cannot load the certificate chain \(certificateFile): \(why)")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM) == 1 else {
            let why = openSSLError()
            SSL_CTX_free(ctx)
            throw OTError(.invalidParameter, "TLS: cannot load the private key \(keyFile): \(why)")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            let why = openSSLError()
            SSL_CTX_free(ctx)
            throw OTError(.invalidParameter, "TLS: the key \(keyFile) does not match the certificate \(certificateFile): \(why)")
        }
        self.ctx = ctx
    }

    deinit { SSL_CTX_free(ctx) }
}

/// A listener's TLS credentials: the current context, replaced by `reload()` (e.g. on SIGHUP after a certificate
/// renewal) without touching connections already open. Thread-safe.
public final class TLSServerCredentials: Sendable {
    private let current: Mutex<TLSServerContext>

    public init(certificateFile: String, keyFile: String) throws {
        current = Mutex(try TLSServerContext(certificateFile: certificateFile, keyFile: keyFile))
    }

    /// The context new connections use.
    public var context: TLSServerContext { current.withLock { $0 } }

    /// Reads the files again; new connections get the new certificate. On failure the old one stays and the error
    /// says why.
    public func reload() throws {
        let old = context
        let fresh = try TLSServerContext(certificateFile: old.certificateFile, keyFile: old.keyFile)
        current.withLock { $0 = fresh }
    }
}

/// What a TLS client trusts: the system's certificate store, or the CA certificates of one PEM file.
public final class TLSClientContext: @unchecked Sendable {
    let ctx: OpaquePointer
    /// The CA file, or nil for the system store.
    public let caFile: String?

    private static let system = Mutex<TLSClientContext?>(nil)

    /// The system store (Debian: /etc/ssl/certs, from the ca-certificates package); loaded once per process.
    public static func systemStore() throws -> TLSClientContext {
        try system.withLock { s in
            if let s { return s }
            let c = try TLSClientContext(caFile: nil)
            s = c
            return c
        }
    }

    /// Trusts the certificates of `caFile` (PEM; only them), or the system store when nil. Throws `.invalidParameter`
    /// when the file cannot be read or holds no certificate.
    public init(caFile: String?) throws {
        self.caFile = caFile
        guard let ctx = otshim_tls_ctx_new(0) else { throw OTError(.internalError, "TLS: context setup failed: \(openSSLError())") }
        otshim_tls_ctx_verify_peer(ctx)
        let loaded = if let caFile { SSL_CTX_load_verify_locations(ctx, caFile, nil) } else { SSL_CTX_set_default_verify_paths(ctx) }
        guard loaded == 1 else {
            let why = openSSLError()
            SSL_CTX_free(ctx)
            throw OTError(.invalidParameter, "TLS: cannot load the CA certificates \(caFile ?? "of the system store"): \(why)")
        }
        self.ctx = ctx
    }

    deinit { SSL_CTX_free(ctx) }
}

/// TLS over a byte stream, sans-IO (OpenSSL on memory BIOs): a server with `TLSServerContext`, or a client that
/// verifies the server's chain against `TLSClientContext` and its name against `host` (SNI is sent for names).
/// A verification failure throws `.tlsCertificateRejected` with OpenSSL's reason ("hostname mismatch", "unable to
/// get local issuer certificate", ...); other handshake failures `.connectionFailed`. Renegotiation is refused.
public final class TLSStream: StreamLayer {
    private let ssl: OpaquePointer
    private let rbio: OpaquePointer
    private let wbio: OpaquePointer
    private let isServer: Bool
    /// The name the server's certificate must carry (clients).
    private let host: String?
    /// Keeps the context alive as long as the connection (the SSL holds a reference too).
    private let owner: AnyObject
    private var held: [UInt8] = []
    private var incoming: [UInt8] = []
    private var readBuffer = [UInt8](repeating: 0, count: 16 * 1024)
    private var shutDown = false
    public private(set) var isOpen = false
    public private(set) var peerClosed = false

    /// A server's side of a connection.
    public init(server: TLSServerContext) throws {
        isServer = true; host = nil; owner = server
        (ssl, rbio, wbio) = try Self.make(server.ctx)
        SSL_set_accept_state(ssl)
    }

    /// A client's side: the server must prove to be `host` (a DNS name, or an IP literal matched against its IP
    /// addresses) with a chain `context` trusts.
    public init(client context: TLSClientContext, host: String) throws {
        isServer = false; self.host = host; owner = context
        (ssl, rbio, wbio) = try Self.make(context.ctx)
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let isIP = IPAddress(bare) != nil
        guard otshim_tls_expect_host(ssl, bare, isIP ? 1 : 0) == 1, isIP || otshim_tls_set_sni(ssl, bare) == 1 else {
            SSL_free(ssl)
            throw OTError(.invalidParameter, "TLS: cannot verify the host name \(host): \(openSSLError())")
        }
        SSL_set_connect_state(ssl)
    }

    private static func make(_ ctx: OpaquePointer) throws -> (OpaquePointer, OpaquePointer, OpaquePointer) {
        guard let ssl = SSL_new(ctx) else { throw OTError(.internalError, "TLS: SSL_new failed: \(openSSLError())") }
        guard let r = BIO_new(BIO_s_mem()), let w = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw OTError(.internalError, "TLS: BIO_new failed")
        }
        _ = otshim_bio_set_mem_eof_return(r, -1)
        _ = otshim_bio_set_mem_eof_return(w, -1)
        SSL_set_bio(ssl, r, w)
        return (ssl, r, w)
    }

    deinit { SSL_free(ssl) }

    /// The protocol version negotiated ("TLSv1.3"), once open.
    public var protocolVersion: String? { isOpen ? String(cString: SSL_get_version(ssl)) : nil }
    /// The cipher suite negotiated, once open.
    public var cipher: String? { isOpen ? SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } : nil }

    public func start() throws {
        if !isServer { try handshake() }
    }

    public func receive(_ bytes: UnsafeRawBufferPointer) throws {
        guard !bytes.isEmpty, !peerClosed else { return }
        guard BIO_write(rbio, bytes.baseAddress, Int32(bytes.count)) == Int32(bytes.count) else {
            throw OTError(.internalError, "TLS: BIO_write failed")
        }
        if !isOpen { try handshake() }
        if isOpen { try readAll() }
    }

    public func write(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty, !shutDown else { return }
        guard isOpen else { held += bytes; return }
        try writeNow(bytes)
    }

    public func shutdown() {
        guard isOpen, !shutDown else { return }
        shutDown = true
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    public func takeOutgoing() -> [UInt8] {
        let n = otshim_bio_pending(wbio)
        guard n > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: n)
        let got = out.withUnsafeMutableBytes { BIO_read(wbio, $0.baseAddress, Int32(n)) }
        if got < n { out.removeLast(n - max(0, Int(got))) }
        return out
    }

    public func takeIncoming() -> [UInt8] { defer { incoming = [] }; return incoming }

    private func handshake() throws {
        let r = SSL_do_handshake(ssl)
        if r == 1 {
            isOpen = true
            if !held.isEmpty { let h = held; held = []; try writeNow(h) }
            return
        }
        let e = SSL_get_error(ssl, r)
        if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE { return }
        throw failure(e)
    }

    /// Decrypts everything buffered (a TLS 1.3 post-handshake message such as a session ticket yields nothing).
    private func readAll() throws {
        while true {
            let n = readBuffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 { incoming += readBuffer[0..<Int(n)]; continue }
            let e = SSL_get_error(ssl, n)
            if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE { return }
            if e == SSL_ERROR_ZERO_RETURN { peerClosed = true; return }
            throw failure(e)
        }
    }

    private func writeNow(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + offset, Int32(bytes.count - offset)) }
            guard n > 0 else { throw failure(SSL_get_error(ssl, n)) }
            offset += Int(n)
        }
    }

    /// The error for a failed call: a certificate the client does not accept gets its own code and OpenSSL's reason.
    private func failure(_ e: Int32) -> OTError {
        let detail = openSSLError()
        if !isServer {
            let v = SSL_get_verify_result(ssl)
            if v != X509_V_OK {
                let reason = String(cString: X509_verify_cert_error_string(v))
                return OTError(.tlsCertificateRejected, "TLS: the certificate of \(host ?? "the server") was not accepted: \(reason)")
            }
        }
        let what = isOpen ? "connection" : "handshake"
        if e == SSL_ERROR_SYSCALL && detail.isEmpty {
            return OTError(.connectionFailed, "TLS: the \(what) ended unexpectedly")
        }
        return OTError(.connectionFailed, "TLS \(what) failed\(host.map { " with \($0)" } ?? ""): \(detail.isEmpty ? "error \(e)" : detail)")
    }
}
