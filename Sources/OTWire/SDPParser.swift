import OTBase

extension SessionDescription {
    /// Parses SDP text (CRLF or LF line ends). Errors name the line number and what is wrong.
    public static func parse(_ text: String) throws -> SessionDescription {
        var sd = SessionDescription()
        var current: SDPMedia?
        var lineNo = 0
        var sawVersion = false, sawOrigin = false, sawName = false, sawTiming = false
        func fail(_ msg: String) -> WireError { WireError("SDP line \(lineNo): \(msg)") }

        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNo += 1
            var line = rawLine
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.isEmpty { continue }
            guard line.count >= 2, line.dropFirst().first == "=" else { throw fail("expected \"<type>=<value>\", got \"\(line.prefix(40))\"") }
            guard let type = line.first else { continue }
            let value = line.dropFirst(2)
            if !sawVersion && type != "v" { throw fail("first line must be v=0") }
            switch type {
            case "v":
                guard !sawVersion else { throw fail("duplicate v=") }
                guard value == "0" else { throw fail("unsupported version \"\(value)\"") }
                sawVersion = true
            case "o":
                let f = value.split(separator: " ")
                guard f.count == 6 else { throw fail("o= needs 6 fields, got \(f.count)") }
                guard let id = UInt64(f[1]), let ver = UInt64(f[2]) else { throw fail("o= session id and version must be numbers") }
                sd.originUsername = String(f[0]); sd.sessionID = id; sd.sessionVersion = ver
                sd.originAddress = f[3...5].joined(separator: " ")
                sawOrigin = true
            case "s": sd.sessionName = String(value); sawName = true
            case "t": sd.timing = String(value); sawTiming = true
            case "c":
                guard value.split(separator: " ").count == 3 else { throw fail("c= needs 3 fields") }
                if current != nil { current?.connection = String(value) } else { sd.connection = String(value) }
            case "b":
                current?.bandwidths.append(String(value))
            case "m":
                if let m = current { sd.media.append(m) }
                let f = value.split(separator: " ")
                guard f.count >= 3 else { throw fail("m= needs at least 3 fields, got \(f.count)") }
                guard let port = f[1].split(separator: "/").first.flatMap({ UInt16($0) }) else { throw fail("m= bad port \"\(f[1])\"") }
                var m = SDPMedia(kind: String(f[0]), port: port, proto: String(f[2]), formats: f.dropFirst(3).map(String.init))
                if m.proto.contains("RTP") {
                    for fmt in m.formats {
                        guard let pt = UInt8(fmt), pt < 128 else { throw fail("m= payload type \"\(fmt)\" is not 0-127") }
                        m.codecs.append(SDPCodec(payloadType: pt, name: "", clockRate: 0))
                    }
                }
                current = m
            case "a":
                let colon = value.firstIndex(of: ":")
                let name = String(colon.map { value[..<$0] } ?? value)
                let v = colon.map { String(value[value.index(after: $0)...]) }
                if var m = current {
                    try parseMediaAttribute(name, v, &m, fail)
                    current = m
                } else {
                    try parseSessionAttribute(name, v, &sd, fail)
                }
            case "i", "u", "e", "p", "z", "k", "r":
                break
            default:
                throw fail("unknown line type \"\(type)\"")
            }
        }
        lineNo += 1
        if let m = current { sd.media.append(m) }
        guard sawVersion else { throw WireError("SDP: empty description") }
        guard sawOrigin else { throw WireError("SDP: missing o= line") }
        guard sawName else { throw WireError("SDP: missing s= line") }
        guard sawTiming else { throw WireError("SDP: missing t= line") }
        for (i, m) in sd.media.enumerated() {
            for c in m.codecs where c.name.isEmpty && m.proto.contains("RTP") && c.payloadType >= 96 {
                throw WireError("SDP m-section \(i) (\(m.kind)): dynamic payload type \(c.payloadType) has no a=rtpmap")
            }
        }
        if let mids = sd.bundleMids {
            for mid in mids where !sd.media.contains(where: { $0.mid == mid }) {
                throw WireError("SDP: BUNDLE group names mid \"\(mid)\" that no m-section has")
            }
        }
        return sd
    }

    private static func parseSessionAttribute(_ name: String, _ v: String?, _ sd: inout SessionDescription, _ fail: (String) -> WireError) throws {
        switch name {
        case "group":
            let f = (v ?? "").split(separator: " ")
            guard let sem = f.first else { throw fail("a=group needs semantics") }
            sd.groups.append((String(sem), f.dropFirst().map(String.init)))
        case "msid-semantic": sd.msidSemantic = v?.trimmingSpaces()
        case "ice-lite": sd.iceLite = true
        case "ice-ufrag": sd.iceUfrag = try iceChars(v, "ice-ufrag", 4, fail)
        case "ice-pwd": sd.icePwd = try iceChars(v, "ice-pwd", 22, fail)
        case "ice-options": sd.iceOptions = (v ?? "").split(separator: " ").map(String.init)
        case "fingerprint": sd.fingerprints.append(try fingerprint(v, fail))
        case "setup": sd.setup = try setupRole(v, fail)
        default: sd.attributes.append(SDPAttribute(name, v))
        }
    }

    private static func iceChars(_ v: String?, _ what: String, _ minLen: Int, _ fail: (String) -> WireError) throws -> String {
        guard let v, v.count >= minLen, v.count <= 256 else { throw fail("\(what) must be \(minLen)-256 characters") }
        guard v.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "/") }) else {
            throw fail("\(what) has characters outside ALPHA / DIGIT / + /")
        }
        return v
    }

    private static func fingerprint(_ v: String?, _ fail: (String) -> WireError) throws -> SDPFingerprint {
        do { return try SDPFingerprint(parsing: v ?? "") } catch let e as WireError { throw fail(e.message) }
    }

    private static func setupRole(_ v: String?, _ fail: (String) -> WireError) throws -> SDPSetupRole {
        guard let r = SDPSetupRole(rawValue: v ?? "") else { throw fail("unknown setup role \"\(v ?? "")\"") }
        return r
    }

    private static func payloadType(_ s: Substring, _ m: SDPMedia, _ what: String, _ fail: (String) -> WireError) throws -> Int {
        guard let pt = UInt8(s), let i = m.codecs.firstIndex(where: { $0.payloadType == pt }) else {
            throw fail("\(what) for payload type \"\(s)\" that is not in the m= line")
        }
        return i
    }

    private static func parseMediaAttribute(_ name: String, _ v: String?, _ m: inout SDPMedia, _ fail: (String) -> WireError) throws {
        switch name {
        case "mid":
            guard let v, !v.isEmpty else { throw fail("a=mid needs a value") }
            m.mid = v
        case "sendrecv", "sendonly", "recvonly", "inactive": m.direction = SDPDirection(rawValue: name)
        case "rtcp-mux": m.rtcpMux = true
        case "rtcp-rsize": m.rtcpRsize = true
        case "rtcp": m.rtcp = v
        case "ice-ufrag": m.iceUfrag = try iceChars(v, "ice-ufrag", 4, fail)
        case "ice-pwd": m.icePwd = try iceChars(v, "ice-pwd", 22, fail)
        case "ice-options": m.iceOptions = (v ?? "").split(separator: " ").map(String.init)
        case "fingerprint": m.fingerprints.append(try fingerprint(v, fail))
        case "setup": m.setup = try setupRole(v, fail)
        case "msid":
            let f = (v ?? "").split(separator: " ")
            guard let s = f.first else { throw fail("a=msid needs a stream id") }
            m.msids.append(SDPMSID(stream: String(s), track: f.count > 1 ? String(f[1]) : nil))
        case "rtpmap":
            let f = (v ?? "").split(separator: " ", maxSplits: 1)
            guard f.count == 2 else { throw fail("a=rtpmap needs \"<pt> <name>/<rate>\"") }
            let i = try payloadType(f[0], m, "a=rtpmap", fail)
            let enc = f[1].split(separator: "/")
            guard enc.count >= 2, let rate = UInt32(enc[1]), rate > 0 else { throw fail("a=rtpmap \"\(f[1])\": expected <name>/<clock rate>[/<channels>]") }
            m.codecs[i].name = String(enc[0]); m.codecs[i].clockRate = rate
            if enc.count > 2 {
                guard let ch = UInt16(enc[2]), ch > 0 else { throw fail("a=rtpmap bad channel count \"\(enc[2])\"") }
                m.codecs[i].channels = ch
            }
        case "fmtp":
            let f = (v ?? "").split(separator: " ", maxSplits: 1)
            guard f.count == 2 else { throw fail("a=fmtp needs \"<pt> <parameters>\"") }
            let i = try payloadType(f[0], m, "a=fmtp", fail)
            m.codecs[i].fmtp = String(f[1])
        case "rtcp-fb":
            let f = (v ?? "").split(separator: " ", maxSplits: 1)
            guard f.count == 2 else { throw fail("a=rtcp-fb needs \"<pt> <type>\"") }
            if f[0] == "*" {
                for i in m.codecs.indices { m.codecs[i].rtcpFeedback.append(String(f[1])) }
            } else {
                let i = try payloadType(f[0], m, "a=rtcp-fb", fail)
                m.codecs[i].rtcpFeedback.append(String(f[1]))
            }
        case "extmap":
            let f = (v ?? "").split(separator: " ", maxSplits: 2)
            guard f.count >= 2 else { throw fail("a=extmap needs \"<id> <uri>\"") }
            let idDir = f[0].split(separator: "/", omittingEmptySubsequences: false)
            guard let id = UInt16(idDir[0]), (1...255).contains(id) else { throw fail("a=extmap id \"\(idDir[0])\" is not 1-255") }
            var dir: SDPDirection?
            if idDir.count > 1 {
                guard let d = SDPDirection(rawValue: String(idDir[1])) else { throw fail("a=extmap bad direction \"\(idDir[1])\"") }
                dir = d
            }
            guard !m.extmaps.contains(where: { $0.id == id }) else { throw fail("a=extmap id \(id) used twice") }
            m.extmaps.append(SDPExtmap(id: id, direction: dir, uri: String(f[1]), attributes: f.count > 2 ? String(f[2]) : nil))
        case "ssrc":
            let f = (v ?? "").split(separator: " ", maxSplits: 1)
            guard let ssrc = f.first.flatMap({ UInt32($0) }) else { throw fail("a=ssrc needs a 32-bit ssrc") }
            guard f.count == 2 else { throw fail("a=ssrc:\(ssrc) needs an attribute") }
            let kv = f[1].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            m.ssrcs.append(SDPSSRC(ssrc: ssrc, attribute: String(kv[0]), value: kv.count > 1 ? String(kv[1]) : nil))
        case "ssrc-group":
            let f = (v ?? "").split(separator: " ")
            guard let sem = f.first, f.count >= 2 else { throw fail("a=ssrc-group needs semantics and ssrcs") }
            var ssrcs: [UInt32] = []
            for s in f.dropFirst() {
                guard let x = UInt32(s) else { throw fail("a=ssrc-group bad ssrc \"\(s)\"") }
                ssrcs.append(x)
            }
            if sem == "FID" && ssrcs.count != 2 { throw fail("a=ssrc-group:FID needs exactly 2 ssrcs, got \(ssrcs.count)") }
            m.ssrcGroups.append(SDPSSRCGroup(semantics: String(sem), ssrcs: ssrcs))
        case "candidate":
            if SDPCandidate.isMDNS(v ?? "") {
                // An mDNS-hidden host candidate (browsers): kept as text; the peer is found as peer-reflexive instead.
                m.attributes.append(SDPAttribute(name, v))
                return
            }
            do { m.candidates.append(try SDPCandidate(parsing: "candidate:" + (v ?? ""))) } catch let e as WireError { throw fail(e.message) }
        case "end-of-candidates": m.endOfCandidates = true
        case "bundle-only": m.bundleOnly = true
        default: m.attributes.append(SDPAttribute(name, v))
        }
    }

    /// The description as SDP text with CRLF line ends.
    public func serialized() -> String {
        var out = "v=0\r\no=\(originUsername) \(sessionID) \(sessionVersion) \(originAddress)\r\ns=\(sessionName)\r\n"
        if let c = connection { out += "c=\(c)\r\n" }
        out += "t=\(timing)\r\n"
        func a(_ n: String, _ v: String? = nil) { out += v.map { "a=\(n):\($0)\r\n" } ?? "a=\(n)\r\n" }
        for g in groups { a("group", ([g.semantics] + g.mids).joined(separator: " ")) }
        if let s = msidSemantic { a("msid-semantic", " " + s) }
        if iceLite { a("ice-lite") }
        if let u = iceUfrag { a("ice-ufrag", u) }
        if let p = icePwd { a("ice-pwd", p) }
        if !iceOptions.isEmpty { a("ice-options", iceOptions.joined(separator: " ")) }
        for f in fingerprints { a("fingerprint", f.description) }
        if let s = setup { a("setup", s.rawValue) }
        for x in attributes { a(x.name, x.value) }
        for m in media {
            out += "m=\(m.kind) \(m.port) \(m.proto) \(m.formats.joined(separator: " "))\r\n"
            if let c = m.connection { out += "c=\(c)\r\n" }
            for b in m.bandwidths { out += "b=\(b)\r\n" }
            if let r = m.rtcp { a("rtcp", r) }
            if let u = m.iceUfrag { a("ice-ufrag", u) }
            if let p = m.icePwd { a("ice-pwd", p) }
            if !m.iceOptions.isEmpty { a("ice-options", m.iceOptions.joined(separator: " ")) }
            for f in m.fingerprints { a("fingerprint", f.description) }
            if let s = m.setup { a("setup", s.rawValue) }
            if let mid = m.mid { a("mid", mid) }
            for e in m.extmaps {
                var s = "\(e.id)" + (e.direction.map { "/\($0.rawValue)" } ?? "") + " \(e.uri)"
                if let at = e.attributes { s += " " + at }
                a("extmap", s)
            }
            if let d = m.direction { a(d.rawValue) }
            for id in m.msids { a("msid", id.stream + (id.track.map { " " + $0 } ?? "")) }
            if m.rtcpMux { a("rtcp-mux") }
            if m.rtcpRsize { a("rtcp-rsize") }
            for c in m.codecs where !c.name.isEmpty {
                a("rtpmap", "\(c.payloadType) \(c.name)/\(c.clockRate)" + (c.channels.map { "/\($0)" } ?? ""))
                for fb in c.rtcpFeedback { a("rtcp-fb", "\(c.payloadType) \(fb)") }
                if let f = c.fmtp { a("fmtp", "\(c.payloadType) \(f)") }
            }
            for g in m.ssrcGroups { a("ssrc-group", ([g.semantics] + g.ssrcs.map(String.init)).joined(separator: " ")) }
            for s in m.ssrcs { a("ssrc", "\(s.ssrc) \(s.attribute)" + (s.value.map { ":" + $0 } ?? "")) }
            for x in m.attributes { a(x.name, x.value) }
            if m.bundleOnly { a("bundle-only") }
            for c in m.candidates { out += "a=\(c)\r\n" }
            if m.endOfCandidates { a("end-of-candidates") }
        }
        return out
    }
}
