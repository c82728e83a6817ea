import OTBase

/// A local audio or video track to announce (`a=msid`, `a=ssrc`, `a=ssrc-group:FID`).
public struct SDPLocalTrack: Sendable {
    public var ssrc: UInt32
    /// The RTX SSRC (video only), paired with `ssrc` by `a=ssrc-group:FID`.
    public var rtxSSRC: UInt32?
    public var streamID: String
    public var trackID: String
    public var cname: String
    public init(ssrc: UInt32, rtxSSRC: UInt32? = nil, streamID: String, trackID: String, cname: String) {
        self.ssrc = ssrc; self.rtxSSRC = rtxSSRC; self.streamID = streamID; self.trackID = trackID; self.cname = cname
    }
}

/// What the local side puts into an offer or an answer.
public struct SDPLocalParameters: Sendable {
    public var iceUfrag: String
    public var icePwd: String
    public var fingerprint: SDPFingerprint
    public var candidates: [SDPCandidate] = []
    public var endOfCandidates = false
    public var iceLite = false
    public var sessionID: UInt64 = 1
    /// Offer/answer an audio section (Opus); `track` nil means receive only.
    public var audio: Bool = true
    public var audioTrack: SDPLocalTrack?
    /// Offer/answer a video section (VP8 + RTX); `track` nil means receive only.
    public var video: Bool = true
    public var videoTrack: SDPLocalTrack?

    public init(iceUfrag: String, icePwd: String, fingerprint: SDPFingerprint) {
        self.iceUfrag = iceUfrag; self.icePwd = icePwd; self.fingerprint = fingerprint
    }
}

/// What both sides agreed for one m-section.
public struct SDPNegotiatedMedia: Equatable, Sendable {
    public var kind: String
    public var mid: String
    public var codec: SDPCodec
    /// RTX payload type for `codec` (RFC 4588), when both sides do RTX.
    public var rtxPayloadType: UInt8?
    /// RTCP feedback both sides listed for the codec (e.g. "nack", "nack pli", "ccm fir", "transport-cc").
    public var feedback: [String]
    public var extmaps: [SDPExtmap]
    public var remoteSSRCs: [UInt32]
    /// Remote (media SSRC, RTX SSRC) pairs from `a=ssrc-group:FID`.
    public var remoteRTXSSRCs: [UInt32: UInt32]
    public var direction: SDPDirection
}

/// The transport parameters and media both sides agreed (JSEP subset: everything BUNDLEd on one transport).
public struct SDPNegotiated: Equatable, Sendable {
    public var remoteIceUfrag: String
    public var remoteIcePwd: String
    public var remoteIceLite: Bool
    public var remoteFingerprint: SDPFingerprint
    public var remoteCandidates: [SDPCandidate]
    /// True when the local side is the DTLS client (`a=setup:active` locally).
    public var localIsDTLSClient: Bool
    public var media: [SDPNegotiatedMedia]
    /// The remote description said `a=end-of-candidates` (no candidates will be trickled).
    public var remoteEndOfCandidates = false
}

/// Builds offers and answers for Opus/VP8 over one BUNDLEd, rtcp-muxed DTLS-SRTP transport.
public enum SDPNegotiation {
    public static let midExtension = "urn:ietf:params:rtp-hdrext:sdes:mid"
    public static let transportCCExtension = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    static let supportedExtensions = [midExtension, transportCCExtension]
    /// The id our offers give the transport-wide sequence number (answers to them keep it): senders write it there.
    public static let transportCCExtensionId = UInt8(truncatingIfNeeded: (supportedExtensions.firstIndex(of: transportCCExtension) ?? 0) + 1)
    static let videoFeedback = ["nack", "nack pli", "ccm fir", "transport-cc"]
    static let audioFeedback = ["transport-cc"]

    static func audioCodecs() -> [SDPCodec] {
        [SDPCodec(payloadType: 111, name: "opus", clockRate: 48000, channels: 2, fmtp: "minptime=10;useinbandfec=1", rtcpFeedback: audioFeedback)]
    }
    static func videoCodecs() -> [SDPCodec] {
        [SDPCodec(payloadType: 96, name: "VP8", clockRate: 90000, rtcpFeedback: videoFeedback),
         SDPCodec(payloadType: 97, name: "rtx", clockRate: 90000, fmtp: "apt=96")]
    }

    private static func transportAttributes(_ m: inout SDPMedia, _ local: SDPLocalParameters, setup: SDPSetupRole) {
        m.connection = "IN IP4 0.0.0.0"
        m.rtcp = "9 IN IP4 0.0.0.0"
        m.iceUfrag = local.iceUfrag
        m.icePwd = local.icePwd
        m.iceOptions = local.iceLite ? [] : ["trickle"]
        m.fingerprints = [local.fingerprint]
        m.setup = setup
        m.rtcpMux = true
    }

    private static func addTrack(_ m: inout SDPMedia, _ t: SDPLocalTrack?) {
        guard let t else { return }
        m.msids = [SDPMSID(stream: t.streamID, track: t.trackID)]
        if let rtx = t.rtxSSRC { m.ssrcGroups = [SDPSSRCGroup(semantics: "FID", ssrcs: [t.ssrc, rtx])] }
        for s in [t.ssrc] + (t.rtxSSRC.map { [$0] } ?? []) {
            m.ssrcs.append(SDPSSRC(ssrc: s, attribute: "cname", value: t.cname))
            m.ssrcs.append(SDPSSRC(ssrc: s, attribute: "msid", value: "\(t.streamID) \(t.trackID)"))
        }
    }

    private static func baseDescription(_ local: SDPLocalParameters) -> SessionDescription {
        var sd = SessionDescription()
        sd.sessionID = local.sessionID
        sd.sessionVersion = 2
        sd.iceLite = local.iceLite
        sd.msidSemantic = "WMS *"
        return sd
    }

    /// An offer with `a=setup:actpass`, audio mid "0" and video mid "1" as asked, BUNDLEd.
    public static func offer(_ local: SDPLocalParameters) -> SessionDescription {
        var sd = baseDescription(local)
        var mids: [String] = []
        for (kind, enabled, codecs, track) in [("audio", local.audio, audioCodecs(), local.audioTrack), ("video", local.video, videoCodecs(), local.videoTrack)] where enabled {
            var m = SDPMedia(kind: kind, formats: codecs.map { String($0.payloadType) })
            transportAttributes(&m, local, setup: .actpass)
            m.mid = String(mids.count)
            m.codecs = codecs
            m.extmaps = supportedExtensions.enumerated().map { SDPExtmap(id: UInt16($0.offset + 1), uri: $0.element) }
            m.direction = track == nil ? .recvonly : .sendrecv
            m.rtcpRsize = true
            addTrack(&m, track)
            mids.append(m.mid ?? "")
            sd.media.append(m)
        }
        // JSEP (RFC 8829 §5.2.1, RFC 8843): with BUNDLE the candidates belong to the BUNDLE-tag section, the first.
        if !sd.media.isEmpty {
            sd.media[0].candidates = local.candidates
            sd.media[0].endOfCandidates = local.endOfCandidates
        }
        sd.groups = [("BUNDLE", mids)]
        return sd
    }

    private static func remoteTransport(_ sd: SessionDescription, _ m: SDPMedia, _ role: String) throws -> (String, String, SDPFingerprint) {
        guard let creds = sd.iceCredentials(of: m) else { throw OTError(.invalidParameter, "\(role): m-section \(m.mid ?? "?") has no a=ice-ufrag/a=ice-pwd") }
        guard let fp = sd.fingerprint(of: m) else { throw OTError(.invalidParameter, "\(role): m-section \(m.mid ?? "?") has no a=fingerprint") }
        guard fp.algorithm == "sha-256" else { throw OTError(.invalidParameter, "\(role): fingerprint hash \(fp.algorithm) is not supported (need sha-256)") }
        return (creds.ufrag, creds.pwd, fp)
    }

    private static func negotiateMedia(remote m: SDPMedia, localCodecs: [SDPCodec], remoteIsOffer: Bool, localTrack: SDPLocalTrack?) -> SDPNegotiatedMedia? {
        guard !m.isRejected, let mid = m.mid, let primary = localCodecs.first,
              var codec = m.codec(named: primary.name), codec.clockRate == primary.clockRate else { return nil }
        let feedback = codec.rtcpFeedback.filter { primary.rtcpFeedback.contains($0) }
        codec.rtcpFeedback = feedback
        let rtx = localCodecs.contains { $0.name == "rtx" }
            ? m.codecs.first { $0.name.lowercased() == "rtx" && $0.fmtpParameters["apt"] == String(codec.payloadType) }?.payloadType : nil
        var fid: [UInt32: UInt32] = [:]
        for g in m.ssrcGroups where g.semantics == "FID" && g.ssrcs.count == 2 { fid[g.ssrcs[0]] = g.ssrcs[1] }
        let remoteDir = m.direction ?? .sendrecv
        let dir: SDPDirection
        if !remoteIsOffer {
            switch remoteDir { case .sendrecv: dir = localTrack == nil ? .recvonly : .sendrecv
            case .recvonly: dir = .sendonly
            case .sendonly: dir = .recvonly
            case .inactive: dir = .inactive }
        } else {
            switch (remoteDir, localTrack != nil) {
            case (.sendrecv, true): dir = .sendrecv
            case (.sendrecv, false), (.sendonly, _): dir = .recvonly
            case (.recvonly, true): dir = .sendonly
            default: dir = .inactive
            }
        }
        return SDPNegotiatedMedia(kind: m.kind, mid: mid, codec: codec, rtxPayloadType: rtx, feedback: feedback,
                                  extmaps: m.extmaps.filter { supportedExtensions.contains($0.uri) },
                                  remoteSSRCs: m.ssrcList, remoteRTXSSRCs: fid, direction: dir)
    }

    /// Answers a remote offer: accepts Opus audio and VP8 video sections it can, rejects others (port 0),
    /// BUNDLEs the accepted ones and takes the DTLS client role for `actpass`.
    public static func answer(to offer: SessionDescription, local: SDPLocalParameters) throws -> (SessionDescription, SDPNegotiated) {
        guard let first = offer.media.first(where: { !$0.isRejected }) else { throw OTError(.invalidParameter, "offer: no m-section to accept") }
        let (ufrag, pwd, fp) = try remoteTransport(offer, first, "offer")
        let remoteSetup = offer.setup(of: first) ?? .actpass
        let localSetup: SDPSetupRole
        switch remoteSetup {
        case .actpass, .passive: localSetup = .active
        case .active: localSetup = .passive
        case .holdconn: throw OTError(.invalidParameter, "offer: a=setup:holdconn is not supported")
        }
        var sd = baseDescription(local)
        var agreed: [SDPNegotiatedMedia] = []
        var candidates: [SDPCandidate] = []
        for m in offer.media {
            candidates += m.candidates
            let (codecs, track): ([SDPCodec], SDPLocalTrack?) = switch m.kind {
            case "audio" where local.audio: (audioCodecs(), local.audioTrack)
            case "video" where local.video: (videoCodecs(), local.videoTrack)
            default: ([], nil)
            }
            var am = SDPMedia(kind: m.kind, port: 0, proto: m.proto, formats: m.formats)
            am.mid = m.mid
            if !codecs.isEmpty, m.rtcpMux, let n = negotiateMedia(remote: m, localCodecs: codecs, remoteIsOffer: true, localTrack: track) {
                am.port = 9
                transportAttributes(&am, local, setup: localSetup)
                var accepted = [n.codec]
                if let rtx = n.rtxPayloadType, let r = m.codec(rtx) { accepted.append(r) }
                am.codecs = accepted
                am.formats = accepted.map { String($0.payloadType) }
                am.extmaps = n.extmaps
                am.direction = n.direction
                am.rtcpRsize = m.rtcpRsize
                if n.direction == .sendrecv || n.direction == .sendonly {
                    var t = track
                    if n.rtxPayloadType == nil { t?.rtxSSRC = nil }
                    addTrack(&am, t)
                }
                agreed.append(n)
            } else {
                am.codecs = m.codecs
                am.direction = .inactive
            }
            sd.media.append(am)
        }
        guard !agreed.isEmpty else { throw OTError(.invalidParameter, "offer: no section with rtcp-mux and Opus or VP8 to accept") }
        // The BUNDLE-tag section (the first accepted one) carries the transport's candidates (RFC 8843 §7.1).
        if let i = sd.media.firstIndex(where: { !$0.isRejected }) {
            sd.media[i].candidates = local.candidates
            sd.media[i].endOfCandidates = local.endOfCandidates
        }
        sd.groups = [("BUNDLE", agreed.map(\.mid))]
        var neg = SDPNegotiated(remoteIceUfrag: ufrag, remoteIcePwd: pwd, remoteIceLite: offer.iceLite, remoteFingerprint: fp,
                                remoteCandidates: candidates, localIsDTLSClient: localSetup == .active, media: agreed)
        neg.remoteEndOfCandidates = offer.media.contains { $0.endOfCandidates }
        return (sd, neg)
    }

    /// Reads the remote answer to our offer.
    public static func accept(answer: SessionDescription, offer: SessionDescription) throws -> SDPNegotiated {
        guard let first = answer.media.first(where: { !$0.isRejected }) else { throw OTError(.invalidParameter, "answer: every m-section is rejected") }
        let (ufrag, pwd, fp) = try remoteTransport(answer, first, "answer")
        let setup = answer.setup(of: first)
        guard setup == .active || setup == .passive else {
            throw OTError(.invalidParameter, "answer: a=setup must be active or passive, got \(setup?.rawValue ?? "none")")
        }
        var agreed: [SDPNegotiatedMedia] = []
        var candidates: [SDPCandidate] = []
        for m in answer.media {
            candidates += m.candidates
            guard let om = offer.media.first(where: { $0.mid == m.mid && $0.mid != nil }) else {
                throw OTError(.invalidParameter, "answer: mid \(m.mid ?? "(none)") is not in the offer")
            }
            let codecs = om.kind == "audio" ? audioCodecs() : om.kind == "video" ? videoCodecs() : []
            if let n = negotiateMedia(remote: m, localCodecs: codecs, remoteIsOffer: false, localTrack: nil) {
                var n = n
                n.direction = switch m.direction ?? .sendrecv {
                case .sendrecv: om.direction ?? .sendrecv
                case .sendonly: .recvonly
                case .recvonly: .sendonly
                case .inactive: .inactive
                }
                agreed.append(n)
            }
        }
        var neg = SDPNegotiated(remoteIceUfrag: ufrag, remoteIcePwd: pwd, remoteIceLite: answer.iceLite, remoteFingerprint: fp,
                                remoteCandidates: candidates, localIsDTLSClient: setup == .passive, media: agreed)
        neg.remoteEndOfCandidates = answer.media.contains { $0.endOfCandidates }
        return neg
    }
}
