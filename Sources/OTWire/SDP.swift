import OTBase

/// DTLS role attribute `a=setup:` (RFC 4145 / RFC 5763).
public enum SDPSetupRole: String, Sendable { case active, passive, actpass, holdconn }

/// Media direction attributes.
public enum SDPDirection: String, Sendable { case sendrecv, sendonly, recvonly, inactive }

/// `a=fingerprint:<hash> <hex:hex:...>` (RFC 8122).
public struct SDPFingerprint: Hashable, Sendable, CustomStringConvertible {
    public var algorithm: String
    public var bytes: [UInt8]
    public init(algorithm: String, bytes: [UInt8]) { self.algorithm = algorithm.lowercased(); self.bytes = bytes }
    public init(parsing value: some StringProtocol) throws {
        let parts = value.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 else { throw WireError("fingerprint: expected \"<hash> <hex>\", got \"\(value)\"") }
        var out: [UInt8] = []
        for octet in parts[1].split(separator: ":", omittingEmptySubsequences: false) {
            guard octet.count == 2, let b = UInt8(octet, radix: 16) else { throw WireError("fingerprint: bad hex octet \"\(octet)\"") }
            out.append(b)
        }
        let alg = parts[0].lowercased()
        let expected = ["sha-1": 20, "sha-224": 28, "sha-256": 32, "sha-384": 48, "sha-512": 64][alg]
        if let expected, expected != out.count { throw WireError("fingerprint: \(alg) needs \(expected) bytes, got \(out.count)") }
        self.init(algorithm: alg, bytes: out)
    }
    public var description: String {
        algorithm + " " + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined(separator: ":")
    }
}

/// An RTP payload format: `a=rtpmap`, `a=fmtp` and `a=rtcp-fb` lines for one payload type.
public struct SDPCodec: Equatable, Sendable {
    public var payloadType: UInt8
    public var name: String
    public var clockRate: UInt32
    public var channels: UInt16?
    public var fmtp: String?
    public var rtcpFeedback: [String]
    public init(payloadType: UInt8, name: String, clockRate: UInt32, channels: UInt16? = nil, fmtp: String? = nil, rtcpFeedback: [String] = []) {
        self.payloadType = payloadType; self.name = name; self.clockRate = clockRate
        self.channels = channels; self.fmtp = fmtp; self.rtcpFeedback = rtcpFeedback
    }
    /// `fmtp` as key=value pairs (`apt=96;minptime=10`).
    public var fmtpParameters: [String: String] {
        var d: [String: String] = [:]
        for kv in (fmtp ?? "").split(separator: ";") {
            let p = kv.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            d[p[0].trimmingSpaces()] = p.count > 1 ? p[1].trimmingSpaces() : ""
        }
        return d
    }
}

/// `a=extmap:<id>[/<direction>] <uri> [<attributes>]` (RFC 8285).
public struct SDPExtmap: Equatable, Sendable {
    public var id: UInt16
    public var direction: SDPDirection?
    public var uri: String
    public var attributes: String?
    public init(id: UInt16, direction: SDPDirection? = nil, uri: String, attributes: String? = nil) {
        self.id = id; self.direction = direction; self.uri = uri; self.attributes = attributes
    }
}

/// `a=ssrc:<ssrc> <attribute>[:<value>]` (RFC 5576).
public struct SDPSSRC: Equatable, Sendable {
    public var ssrc: UInt32
    public var attribute: String
    public var value: String?
    public init(ssrc: UInt32, attribute: String, value: String? = nil) { self.ssrc = ssrc; self.attribute = attribute; self.value = value }
}

/// `a=ssrc-group:<semantics> <ssrc>...` (FID pairs a media SSRC with its RTX SSRC).
public struct SDPSSRCGroup: Equatable, Sendable {
    public var semantics: String
    public var ssrcs: [UInt32]
    public init(semantics: String, ssrcs: [UInt32]) { self.semantics = semantics; self.ssrcs = ssrcs }
}

/// `a=msid:<stream id> [<track id>]`.
public struct SDPMSID: Equatable, Sendable {
    public var stream: String
    public var track: String?
    public init(stream: String, track: String? = nil) { self.stream = stream; self.track = track }
}

/// Any attribute the model does not interpret, kept in order.
public struct SDPAttribute: Equatable, Sendable {
    public var name: String
    public var value: String?
    public init(_ name: String, _ value: String? = nil) { self.name = name; self.value = value }
}

/// One `m=` section.
public struct SDPMedia: Equatable, Sendable {
    /// "audio", "video" or "application".
    public var kind: String
    public var port: UInt16
    public var proto: String
    /// Payload types (or "webrtc-datachannel") in preference order.
    public var formats: [String]
    public var connection: String?
    public var bandwidths: [String] = []
    public var mid: String?
    public var direction: SDPDirection?
    public var rtcpMux = false
    public var rtcpRsize = false
    public var rtcp: String?
    public var iceUfrag: String?
    public var icePwd: String?
    public var iceOptions: [String] = []
    public var fingerprints: [SDPFingerprint] = []
    public var setup: SDPSetupRole?
    public var msids: [SDPMSID] = []
    /// Codecs in the order of `formats`.
    public var codecs: [SDPCodec] = []
    public var extmaps: [SDPExtmap] = []
    public var ssrcs: [SDPSSRC] = []
    public var ssrcGroups: [SDPSSRCGroup] = []
    public var candidates: [SDPCandidate] = []
    public var endOfCandidates = false
    /// `a=bundle-only` (RFC 8843 §6): with port 0, a section offered only as part of the BUNDLE group, not rejected.
    public var bundleOnly = false
    public var attributes: [SDPAttribute] = []

    public init(kind: String, port: UInt16 = 9, proto: String = "UDP/TLS/RTP/SAVPF", formats: [String] = []) {
        self.kind = kind; self.port = port; self.proto = proto; self.formats = formats
    }

    /// The codec for a payload type.
    public func codec(_ pt: UInt8) -> SDPCodec? { codecs.first { $0.payloadType == pt } }
    /// The first codec with this encoding name (case-insensitive).
    public func codec(named name: String) -> SDPCodec? { codecs.first { $0.name.lowercased() == name.lowercased() } }
    /// Distinct SSRCs in order of appearance.
    public var ssrcList: [UInt32] { var seen: [UInt32] = []; for s in ssrcs where !seen.contains(s.ssrc) { seen.append(s.ssrc) }; return seen }
    /// A rejected section: port 0 without `a=bundle-only`.
    public var isRejected: Bool { port == 0 && !bundleOnly }
}

/// A session description (RFC 8866) with the attributes WebRTC uses (JSEP, RFC 8829).
public struct SessionDescription: Equatable, Sendable {
    public var originUsername = "-"
    public var sessionID: UInt64 = 0
    public var sessionVersion: UInt64 = 0
    public var originAddress = "IN IP4 127.0.0.1"
    public var sessionName = "-"
    public var timing = "0 0"
    public var connection: String?
    /// `a=group:<semantics> <mid>...` (BUNDLE).
    public var groups: [(semantics: String, mids: [String])] = []
    public var msidSemantic: String?
    public var iceLite = false
    public var iceUfrag: String?
    public var icePwd: String?
    public var iceOptions: [String] = []
    public var fingerprints: [SDPFingerprint] = []
    public var setup: SDPSetupRole?
    public var attributes: [SDPAttribute] = []
    public var media: [SDPMedia] = []

    public init() {}

    public static func == (a: SessionDescription, b: SessionDescription) -> Bool { a.serialized() == b.serialized() }

    /// The mids of the first BUNDLE group.
    public var bundleMids: [String]? { groups.first { $0.semantics == "BUNDLE" }?.mids }

    /// The section whose transport carries everything (RFC 8843): the BUNDLE tag (the group's first mid) when
    /// there is a group, else the first section not rejected. `index` is its m-line index (`sdpMLineIndex`).
    public var transportSection: (mid: String?, index: Int)? {
        if let tag = bundleMids?.first, let i = media.firstIndex(where: { $0.mid == tag }) { return (tag, i) }
        guard let i = media.firstIndex(where: { !$0.isRejected }) else { return nil }
        return (media[i].mid, i)
    }

    /// ICE ufrag/pwd of a section, falling back to the session level.
    public func iceCredentials(of m: SDPMedia) -> (ufrag: String, pwd: String)? {
        guard let u = m.iceUfrag ?? iceUfrag, let p = m.icePwd ?? icePwd else { return nil }
        return (u, p)
    }
    public func fingerprint(of m: SDPMedia) -> SDPFingerprint? { m.fingerprints.first ?? fingerprints.first }
    public func setup(of m: SDPMedia) -> SDPSetupRole? { m.setup ?? setup }
}

