import OTBase

/// Entry points that feed arbitrary bytes through the receive-side parsers, for the fuzz target
/// (`Fuzz/`) and the seeded fuzz tests. Every input must return normally: parsers throw, never trap.
public enum FuzzHarness {
    /// Parses `data` as RTP; on success looks up extensions, parses the VP8 descriptor and Opus TOC, and
    /// feeds the packet to `depacketizer`. Returns the number of events the depacketizer produced.
    @discardableResult
    public static func rtpVP8(_ data: [UInt8], depacketizer: inout VP8Depacketizer) -> Int {
        _ = try? VP8PayloadDescriptor.parse(data[...])
        _ = VP8FrameHeader.keyframeSize(data[...])
        _ = try? OpusPayload.packetInfo(data[...])
        guard let packet = try? RTPPacket(parsing: data) else { return 0 }
        for e in packet.extensions.elements {
            _ = try? AbsSendTime.decode(e.value)
            _ = try? TransportWideSequenceNumber.decode(e.value)
            _ = try? AudioLevelExtension.decode(e.value)
            _ = try? MidExtension.decode(e.value)
        }
        _ = packet.extensions.value(id: 1)
        var out: [UInt8] = []
        for r in rewriters {
            r.rewrite(data, into: &out, now: Instant(micros: 1_234_567))
            _ = RTPHeaderExtensions.valueRange(in: data, id: r.source.audioLevel ?? 1)
        }
        var events = 0
        depacketizer.insert(packet) { event in
            events += 1
            if case .frame(let f) = event { _ = VP8FrameHeader.keyframeSize(f.data) }
        }
        return events
    }

    /// Parses `data` as a VP9 payload (descriptor, RFC 9628, and uncompressed frame header) and as RTP; on success asks
    /// the format what the router asks (keyframe start, frame id) and feeds the packet to `depacketizer`. Returns the
    /// number of events the depacketizer produced.
    @discardableResult
    public static func rtpVP9(_ data: [UInt8], depacketizer: inout VP9Depacketizer) -> Int {
        _ = try? VP9PayloadDescriptor.parse(data[...])
        _ = VP9FrameHeader.parse(data[...])
        let format = VP9PayloadFormat()
        _ = PayloadFormats.isKeyframeStart(format, rtpPacket: data)
        guard let packet = try? RTPPacket(parsing: data) else { return 0 }
        _ = format.isKeyframeStart(packet.payload)
        _ = format.frameID(packet.payload)
        _ = VP9PayloadReader.read(packet.payload)
        var events = 0
        depacketizer.insert(packet) { event in
            events += 1
            if case .frame(let f) = event { _ = VP9FrameHeader.keyframeSize(f.data) }
        }
        return events
    }

    /// The project the control-plane harness signs with (so mutated claims reach the checks behind the signature).
    public static let controlKey = "12345678", controlSecret = "00112233445566778899aabbccddeeff00112233"
    /// The time the control-plane harness verifies tokens at.
    public static let controlNow: Int64 = 1_796_045_300

    /// Feeds `data` to every control-plane parser of untrusted input: HTTP requests and responses (whole and byte by
    /// byte), WebSocket frames (both masking rules), signaling JSON (re-encoded, rosters split), JSON values, tokens
    /// (as given, and `data` signed as JWT claims or as T1 data, so absurd numbers reach the time checks), REST
    /// authentication, session ids and form encoding. Returns how many of the parsers accepted it.
    @discardableResult
    public static func control(_ data: [UInt8]) -> Int {
        var accepted = 0
        var req = HTTPParser(kind: .request, maxHeadBytes: 2048, maxBodyBytes: 4096)
        req.append(data)
        while let r = try? req.nextRequest() { accepted += 1; _ = r.query; _ = r.serialized() }
        var trickle = HTTPParser(kind: .request, maxHeadBytes: 2048, maxBodyBytes: 4096)
        for b in data.prefix(512) {
            trickle.append([b])
            _ = try? trickle.nextRequest()
        }
        var resp = HTTPParser(kind: .response, maxBodyBytes: 4096)
        resp.append(data)
        if (try? resp.nextResponse()) != nil { accepted += 1 }
        for masked in [true, false] {
            var ws = WebSocketReader(requireMasked: masked, maxMessageBytes: 4096)
            ws.append(data)
            while let m = try? ws.next() { accepted += 1; if case .close = m { break } }
        }
        let text = String(decoding: data, as: UTF8.self)
        if let m = try? SignalingCodec.decodeClient(text) { accepted += 1; _ = try? SignalingCodec.decodeClient(SignalingCodec.encode(m)) }
        if let m = try? SignalingCodec.decodeServer(text) {
            accepted += 1
            for f in SignalingCodec.encodeFrames(m, maxBytes: 512) { _ = try? SignalingCodec.decodeServer(f) }
        }
        if let v = try? JSONValue.parse(data) {
            accepted += 1
            _ = v.serialized()
            if case .object(let claims) = v, let token = try? JWT.sign(claims: claims, secret: controlSecret) {
                if (try? ClientToken.verify(token, apiKey: controlKey, secret: controlSecret, now: controlNow)) != nil { accepted += 1 }
                if (try? ProjectAuth.verify(token, apiKey: controlKey, secret: controlSecret, now: controlNow)) != nil { accepted += 1 }
            }
        }
        let t1sig = TokenCrypto.hex(TokenCrypto.hmacSHA1(key: Array(controlSecret.utf8), data))
        let t1 = "T1==" + TokenCrypto.base64(Array("partner_id=\(controlKey)&sig=\(t1sig):".utf8) + data)
        if (try? ClientToken.verify(t1, apiKey: controlKey, secret: controlSecret, now: controlNow)) != nil { accepted += 1 }
        if (try? ClientToken.verify(text, apiKey: controlKey, secret: controlSecret, now: controlNow)) != nil { accepted += 1 }
        _ = ClientToken.claimedAPIKey(text)
        _ = try? SessionID.parse(text)
        _ = FormEncoding.decode(text)
        _ = TokenTime.seconds(text)
        return accepted
    }

    /// What a router holds for a receiver with one-byte ids and for one with two-byte ids (and a long MID).
    static let rewriters = [
        RTPExtensionRewriter(source: RTPHeaderExtensionIds(transportSequenceNumber: 3, mid: 4, audioLevel: 1),
                             target: RTPHeaderExtensionIds(absSendTime: 2, transportSequenceNumber: 5, mid: 9, audioLevel: 1), mid: "1"),
        RTPExtensionRewriter(source: RTPHeaderExtensionIds(audioLevel: 20),
                             target: RTPHeaderExtensionIds(absSendTime: 15, transportSequenceNumber: 200, mid: 3, audioLevel: 16),
                             mid: "a-mid-longer-than-16-bytes"),
    ]

    /// Our parameters when answering or offering in the fuzz targets: an audio track without a known SSRC, a video
    /// track with RTX.
    static let local: SDPLocalParameters = {
        var l = SDPLocalParameters(iceUfrag: "fuzz", icePwd: "fuzzfuzzfuzzfuzzfuzzfu", fingerprint: SDPFingerprint(algorithm: "sha-256", bytes: Array(0..<32)))
        l.videoTrack = SDPLocalTrack(ssrc: 5, rtxSSRC: 6, streamID: "s", trackID: "v", cname: "c")
        l.audioTrack = SDPLocalTrack(ssrc: 7, streamID: "s", trackID: "a", cname: "c", announcesSSRC: false)
        return l
    }()
    static let offer = SDPNegotiation.offer(local)

    /// Negotiates a parsed description both ways: answers it as an offer (returned, nil when refused) and reads it as
    /// the answer to our offer.
    public static func negotiate(_ sd: SessionDescription) -> SessionDescription? {
        _ = sd.transportSection
        _ = try? SDPNegotiation.accept(answer: sd, offer: offer)
        return (try? SDPNegotiation.answer(to: sd, local: local))?.0
    }
}
