#if canImport(Glibc)
import Glibc
#endif
import COTShims
import COpenSSL
import OTBase
import OTWire

/// An ECDSA P-256 key and self-signed certificate for DTLS, with its SHA-256 fingerprint for SDP.
public final class DTLSCertificate: @unchecked Sendable {
    let key: OpaquePointer
    let x509: OpaquePointer
    public let fingerprint: SDPFingerprint

    /// Generates a fresh key and a certificate valid for 30 days.
    public init(commonName: String = "libotsession") throws {
        guard let key = otshim_ec_p256_keygen() else { throw OTError(.internalError, "DTLS: EC P-256 key generation failed") }
        guard let x = X509_new() else { EVP_PKEY_free(key); throw OTError(.internalError, "DTLS: X509_new failed") }
        var ok = X509_set_version(x, 2) == 1
        var serial = UInt64.random(in: 1 ... UInt64(Int64.max))
        ok = ok && ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial) == 1
        serial = 0
        ok = ok && X509_gmtime_adj(X509_getm_notBefore(x), -86400) != nil
        ok = ok && X509_gmtime_adj(X509_getm_notAfter(x), 30 * 86400) != nil
        ok = ok && X509_set_pubkey(x, key) == 1
        if let name = X509_get_subject_name(x) {
            ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1
            ok = ok && X509_set_issuer_name(x, name) == 1
        } else { ok = false }
        ok = ok && X509_sign(x, key, EVP_sha256()) > 0
        var md = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        ok = ok && X509_digest(x, EVP_sha256(), &md, &len) == 1 && len == 32
        guard ok else { X509_free(x); EVP_PKEY_free(key); throw OTError(.internalError, "DTLS: self-signed certificate creation failed") }
        self.key = key
        self.x509 = x
        fingerprint = SDPFingerprint(algorithm: "sha-256", bytes: md)
    }

    deinit {
        X509_free(x509)
        EVP_PKEY_free(key)
    }
}

/// SRTP master keys and salts exported from DTLS (RFC 5764 §4.2), split into what this side sends with and receives with.
public struct SRTPKeyingMaterial: Sendable, Equatable {
    public var profile: SRTPProfile
    public var localKey: [UInt8]
    public var localSalt: [UInt8]
    public var remoteKey: [UInt8]
    public var remoteSalt: [UInt8]

    /// The keys in the form `SRTPContext(profile:keys:)` takes (key then salt per direction).
    public var srtpKeys: SRTPKeys { SRTPKeys(local: localKey + localSalt, remote: remoteKey + remoteSalt) }
}

/// What the DTLS endpoint reports.
public enum DTLSEvent: Sendable, Equatable {
    /// Handshake done, peer fingerprint checked; SRTP keys when use_srtp was negotiated.
    case connected(SRTPKeyingMaterial?)
    /// The handshake or connection failed (fingerprint mismatch: `.connectionRefused`; timeout: `.connectionTimedOut`).
    case failed(OTError)
    case applicationData([UInt8])
    /// The peer sent close_notify.
    case closed
}

/// A sans-IO DTLS 1.2 endpoint on OpenSSL memory BIOs: datagrams and time in, datagrams, events and the next
/// retransmission deadline out. OpenSSL itself builds retransmitted flights (fresh record numbers), since a
/// DTLS peer may drop a repeated record it already saw; this endpoint owns the schedule (when `handleTimeout` asks
/// OpenSSL to repeat a flight). OpenSSL's own timer is kept at a fixed floor without back-off: it decides only
/// whether OpenSSL repeats a flight when asked (it repeats nothing before its timer expired) and when OpenSSL
/// repeats one by itself on reading a repeated flight of the peer (RFC 6347 §4.2.4).
public final class DTLSEndpoint {
    public enum Role: Sendable { case client, server }

    /// Which clock drives retransmissions.
    public enum TimerMode: Sendable {
        /// The caller's `now` is the real monotonic clock: OpenSSL's timer (through `DTLS_set_timer_cb`; OpenSSL's own
        /// is 1 s, doubling) is armed with `initialRTO` for every wait, so it is due whenever this endpoint's schedule is.
        case wallClock
        /// The caller's `now` is virtual (tests): OpenSSL's timer is armed with `realTimer` of real time, and
        /// `handleTimeout` waits out what is left of it (at most that much real time) before asking for a retransmission.
        case virtualClock(realTimer: Duration)
    }

    public let role: Role
    public private(set) var isConnected = false
    public private(set) var isFailed = false
    public private(set) var keyingMaterial: SRTPKeyingMaterial?
    /// Initial retransmission timeout of a flight, doubled per retransmission up to `maxRTO`. RFC 6347 suggests 1 s;
    /// like libwebrtc we start from the path's round-trip time when one is known (`setRoundTripTime`), and from
    /// `defaultInitialRTO` before. Takes effect from the next flight.
    public var initialRTO: Duration = DTLSEndpoint.defaultInitialRTO { didSet { applyTimer() } }
    /// The longest wait for a flight's answer: `backOffLimit` × `initialRTO`. Handshake flights are a few small
    /// datagrams on a path ICE has just shown to work, so a lost one is loss, not congestion: doubling on to seconds
    /// (RFC 6347's 60 s ceiling) made set-up under 10–20 % loss wait 1.5 s and more for the fourth or fifth try.
    public var maxRTO: Duration { initialRTO * Self.backOffLimit }
    /// How far a flight's timeout backs off, as a multiple of `initialRTO`.
    public static let backOffLimit = 4
    /// The initial timeout while the round-trip time is unknown (an ICE-lite side has not measured it).
    public static let defaultInitialRTO: Duration = .milliseconds(100)
    /// The round-trip time measured between one of our flights (not retransmitted) and the peer's answer.
    public private(set) var roundTripTime: Duration?
    /// Retransmissions of one flight before the handshake fails, those brought forward by the peer's media included:
    /// OpenSSL's own limit (`DTLS1_TMO_ALERT_COUNT`: it fails a handshake on the 13th timeout of one flight).
    public var maxRetransmissions = 12
    /// Retransmissions of our final flight brought forward by the peer's media (`handlePeerMedia`), per flight.
    public static let maxEarlyRetransmissions = 3

    private let ctx: OpaquePointer
    private let ssl: OpaquePointer
    private let rbio: OpaquePointer
    private let wbio: OpaquePointer
    private let certificate: DTLSCertificate
    private var remoteFingerprint: SDPFingerprint?
    private var started = false
    private let timerMode: TimerMode
    private var retransmitAt: Instant?
    private var rto: Duration = .seconds(1)
    private var retransmissions = 0
    private var earlyRetransmissions = 0
    /// The due retransmission was brought forward by `handlePeerMedia`: it does not back off.
    private var earlyRetransmissionDue = false
    private var transmits = FIFO<[UInt8]>()
    private var events = FIFO<DTLSEvent>()
    private var readBuffer = [UInt8](repeating: 0, count: 2048)
    /// When our latest flight went out, while it waits for the peer's answer (nil once retransmitted: Karn's rule).
    private var flightSentAt: Instant?
    private var closed = false
    private let mtu: Int

    /// - Parameters:
    ///   - remoteFingerprint: from the remote SDP; may be set later with `setRemoteFingerprint` (checked at handshake end).
    ///   - mtu: largest datagram OpenSSL may write.
    ///   - srtpProfiles: offered/accepted use_srtp profiles in preference order.
    public init(role: Role, certificate: DTLSCertificate, remoteFingerprint: SDPFingerprint? = nil, mtu: Int = 1200,
                srtpProfiles: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmHmacSha1_80], timerMode: TimerMode = .wallClock) throws {
        self.role = role
        self.timerMode = timerMode
        self.certificate = certificate
        self.mtu = mtu
        guard let ctx = SSL_CTX_new(DTLS_method()) else { throw OTError(.internalError, "DTLS: SSL_CTX_new failed") }
        self.ctx = ctx
        guard otshim_ssl_ctx_dtls12_only(ctx) == 1,
              SSL_CTX_use_certificate(ctx, certificate.x509) == 1,
              SSL_CTX_use_PrivateKey(ctx, certificate.key) == 1,
              SSL_CTX_set_tlsext_use_srtp(ctx, srtpProfiles.map(\.opensslName).joined(separator: ":")) == 0,
              SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-SHA") == 1,
              let ssl = SSL_new(ctx) else {
            SSL_CTX_free(ctx)
            throw OTError(.internalError, "DTLS: context setup failed")
        }
        self.ssl = ssl
        guard let r = BIO_new(BIO_s_mem()), let w = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl); SSL_CTX_free(ctx)
            throw OTError(.internalError, "DTLS: BIO_new failed")
        }
        rbio = r; wbio = w
        _ = otshim_bio_set_mem_eof_return(r, -1)
        _ = otshim_bio_set_mem_eof_return(w, -1)
        SSL_set_bio(ssl, r, w)
        _ = SSL_set_options(ssl, UInt64(1) << 12)  // SSL_OP_NO_QUERY_MTU (a macro Swift cannot import)
        _ = otshim_ssl_set_mtu(ssl, mtu)
        guard otshim_dtls_prepare(ssl) == 1, Self.setTimer(ssl, timerMode, initial: Self.defaultInitialRTO) else {
            SSL_free(ssl); SSL_CTX_free(ctx)
            throw OTError(.internalError, "DTLS: setup failed")
        }
        if role == .client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }
        if let fp = remoteFingerprint { setRemoteFingerprint(fp) }
    }

    deinit {
        SSL_free(ssl)  // frees both BIOs
        SSL_CTX_free(ctx)
    }

    /// The initial retransmission timeout for a path of round-trip time `rtt`: twice it, within 50 ms … 3 s (libwebrtc's rule).
    public static func initialTimeout(forRoundTripTime rtt: Duration) -> Duration {
        min(max(rtt * 2, .milliseconds(50)), .seconds(3))
    }

    /// Starts the next flights' retransmission timers from this round-trip time (`initialTimeout(forRoundTripTime:)`).
    public func setRoundTripTime(_ rtt: Duration) {
        guard rtt >= .zero else { return }
        initialRTO = Self.initialTimeout(forRoundTripTime: rtt)
    }

    /// Arms OpenSSL's timer: `initial` of real time on the wall clock, `realTimer` on a virtual one (at least 16 ms:
    /// OpenSSL treats a timer with less than 15 ms left as expired).
    private static func setTimer(_ ssl: OpaquePointer, _ mode: TimerMode, initial: Duration) -> Bool {
        switch mode {
        case .wallClock: return otshim_dtls_set_timer(ssl, UInt32(clamping: max(initial.microseconds, 1000))) == 1
        case .virtualClock(let real): return otshim_dtls_set_timer(ssl, UInt32(clamping: max(real.microseconds, 16_000))) == 1
        }
    }

    private func applyTimer() { _ = Self.setTimer(ssl, timerMode, initial: initialRTO) }

    /// Real time until OpenSSL's timer expires (zero when it has, nil when none runs).
    private func openSSLTimerLeft() -> Duration? {
        var usec: Int64 = 0
        guard otshim_dtls_get_timeout_usec(ssl, &usec) == 1 else { return nil }
        return .microseconds(max(usec, 0))
    }

    /// Sets the fingerprint the peer's certificate must match (sha-256 only).
    public func setRemoteFingerprint(_ fp: SDPFingerprint) {
        remoteFingerprint = fp
        if fp.algorithm == "sha-256" && fp.bytes.count == 32 { _ = fp.bytes.withUnsafeBufferPointer { otshim_dtls_expect_peer_sha256(ssl, $0.baseAddress) } }
    }

    /// Begins the handshake: the client sends its ClientHello; the server waits for one.
    public func start(now: Instant) {
        guard !started else { return }
        started = true
        drive(now: now)
    }

    /// Feeds one received DTLS datagram.
    public func handleReceive(_ datagram: [UInt8], now: Instant) {
        guard !isFailed, !datagram.isEmpty else { return }
        started = true
        if let sent = flightSentAt, !isConnected {
            let rtt = now - sent
            roundTripTime = rtt
            flightSentAt = nil
            initialRTO = Self.initialTimeout(forRoundTripTime: rtt)
        }
        _ = datagram.withUnsafeBufferPointer { BIO_write(rbio, $0.baseAddress, Int32($0.count)) }
        drive(now: now)
    }

    /// Sends application data (after `connected`).
    public func send(_ data: [UInt8]) throws {
        guard isConnected, !isFailed, !closed else { throw OTError(.illegalState, "DTLS: not connected") }
        let n = data.withUnsafeBufferPointer { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        guard n == Int32(data.count) else { throw OTError(.internalError, "DTLS: SSL_write failed") }
        collectOutput()
    }

    /// Sends close_notify.
    public func close() {
        guard !closed else { return }
        closed = true
        _ = SSL_shutdown(ssl)
        collectOutput()
    }

    /// Media (SRTP or SRTCP) arrived from the peer before our handshake completed. A DTLS server protects media only
    /// after it received our Finished: if we are the client and sent ours, the server's final flight was lost. Our
    /// flight then goes again as soon as OpenSSL's timer allows (`initialRTO` after our last one) instead of after
    /// the backed-off timeout, without backing off, up to `maxEarlyRetransmissions` times per flight, so the server
    /// answers with its final flight again (OpenSSL repeats it when it reads our Finished again).
    public func handlePeerMedia(now: Instant) {
        guard !isConnected, !isFailed, !earlyRetransmissionDue, earlyRetransmissions < Self.maxEarlyRetransmissions,
              retransmissions + earlyRetransmissions < maxRetransmissions, let at = retransmitAt, awaitsServerFinished, let left = openSSLTimerLeft() else { return }
        let due: Instant
        switch timerMode {
        case .wallClock: due = now + left
        case .virtualClock: due = now  // `handleTimeout` waits out OpenSSL's short real-time timer
        }
        guard due < at else { return }
        retransmitAt = due
        earlyRetransmissionDue = true
    }

    /// We are the client, sent our Finished and wait for the server's (its session ticket and ChangeCipherSpec may
    /// have arrived).
    private var awaitsServerFinished: Bool {
        let state = SSL_get_state(ssl)
        return role == .client && (state == TLS_ST_CW_FINISHED || state == TLS_ST_CR_SESSION_TICKET || state == TLS_ST_CR_CHANGE)
    }

    /// Runs the retransmission timer.
    public func handleTimeout(now: Instant) {
        guard let at = retransmitAt, at <= now, !isFailed else { return }
        let early = earlyRetransmissionDue
        earlyRetransmissionDue = false
        if !early && retransmissions + earlyRetransmissions >= maxRetransmissions {
            fail(OTError(.connectionTimedOut, "DTLS: handshake timed out after \(maxRetransmissions) retransmissions"))
            return
        }
        if case .virtualClock = timerMode {
            // OpenSSL's real-time timer is short; wait out what is left of it (bounded by `realTimer`).
            var waits = 0
            while let left = openSSLTimerLeft(), left > .zero, waits < 100 {
                waits += 1
                usleep(UInt32(clamping: min(left.microseconds, 100_000)))
            }
        }
        let r = otshim_dtls_handle_timeout(ssl)
        if r < 0 {
            _ = collectOutput()
            fail(OTError(.connectionTimedOut, "DTLS: handshake timed out (\(openSSLErrorString()))"))
            return
        }
        _ = collectOutput()
        guard !isConnected, let left = openSSLTimerLeft() else { retransmitAt = nil; return }
        guard r > 0 else {
            // OpenSSL's timer is not due: it restarted when OpenSSL repeated our flight on reading the peer's again.
            retransmitAt = now + max(left, .milliseconds(1))
            return
        }
        flightSentAt = nil
        if early {
            earlyRetransmissions += 1
        } else {
            retransmissions += 1
            rto = min(rto * 2, maxRTO)
        }
        retransmitAt = now + rto
    }

    public func pollTransmit() -> [UInt8]? { transmits.pop() }
    public func pollEvent() -> DTLSEvent? { events.pop() }
    public func pollTimeout() -> Instant? { retransmitAt }

    // MARK: internals

    private func fail(_ e: OTError) {
        guard !isFailed else { return }
        isFailed = true
        retransmitAt = nil
        events.push(.failed(e))
    }

    private func sslError(_ ret: Int32) -> Int32 { SSL_get_error(ssl, ret) }

    private func drive(now: Instant) {
        if !isConnected {
            let stateBefore = SSL_get_state(ssl)
            let ret = SSL_do_handshake(ssl)
            if ret == 1 {
                collectOutput()
                retransmitAt = nil
                finishHandshake()
            } else {
                let err = sslError(ret)
                let flight = collectOutput()
                if err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE {
                    let reason = openSSLErrorString()
                    if reason.contains("certificate") || reason.contains("verify") {
                        fail(OTError(.connectionRefused, "DTLS: remote certificate does not match the SDP fingerprint (\(reason))"))
                    } else {
                        fail(OTError(.connectionFailed, "DTLS: handshake failed (\(reason))"))
                    }
                    return
                }
                if openSSLTimerLeft() == nil {
                    retransmitAt = nil
                } else if !flight.isEmpty && SSL_get_state(ssl) != stateBefore {  // our next flight
                    rto = initialRTO
                    retransmissions = 0
                    earlyRetransmissions = 0
                    earlyRetransmissionDue = false
                    flightSentAt = now
                    retransmitAt = now + rto
                } else {
                    if !flight.isEmpty { flightSentAt = nil }  // OpenSSL repeated our flight on reading the peer's again
                    if retransmitAt == nil { retransmitAt = now + rto }
                }
            }
        }
        guard isConnected else { return }
        readApplicationData()
    }

    private func readApplicationData() {
        while true {
            let n = readBuffer.withUnsafeMutableBufferPointer { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                events.push(.applicationData(Array(readBuffer[0..<Int(n)])))
                continue
            }
            let err = sslError(n)
            if err == SSL_ERROR_ZERO_RETURN {
                if !closed { closed = true; events.push(.closed) }
            } else if err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE {
                ERR_clear_error()
            }
            break
        }
        collectOutput()  // e.g. our final flight again, when the peer repeated its own
    }

    private func finishHandshake() {
        var md = [UInt8](repeating: 0, count: 32)
        guard otshim_ssl_peer_cert_sha256(ssl, &md) == 1 else {
            fail(OTError(.connectionRefused, "DTLS: the peer sent no certificate"))
            return
        }
        if let fp = remoteFingerprint, fp.bytes != md {
            close()
            fail(OTError(.connectionRefused, "DTLS: remote certificate does not match the SDP fingerprint"))
            return
        }
        isConnected = true
        var material: SRTPKeyingMaterial?
        if let p = SSL_get_selected_srtp_profile(ssl), let profile = SRTPProfile(rawValue: UInt16(truncatingIfNeeded: p.pointee.id)) {
            let kl = profile.keyLength, sl = profile.saltLength
            var out = [UInt8](repeating: 0, count: 2 * (kl + sl))
            let label = "EXTRACTOR-dtls_srtp"
            let ok = out.withUnsafeMutableBufferPointer { o in
                SSL_export_keying_material(ssl, o.baseAddress, o.count, label, label.utf8.count, nil, 0, 0)
            }
            if ok == 1 {
                let clientKey = Array(out[0..<kl]), serverKey = Array(out[kl..<2 * kl])
                let clientSalt = Array(out[2 * kl..<2 * kl + sl]), serverSalt = Array(out[2 * kl + sl..<2 * kl + 2 * sl])
                material = role == .client
                    ? SRTPKeyingMaterial(profile: profile, localKey: clientKey, localSalt: clientSalt, remoteKey: serverKey, remoteSalt: serverSalt)
                    : SRTPKeyingMaterial(profile: profile, localKey: serverKey, localSalt: serverSalt, remoteKey: clientKey, remoteSalt: clientSalt)
            }
        }
        keyingMaterial = material
        events.push(.connected(material))
    }

    /// Moves every datagram OpenSSL wrote into the transmit queue; returns them.
    @discardableResult
    private func collectOutput() -> [[UInt8]] {
        var all: [UInt8] = []
        while otshim_bio_pending(wbio) > 0 {
            let n = Int(otshim_bio_pending(wbio))
            var buf = [UInt8](repeating: 0, count: n)
            let r = buf.withUnsafeMutableBufferPointer { BIO_read(wbio, $0.baseAddress, Int32(n)) }
            guard r > 0 else { break }
            all.append(contentsOf: buf[0..<Int(r)])
        }
        let out = Self.packRecords(all, mtu: mtu)
        transmits.push(contentsOf: out)
        return out
    }

    /// A memory BIO joins the datagrams OpenSSL wrote; split them back at record boundaries and pack whole
    /// records into datagrams of at most `mtu` bytes (OpenSSL already sized each record for the MTU).
    static func packRecords(_ bytes: [UInt8], mtu: Int) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var current: [UInt8] = []
        var i = 0
        while i < bytes.count {
            guard i + 13 <= bytes.count else { break }
            let end = min(bytes.count, i + 13 + (Int(bytes[i + 11]) << 8 | Int(bytes[i + 12])))
            if !current.isEmpty && current.count + (end - i) > mtu { out.append(current); current = [] }
            current.append(contentsOf: bytes[i..<end])
            i = end
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    private func openSSLErrorString() -> String {
        var parts: [String] = []
        while true {
            let e = ERR_get_error()
            if e == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(e, &buf, 256)
            parts.append(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.isEmpty ? "unknown error" : parts.joined(separator: "; ")
    }
}
