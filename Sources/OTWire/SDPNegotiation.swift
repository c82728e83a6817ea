import OTBase

/// A local audio or video track to announce (`a=msid`, `a=ssrc`, `a=ssrc-group:FID`).
public struct SDPLocalTrack: Sendable {
    public var ssrc: UInt32
    /// The RTX SSRC (video only), paired with `ssrc` by `a=ssrc-group:FID`.
    public var rtxSSRC: UInt32?
    public var streamID: String
    public var trackID: String
    public var cname: String
    /// False when the SSRC is not known yet (a router forwarding a publisher whose offer had no `a=ssrc`): the
    /// section then says only `a=msid`, and the receiver maps the stream by the MID header extension and the
    /// payload type (RFC 8843 §9.2).
    public var announcesSSRC = true
    public init(ssrc: UInt32, rtxSSRC: UInt32? = nil, streamID: String, trackID: String, cname: String, announcesSSRC: Bool = true) {
        self.ssrc = ssrc; self.rtxSSRC = rtxSSRC; self.streamID = streamID; self.trackID = trackID; self.cname = cname
        self.announcesSSRC = announcesSSRC
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
    /// Offer/answer an audio section; `track` nil means receive only.
    public var audio: Bool = true
    public var audioTrack: SDPLocalTrack?
    /// Offer/answer a video section (each format with RTX); `track` nil means receive only.
    public var video: Bool = true
    public var videoTrack: SDPLocalTrack?
    /// The payload formats we offer and accept per kind, in our order of preference: an offer lists them in this
    /// order; an answer takes the first of the offer's codecs (in the offerer's order) that one of them matches.
    public var audioFormats: [any RTPPayloadFormat] = [PayloadFormats.opus]
    public var videoFormats: [any RTPPayloadFormat] = [PayloadFormats.vp8]
    /// When answering, take the first of our formats (in our order) that the offer lists, instead of the offerer's
    /// order: a publisher answering a subscriber's offer sends the codec it prefers.
    public var answerInLocalOrder = false
    /// Offer/answer video forward error correction: ULPFEC (RFC 5109) inside RED (RFC 2198), as browsers do.
    public var videoFEC: Bool = true

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
    /// RED and ULPFEC payload types (video), when both sides list both: FEC may be sent inside RED. (Reading an answer
    /// for a section we only receive: our offer's when the answer left them out, see `otherCodecs`.)
    public var redPayloadType: UInt8? = nil
    public var ulpfecPayloadType: UInt8? = nil
    /// The other codecs we receive (when we read a remote answer): the answer's others that a format of ours matches,
    /// and those of our offer that the answer left out. The answerer may send any of them: a browser answering our
    /// offer sends our first codec whatever its own preference, even one its answer does not list. With their RTX
    /// payload types (RTX → media payload type).
    public var otherCodecs: [SDPCodec] = []
    public var otherRTXPayloadTypes: [UInt8: UInt8] = [:]
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

extension SDPNegotiatedMedia {
    /// The header-extension ids negotiated for this section, by meaning.
    public var extensionIds: RTPHeaderExtensionIds { RTPHeaderExtensionIds(extmaps: extmaps) }
    /// The payload format of the agreed codec (nil only for a codec no known format describes).
    public var format: (any RTPPayloadFormat)? { PayloadFormats.format(for: codec) }
    /// Media payload type → payload format for this section (RTX, RED and ULPFEC carry the media of `codec`; the
    /// other codecs' RTX theirs).
    public var payloadFormats: [UInt8: any RTPPayloadFormat] {
        guard let f = format else { return [:] }
        var map: [UInt8: any RTPPayloadFormat] = [codec.payloadType: f]
        for pt in [rtxPayloadType, redPayloadType, ulpfecPayloadType].compactMap({ $0 }) { map[pt] = f }
        for c in otherCodecs { map[c.payloadType] = PayloadFormats.format(for: c) }
        for (rtx, media) in otherRTXPayloadTypes { map[rtx] = map[media] }
        return map
    }
}

/// Builds offers and answers over ordered lists of payload formats (video with RTX, and ULPFEC inside RED) over one BUNDLEd, rtcp-muxed DTLS-SRTP transport.
public enum SDPNegotiation {
    public static let midExtension = MidExtension.uri
    public static let transportCCExtension = TransportWideSequenceNumber.uri
    /// The id our offers give the transport-wide sequence number (answers to them keep it): senders write it there.
    public static let transportCCExtensionId: UInt8 = 2
    /// The id our offers give the audio level (audio sections).
    public static let audioLevelExtensionId: UInt8 = 3

    /// The header extensions our offers list for a kind: MID, transport-wide sequence number, audio level (audio).
    static func offeredExtensions(_ kind: String) -> [SDPExtmap] {
        [SDPExtmap(id: 1, uri: midExtension), SDPExtmap(id: UInt16(transportCCExtensionId), uri: transportCCExtension)]
            + (kind == "audio" ? [SDPExtmap(id: UInt16(audioLevelExtensionId), uri: AudioLevelExtension.uri)] : [])
    }

    /// Header extensions accepted from a remote description (under its ids): MID, transport-wide sequence number,
    /// abs-send-time, and audio level for audio. Others (video orientation, playout delay, rid, ...) are left out of
    /// the answer, so the peer does not send them.
    static func accepts(_ e: SDPExtmap, kind: String) -> Bool {
        switch e.uri {
        case midExtension, transportCCExtension, AbsSendTime.uri: true
        case AudioLevelExtension.uri: kind == "audio"
        default: false
        }
    }

    /// The codec lines for audio formats: each under its preferred payload type.
    static func audioCodecs(_ formats: [any RTPPayloadFormat] = [PayloadFormats.opus]) -> [SDPCodec] {
        formats.map { $0.sdpCodec(payloadType: $0.preferredPayloadType) }
    }
    /// The codec lines for video formats: each under its preferred payload type followed by its RTX (the next
    /// payload type), then RED and ULPFEC when `fec`.
    static func videoCodecs(_ formats: [any RTPPayloadFormat] = [PayloadFormats.vp8], fec: Bool = true) -> [SDPCodec] {
        formats.flatMap { f -> [SDPCodec] in
            let pt = f.preferredPayloadType
            return [f.sdpCodec(payloadType: pt), SDPCodec(payloadType: pt + 1, name: "rtx", clockRate: f.clockRate, fmtp: "apt=\(pt)")]
        } + (fec ? [SDPCodec(payloadType: 100, name: "red", clockRate: 90000), SDPCodec(payloadType: 101, name: "ulpfec", clockRate: 90000)] : [])
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
        guard t.announcesSSRC else { return }
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

    /// An offer with `a=setup:actpass`, audio mid "0" and video mid "1" as asked, BUNDLEd on one transport: every
    /// section carries the same ICE credentials, fingerprint and candidates (the first is the BUNDLE tag).
    public static func offer(_ local: SDPLocalParameters) -> SessionDescription {
        var sd = baseDescription(local)
        var mids: [String] = []
        for (kind, enabled, codecs, track) in [("audio", local.audio, audioCodecs(local.audioFormats), local.audioTrack),
                                               ("video", local.video, videoCodecs(local.videoFormats, fec: local.videoFEC), local.videoTrack)] where enabled {
            var m = SDPMedia(kind: kind, formats: codecs.map { String($0.payloadType) })
            transportAttributes(&m, local, setup: .actpass)
            m.mid = String(mids.count)
            m.codecs = codecs
            m.extmaps = offeredExtensions(kind)
            m.direction = track == nil ? .recvonly : .sendrecv
            m.rtcpRsize = true
            addTrack(&m, track)
            m.candidates = local.candidates
            m.endOfCandidates = local.endOfCandidates
            mids.append(m.mid ?? "")
            sd.media.append(m)
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

    /// The RTX payload type (RFC 4588) that `codecs` pair with media payload type `pt` (`apt`), if any.
    private static func rtxPayloadType(of pt: UInt8, in codecs: [SDPCodec]) -> UInt8? {
        codecs.first { $0.name.lowercased() == "rtx" && $0.fmtpParameters["apt"] == String(pt) }?.payloadType
    }

    /// What one remote section agrees to: the first of its codecs (in its order) that one of `formats` matches.
    /// With `localOrder`, the first of `formats` that one of its codecs matches.
    private static func negotiateMedia(remote m: SDPMedia, formats: [any RTPPayloadFormat], localCodecs: [SDPCodec], remoteIsOffer: Bool,
                                       localTrack: SDPLocalTrack?, localOrder: Bool = false) -> SDPNegotiatedMedia? {
        guard !m.isRejected, let mid = m.mid else { return nil }
        var match: (SDPCodec, any RTPPayloadFormat)?
        if localOrder {
            for f in formats { if let c = m.codecs.first(where: { f.matches($0) }) { match = (c, f); break } }
        } else {
            for c in m.codecs { if let f = formats.first(where: { $0.matches(c) }) { match = (c, f); break } }
        }
        guard let (offered, format) = match else { return nil }
        var codec = offered
        let feedback = codec.rtcpFeedback.filter { format.rtcpFeedback.contains($0) }
        codec.rtcpFeedback = feedback
        func rtxType(_ pt: UInt8) -> UInt8? {
            localCodecs.contains { $0.name == "rtx" } ? rtxPayloadType(of: pt, in: m.codecs) : nil
        }
        let rtx = rtxType(codec.payloadType)
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
        var n = SDPNegotiatedMedia(kind: m.kind, mid: mid, codec: codec, rtxPayloadType: rtx, feedback: feedback,
                                   extmaps: m.extmaps.filter { accepts($0, kind: m.kind) },
                                   remoteSSRCs: m.ssrcList, remoteRTXSSRCs: fid, direction: dir)
        if !remoteIsOffer {
            n.otherCodecs = m.codecs.filter { c in c != offered && formats.contains { $0.matches(c) } }
            for c in n.otherCodecs { if let r = rtxType(c.payloadType) { n.otherRTXPayloadTypes[r] = c.payloadType } }
        }
        // ULPFEC inside RED: only both together, at the codec's clock rate.
        if localCodecs.contains(where: { $0.name == "red" }),
           let red = m.codecs.first(where: { $0.name.lowercased() == "red" && $0.clockRate == codec.clockRate }),
           let ulpfec = m.codecs.first(where: { $0.name.lowercased() == "ulpfec" && $0.clockRate == codec.clockRate }) {
            n.redPayloadType = red.payloadType
            n.ulpfecPayloadType = ulpfec.payloadType
        }
        return n
    }

    /// The remote candidates of the transport a description's `section` carries, and whether they are complete: the
    /// section's own, or (a sender that put them elsewhere) those of the other sections with the same ICE ufrag.
    private static func transportCandidates(_ sd: SessionDescription, section t: Int) -> ([SDPCandidate], Bool) {
        let tag = sd.media[t]
        if !tag.candidates.isEmpty || tag.endOfCandidates { return (tag.candidates, tag.endOfCandidates) }
        let ufrag = sd.iceCredentials(of: tag)?.ufrag
        let same = sd.media.filter { !$0.isRejected && sd.iceCredentials(of: $0)?.ufrag == ufrag }
        var seen = Set<TransportAddress>()
        return (same.flatMap(\.candidates).filter { seen.insert($0.address).inserted }, same.contains { $0.endOfCandidates })
    }

    /// Answers a remote offer made under any bundle policy (JSEP RFC 8829, BUNDLE RFC 8843). Everything goes over one
    /// transport, so: with a BUNDLE group, the answer's tag is the first mid of the group whose section it accepts
    /// (RFC 8843 §7.3.1) and whose transport (ICE credentials, candidates, fingerprint, setup) is used; the group's
    /// other audio and video sections are accepted too, the first of each kind. Without a group only the first
    /// section it can accept is. Accepted: the first codec of a section (in the offerer's order) that one of our
    /// formats (`audioFormats`, `videoFormats`) matches, with its RTX, with rtcp-mux; every other codec of the
    /// section is left out of the answer. Everything else (other kinds, codecs, a second section of a kind,
    /// sections outside the group) is rejected with port 0. Accepted sections all carry our candidates. We take
    /// the DTLS client role for `actpass`.
    public static func answer(to offer: SessionDescription, local: SDPLocalParameters) throws -> (SessionDescription, SDPNegotiated) {
        func localMedia(_ kind: String) -> ([any RTPPayloadFormat], [SDPCodec], SDPLocalTrack?)? {
            switch kind {
            case "audio" where local.audio: (local.audioFormats, audioCodecs(local.audioFormats), local.audioTrack)
            case "video" where local.video: (local.videoFormats, videoCodecs(local.videoFormats, fec: local.videoFEC), local.videoTrack)
            default: nil
            }
        }
        // What each section would agree to on its own.
        var possible: [Int: SDPNegotiatedMedia] = [:]
        for (i, m) in offer.media.enumerated() {
            guard let (formats, codecs, track) = localMedia(m.kind),
                  let n = negotiateMedia(remote: m, formats: formats, localCodecs: codecs, remoteIsOffer: true, localTrack: track,
                                         localOrder: local.answerInLocalOrder) else { continue }
            possible[i] = n
        }
        let group = (offer.bundleMids ?? []).compactMap { mid in offer.media.firstIndex { $0.mid == mid } }
        let tag = group.first { possible[$0] != nil && offer.media[$0].port != 0 && offer.media[$0].rtcpMux }
        var accepted: [Int] = []
        if let tag {
            var kinds: Set<String> = []
            for i in [tag] + group where possible[i] != nil && kinds.insert(offer.media[i].kind).inserted { accepted.append(i) }
        } else if let first = offer.media.indices.first(where: { possible[$0] != nil && offer.media[$0].port != 0 && offer.media[$0].rtcpMux }) {
            accepted = [first]
        }
        guard let t = accepted.first else { throw OTError(.invalidParameter, "offer: no section with rtcp-mux and a codec we have a format for") }
        let (ufrag, pwd, fp) = try remoteTransport(offer, offer.media[t], "offer")
        let localSetup: SDPSetupRole
        switch offer.setup(of: offer.media[t]) ?? .actpass {
        case .actpass, .passive: localSetup = .active
        case .active: localSetup = .passive
        case .holdconn: throw OTError(.invalidParameter, "offer: a=setup:holdconn is not supported")
        }
        var sd = baseDescription(local)
        var agreed: [SDPNegotiatedMedia] = []
        for (i, m) in offer.media.enumerated() {
            var am = SDPMedia(kind: m.kind, port: 0, proto: m.proto, formats: m.formats)
            am.mid = m.mid
            if accepted.contains(i), let n = possible[i], let (_, _, track) = localMedia(m.kind) {
                am.port = 9
                transportAttributes(&am, local, setup: localSetup)
                var codecs = [n.codec]
                if let rtx = n.rtxPayloadType, let r = m.codec(rtx) { codecs.append(r) }
                if let red = n.redPayloadType, let ulpfec = n.ulpfecPayloadType, let r = m.codec(red), let u = m.codec(ulpfec) {
                    codecs += [r, u]
                }
                am.codecs = codecs
                am.formats = codecs.map { String($0.payloadType) }
                am.extmaps = n.extmaps
                am.direction = n.direction
                am.rtcpRsize = m.rtcpRsize
                if n.direction == .sendrecv || n.direction == .sendonly {
                    var tr = track
                    if n.rtxPayloadType == nil { tr?.rtxSSRC = nil }
                    addTrack(&am, tr)
                }
                // RFC 8843 §10 wants them in the tag only; repeated here (same transport) because some stacks (aiortc
                // under max-bundle) read a shared transport's candidates from the last section they see.
                am.candidates = local.candidates
                am.endOfCandidates = local.endOfCandidates
                agreed.append(n)
            } else {
                am.codecs = m.codecs
                am.direction = .inactive
            }
            sd.media.append(am)
        }
        if tag != nil { sd.groups = [("BUNDLE", accepted.compactMap { offer.media[$0].mid })] }
        let (candidates, complete) = transportCandidates(offer, section: t)
        var neg = SDPNegotiated(remoteIceUfrag: ufrag, remoteIcePwd: pwd, remoteIceLite: offer.iceLite, remoteFingerprint: fp,
                                remoteCandidates: candidates, localIsDTLSClient: localSetup == .active,
                                media: accepted.sorted().compactMap { possible[$0] })
        neg.remoteEndOfCandidates = complete
        return (sd, neg)
    }

    /// What the answerer may send us besides what its answer lists: the rest of our offer (RFC 3264 §5.1 has the offerer
    /// ready to receive every format of its offer). Chromium, answering with codec preferences or a munged answer, sends
    /// the offer's first codec and wraps video in the offer's RED whatever its answer lists. So our offered codecs the
    /// answer left out (with their RTX, when RTX was agreed) and, in a section we only receive, our RED and ULPFEC, each
    /// under our payload type unless the answer uses that type for something else. (Sending, we keep to the answer.)
    /// An answer with no RTX at all takes none: its answerer declares no RTX SSRC and resends packets as they were.
    private static func receiveOfferedFormats(_ n: inout SDPNegotiatedMedia, offered om: SDPMedia, answered m: SDPMedia,
                                              formats: [any RTPPayloadFormat]) {
        let answered = Set(m.codecs.map(\.payloadType))
        for c in om.codecs where !answered.contains(c.payloadType) && formats.contains(where: { $0.matches(c) }) {
            n.otherCodecs.append(c)
            if n.rtxPayloadType != nil, let r = rtxPayloadType(of: c.payloadType, in: om.codecs), !answered.contains(r) {
                n.otherRTXPayloadTypes[r] = c.payloadType
            }
        }
        if n.redPayloadType == nil, n.direction == .recvonly, let red = om.codec(named: "red"), let ulpfec = om.codec(named: "ulpfec"),
           red.clockRate == n.codec.clockRate, ulpfec.clockRate == n.codec.clockRate,
           !answered.contains(red.payloadType), !answered.contains(ulpfec.payloadType) {
            n.redPayloadType = red.payloadType
            n.ulpfecPayloadType = ulpfec.payloadType
        }
    }

    /// Reads the remote answer to our offer: the transport is that of its BUNDLE tag (or of its first accepted
    /// section when it did not bundle).
    public static func accept(answer: SessionDescription, offer: SessionDescription) throws -> SDPNegotiated {
        guard let (_, t) = answer.transportSection else { throw OTError(.invalidParameter, "answer: every m-section is rejected") }
        let (ufrag, pwd, fp) = try remoteTransport(answer, answer.media[t], "answer")
        let setup = answer.setup(of: answer.media[t])
        guard setup == .active || setup == .passive else {
            throw OTError(.invalidParameter, "answer: a=setup must be active or passive, got \(setup?.rawValue ?? "none")")
        }
        var agreed: [SDPNegotiatedMedia] = []
        for m in answer.media {
            guard let om = offer.media.first(where: { $0.mid == m.mid && $0.mid != nil }) else {
                throw OTError(.invalidParameter, "answer: mid \(m.mid ?? "(none)") is not in the offer")
            }
            // The formats we offered in this section, in our order.
            let formats = om.codecs.compactMap { PayloadFormats.format(for: $0) }
            let codecs = om.kind == "audio" ? audioCodecs(formats) : om.kind == "video" ? videoCodecs(formats, fec: om.codec(named: "ulpfec") != nil) : []
            if let n = negotiateMedia(remote: m, formats: formats, localCodecs: codecs, remoteIsOffer: false, localTrack: nil) {
                var n = n
                n.direction = switch m.direction ?? .sendrecv {
                case .sendrecv: om.direction ?? .sendrecv
                case .sendonly: .recvonly
                case .recvonly: .sendonly
                case .inactive: .inactive
                }
                receiveOfferedFormats(&n, offered: om, answered: m, formats: formats)
                agreed.append(n)
            }
        }
        let (candidates, complete) = transportCandidates(answer, section: t)
        var neg = SDPNegotiated(remoteIceUfrag: ufrag, remoteIcePwd: pwd, remoteIceLite: answer.iceLite, remoteFingerprint: fp,
                                remoteCandidates: candidates, localIsDTLSClient: setup == .passive, media: agreed)
        neg.remoteEndOfCandidates = complete
        return neg
    }
}
