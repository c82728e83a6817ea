import Foundation
import OTBase
@testable import OTWire
import XCTest

final class SDPTests: XCTestCase {
    // A browser-style offer: BUNDLE, Opus + VP8/RTX, extmap, msid, ssrc-group FID, candidates.
    static let chromeOffer = """
        v=0
        o=- 4611731400430051336 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS stream1
        m=audio 9 UDP/TLS/RTP/SAVPF 111 0
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:EsAw
        a=ice-pwd:bP+XJMM09aR8AiX1jdukzR6Y
        a=ice-options:trickle
        a=fingerprint:sha-256 D2:FA:0E:C3:22:59:5E:14:95:69:92:3D:13:B4:84:24:2C:C2:A2:C0:3E:FD:34:8E:5E:EA:6F:AF:52:CE:E6:0F
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=sendrecv
        a=msid:stream1 audio1
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:0 PCMU/8000
        a=ssrc:1001 cname:abc
        a=ssrc:1001 msid:stream1 audio1
        a=candidate:1 1 udp 2122260223 192.168.1.5 50000 typ host generation 0 network-id 1
        a=candidate:2 1 udp 1686052607 203.0.113.7 60000 typ srflx raddr 192.168.1.5 rport 50000 generation 0
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 98
        c=IN IP4 0.0.0.0
        a=ice-ufrag:EsAw
        a=ice-pwd:bP+XJMM09aR8AiX1jdukzR6Y
        a=fingerprint:sha-256 D2:FA:0E:C3:22:59:5E:14:95:69:92:3D:13:B4:84:24:2C:C2:A2:C0:3E:FD:34:8E:5E:EA:6F:AF:52:CE:E6:0F
        a=setup:actpass
        a=mid:1
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=sendrecv
        a=msid:stream1 video1
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:98 VP9/90000
        a=ssrc-group:FID 2001 2002
        a=ssrc:2001 cname:abc
        a=ssrc:2002 cname:abc
        a=end-of-candidates

        """

    func testParsesBrowserOffer() throws {
        let sd = try SessionDescription.parse(Self.chromeOffer)
        XCTAssertEqual(sd.sessionID, 4611731400430051336)
        XCTAssertEqual(sd.bundleMids, ["0", "1"])
        XCTAssertEqual(sd.msidSemantic, "WMS stream1")
        XCTAssertEqual(sd.media.count, 2)
        let a = sd.media[0], v = sd.media[1]
        XCTAssertEqual(a.kind, "audio")
        XCTAssertEqual(a.mid, "0")
        XCTAssertTrue(a.rtcpMux)
        XCTAssertEqual(sd.iceCredentials(of: a)?.ufrag, "EsAw")
        XCTAssertEqual(sd.iceCredentials(of: a)?.pwd, "bP+XJMM09aR8AiX1jdukzR6Y")
        XCTAssertEqual(sd.fingerprint(of: a)?.bytes.count, 32)
        XCTAssertEqual(sd.fingerprint(of: a)?.bytes.first, 0xD2)
        XCTAssertEqual(a.setup, .actpass)
        XCTAssertEqual(a.msids, [SDPMSID(stream: "stream1", track: "audio1")])
        XCTAssertEqual(a.codec(111), SDPCodec(payloadType: 111, name: "opus", clockRate: 48000, channels: 2, fmtp: "minptime=10;useinbandfec=1", rtcpFeedback: ["transport-cc"]))
        XCTAssertEqual(a.codec(0)?.name, "PCMU")
        XCTAssertEqual(a.extmaps.map(\.id), [1, 4])
        XCTAssertEqual(a.ssrcList, [1001])
        XCTAssertEqual(a.candidates.count, 2)
        XCTAssertEqual(a.candidates[1].kind, .srflx)
        XCTAssertEqual(a.candidates[1].relatedAddress, TransportAddress("192.168.1.5:50000"))
        XCTAssertEqual(a.candidates[0].extensions.first?.0, "generation")
        XCTAssertEqual(v.codec(96)?.rtcpFeedback, ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
        XCTAssertEqual(v.codec(97)?.fmtpParameters["apt"], "96")
        XCTAssertEqual(v.ssrcGroups, [SDPSSRCGroup(semantics: "FID", ssrcs: [2001, 2002])])
        XCTAssertTrue(v.rtcpRsize)
        XCTAssertTrue(v.endOfCandidates)
        XCTAssertEqual(v.attributes, [])
        XCTAssertEqual(sd.attributes, [SDPAttribute("extmap-allow-mixed")])
    }

    func testSerializeRoundTrips() throws {
        let sd = try SessionDescription.parse(Self.chromeOffer)
        let text = sd.serialized()
        XCTAssertTrue(text.hasSuffix("\r\n"))
        XCTAssertFalse(text.replacingOccurrences(of: "\r\n", with: "").contains("\n"))
        let again = try SessionDescription.parse(text)
        XCTAssertEqual(again, sd)
        XCTAssertEqual(again.media[1].codecs, sd.media[1].codecs)
        XCTAssertEqual(again.media[0].candidates, sd.media[0].candidates)
    }

    func testRejectsMalformedWithLineNumbers() throws {
        func err(_ s: String) -> String {
            do { _ = try SessionDescription.parse(s); return "parsed" } catch { return "\(error)" }
        }
        let head = "v=0\no=- 1 1 IN IP4 0.0.0.0\ns=-\nt=0 0\n"
        XCTAssertEqual(err("o=- 1 1 IN IP4 0.0.0.0\n"), "SDP line 1: first line must be v=0")
        XCTAssertEqual(err("v=1\n"), "SDP line 1: unsupported version \"1\"")
        XCTAssertEqual(err("v=0\ns=-\nt=0 0\n"), "SDP: missing o= line")
        XCTAssertEqual(err(head + "m=audio 9 UDP/TLS/RTP/SAVPF 111\na=rtpmap:112 opus/48000/2\n"),
                       "SDP line 6: a=rtpmap for payload type \"112\" that is not in the m= line")
        XCTAssertEqual(err(head + "m=audio 9 UDP/TLS/RTP/SAVPF 111\n"), "SDP m-section 0 (audio): dynamic payload type 111 has no a=rtpmap")
        XCTAssertEqual(err(head + "m=audio 9 UDP/TLS/RTP/SAVPF 300\n"), "SDP line 5: m= payload type \"300\" is not 0-127")
        XCTAssertEqual(err(head + "m=audio x UDP 1\n"), "SDP line 5: m= bad port \"x\"")
        XCTAssertEqual(err(head + "a=fingerprint:sha-256 AB:CD\n"), "SDP line 5: fingerprint: sha-256 needs 32 bytes, got 2")
        XCTAssertEqual(err(head + "a=fingerprint:sha-256 ZZ\n"), "SDP line 5: fingerprint: bad hex octet \"ZZ\"")
        XCTAssertEqual(err(head + "a=setup:sideways\n"), "SDP line 5: unknown setup role \"sideways\"")
        XCTAssertEqual(err(head + "a=ice-ufrag:ab\n"), "SDP line 5: ice-ufrag must be 4-256 characters")
        XCTAssertEqual(err(head + "a=group:BUNDLE 0\n"), "SDP: BUNDLE group names mid \"0\" that no m-section has")
        XCTAssertEqual(err(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=ssrc-group:FID 1\n"),
                       "SDP line 7: a=ssrc-group:FID needs exactly 2 ssrcs, got 1")
        XCTAssertEqual(err(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=candidate:1 1 udp 5 300.1.1.1 9 typ host\n"),
                       "SDP line 7: SDP candidate: bad address \"300.1.1.1\" (mDNS names are not supported)")
        // Browsers' mDNS host candidates are kept as text, not rejected.
        let mdns = try SessionDescription.parse(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=candidate:1 1 udp 5 0d1f-aa.local 9 typ host\n")
        XCTAssertEqual(mdns.media[0].candidates, [])
        XCTAssertEqual(mdns.media[0].attributes, [SDPAttribute("candidate", "1 1 udp 5 0d1f-aa.local 9 typ host")])
        XCTAssertEqual(err(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=extmap:0 urn:x\n"), "SDP line 7: a=extmap id \"0\" is not 1-255")
        XCTAssertEqual(err(head + "garbage\n"), "SDP line 5: expected \"<type>=<value>\", got \"garbage\"")
        XCTAssertEqual(err(head + "x=1\n"), "SDP line 5: unknown line type \"x\"")
        // Degenerate separators never trap.
        XCTAssertEqual(err(head + "m=audio / RTP/AVP 0\n"), "SDP line 5: m= bad port \"/\"")
        XCTAssertEqual(err(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=extmap:/ urn:x\n"), "SDP line 7: a=extmap id \"\" is not 1-255")
        XCTAssertEqual(err(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=fmtp:96 =;==;a\na=ssrc:1 :\n"), "parsed")
        XCTAssertEqual(try SessionDescription.parse(head + "m=video 9 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=fmtp:96 =;==;a\n").media[0].codecs[0].fmtpParameters["a"], "")
    }

    func testCandidateParseAndPriority() throws {
        let c = try SDPCandidate(parsing: "candidate:842163049 1 UDP 1677729535 2001:db8::5 3478 typ relay raddr 0.0.0.0 rport 0 generation 0")
        XCTAssertEqual(c.transport, "udp")
        XCTAssertEqual(c.kind, .relay)
        XCTAssertEqual(c.address.ip, IPAddress("2001:db8::5"))
        XCTAssertEqual(try SDPCandidate(parsing: c.description), c)
        XCTAssertThrowsError(try SDPCandidate(parsing: "candidate:1 1 udp 5 1.2.3.4 9 typ bogus"))
        XCTAssertThrowsError(try SDPCandidate(parsing: "candidate:1 1 udp 5 1.2.3.4 9 typ host raddr"))
        XCTAssertEqual(SDPCandidate.priority(kind: .host, localPreference: 65535), 2_130_706_431)
        XCTAssertEqual(SDPCandidate.priority(kind: .relay, localPreference: 0) & 0xFF, 255)
    }

    func testAnswerToBrowserOfferAcceptsOpusAndVP8AndBundles() throws {
        let offer = try SessionDescription.parse(Self.chromeOffer)
        var local = SDPLocalParameters(iceUfrag: "loca", icePwd: "0123456789abcdefghijkl",
                                       fingerprint: SDPFingerprint(algorithm: "sha-256", bytes: Array(repeating: 0xAB, count: 32)))
        local.videoTrack = SDPLocalTrack(ssrc: 77, rtxSSRC: 78, streamID: "s", trackID: "v", cname: "me")
        local.candidates = [SDPCandidate(foundation: "1", priority: 100, address: TransportAddress("127.0.0.1:4000")!, kind: .host)]
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: local)
        XCTAssertEqual(neg.remoteIceUfrag, "EsAw")
        XCTAssertTrue(neg.localIsDTLSClient)
        XCTAssertEqual(neg.remoteCandidates.count, 2)
        XCTAssertEqual(neg.media.map(\.kind), ["audio", "video"])
        XCTAssertEqual(neg.media[0].codec.payloadType, 111)
        XCTAssertEqual(neg.media[0].direction, .recvonly)  // no local audio track
        XCTAssertEqual(neg.media[1].codec.name, "VP8")
        XCTAssertEqual(neg.media[1].rtxPayloadType, 97)
        XCTAssertEqual(neg.media[1].feedback, ["transport-cc", "ccm fir", "nack", "nack pli"])
        XCTAssertEqual(neg.media[1].remoteRTXSSRCs, [2001: 2002])
        XCTAssertEqual(neg.media[1].extmaps.map(\.id), [4, 3])

        // The answer text parses back and the offerer can read it.
        let text = answer.serialized()
        let parsed = try SessionDescription.parse(text)
        XCTAssertEqual(parsed.bundleMids, ["0", "1"])
        XCTAssertEqual(parsed.media[1].formats, ["96", "97"])
        XCTAssertEqual(parsed.media[1].setup, .active)
        XCTAssertEqual(parsed.media[1].ssrcGroups, [SDPSSRCGroup(semantics: "FID", ssrcs: [77, 78])])
        // Candidates go with the BUNDLE tag (mid 0), where browsers look for the bundled transport's candidates, and
        // with the other bundled section too (aiortc under max-bundle reads them from the last one).
        XCTAssertEqual(parsed.media.map(\.candidates.count), [1, 1])
        let back = try SDPNegotiation.accept(answer: parsed, offer: offer)
        XCTAssertFalse(back.localIsDTLSClient)
        XCTAssertEqual(back.remoteIceUfrag, "loca")
        XCTAssertEqual(back.remoteCandidates.first?.address, TransportAddress("127.0.0.1:4000"))
        XCTAssertEqual(back.media.map(\.direction), [.sendonly, .sendrecv])  // the answerer only receives audio
    }

    /// Negotiation runs over the ordered lists of payload formats: the offer lists ours in order (each video format
    /// with its RTX), the answer takes the offer's first codec one of them matches and maps payload types to formats.
    func testNegotiationRunsOverTheOrderedPayloadFormats() throws {
        var local = SDPLocalParameters(iceUfrag: "loca", icePwd: "0123456789abcdefghijkl",
                                       fingerprint: SDPFingerprint(algorithm: "sha-256", bytes: Array(repeating: 0xAB, count: 32)))
        let offer = SDPNegotiation.offer(local)
        XCTAssertEqual(offer.media.map { $0.codecs.map(\.name) }, [["opus"], ["VP8", "rtx", "red", "ulpfec"]])
        XCTAssertEqual(offer.media[1].codecs.map(\.payloadType), [96, 97, 100, 101])
        XCTAssertEqual(offer.media[1].codecs[1].fmtp, "apt=96")
        XCTAssertEqual(offer.media[0].codecs[0], PayloadFormats.opus.sdpCodec(payloadType: 111))

        // A browser offer (VP8 96 + RTX 97, VP9 98): VP8 is the first codec a format of ours matches.
        let browser = try SessionDescription.parse(Self.chromeOffer)
        let (_, neg) = try SDPNegotiation.answer(to: browser, local: local)
        XCTAssertEqual(neg.media[1].format?.name, "VP8")
        XCTAssertEqual(neg.media[1].payloadFormats.mapValues(\.name), [96: "VP8", 97: "VP8"])
        XCTAssertEqual(neg.media[0].payloadFormats.mapValues(\.name), [111: "opus"])
        // VP9 known too: the offerer's order still picks VP8 (the router answering a browser publisher), unless we
        // answer in our own order (a publisher preferring VP9 answering a subscriber's offer).
        local.videoFormats = [PayloadFormats.vp9, PayloadFormats.vp8]
        XCTAssertEqual(try SDPNegotiation.answer(to: browser, local: local).1.media[1].format?.name, "VP8")
        local.answerInLocalOrder = true
        let (vp9Answer, vp9) = try SDPNegotiation.answer(to: browser, local: local)
        XCTAssertEqual(vp9.media[1].format?.name, "VP9")
        XCTAssertEqual(vp9.media[1].codec.payloadType, 98, "the offer's payload type")
        XCTAssertEqual(vp9Answer.media[1].codecs.map(\.name), ["VP9"], "the offer lists no RTX for VP9")
        // Our offer lists each video format with its RTX, in our order.
        XCTAssertEqual(SDPNegotiation.offer(local).media[1].codecs.map { "\($0.name)/\($0.payloadType)" },
                       ["VP9/98", "rtx/99", "VP8/96", "rtx/97", "red/100", "ulpfec/101"])
        local.answerInLocalOrder = false
        // Without a video format the video section is refused; audio still goes.
        local.videoFormats = []
        let (answer, audioOnly) = try SDPNegotiation.answer(to: browser, local: local)
        XCTAssertEqual(audioOnly.media.map(\.kind), ["audio"])
        XCTAssertEqual(answer.media[1].port, 0)
    }

    /// The parameters of an offerer of both our video codecs (VP8 first) and its offer, and those of an answerer with
    /// VP9 only.
    private func bothCodecsOfferedToAVP9Answerer() -> (a: SDPLocalParameters, offer: SessionDescription, b: SDPLocalParameters) {
        let fp = SDPFingerprint(algorithm: "sha-256", bytes: Array(0..<32))
        var a = SDPLocalParameters(iceUfrag: "aaaa", icePwd: "aaaaaaaaaaaaaaaaaaaaaa", fingerprint: fp)
        a.videoFormats = PayloadFormats.video
        var b = SDPLocalParameters(iceUfrag: "bbbb", icePwd: "bbbbbbbbbbbbbbbbbbbbbb", fingerprint: fp)
        b.videoFormats = [PayloadFormats.vp9]
        return (a, SDPNegotiation.offer(a), b)
    }

    func testAnAnswerListingSeveralOfOurCodecsMapsThemAll() throws {
        let (_, offer, b) = bothCodecsOfferedToAVP9Answerer()
        var (answer, _) = try SDPNegotiation.answer(to: offer, local: b)
        // A browser answers with every codec both sides have, its preference first (VP9), and may send any of them.
        let vp8 = offer.media[1].codecs.filter { $0.payloadType == 96 || $0.payloadType == 97 }
        answer.media[1].codecs += vp8
        answer.media[1].formats += vp8.map { String($0.payloadType) }
        let neg = try SDPNegotiation.accept(answer: try SessionDescription.parse(answer.serialized()), offer: offer)
        XCTAssertEqual(neg.media[1].format?.name, "VP9", "the answer's first")
        XCTAssertEqual(neg.media[1].payloadFormats.mapValues(\.name), [98: "VP9", 99: "VP9", 96: "VP8", 97: "VP8", 100: "VP9", 101: "VP9"])
        XCTAssertEqual(neg.media[1].otherRTXPayloadTypes, [97: 96])
        // Answering, we list one codec: the offerer sends that one.
        XCTAssertTrue(try SDPNegotiation.answer(to: offer, local: b).1.media[1].otherCodecs.isEmpty)
    }

    func testWeStillReceiveTheOfferedFormatsAnAnswerLeftOut() throws {
        var (a, offer, b) = bothCodecsOfferedToAVP9Answerer()
        b.videoTrack = SDPLocalTrack(ssrc: 5, rtxSSRC: 6, streamID: "s", trackID: "v", cname: "b")
        // Chromium with codec preferences of VP9 only answers VP9 only, and sends the offer's first codec (VP8) all the
        // same: its packets and their retransmissions are VP8's.
        let (answer, _) = try SDPNegotiation.answer(to: offer, local: b)
        XCTAssertEqual(answer.media[1].codecs.map(\.name), ["VP9", "rtx", "red", "ulpfec"])
        let neg = try SDPNegotiation.accept(answer: try SessionDescription.parse(answer.serialized()), offer: offer)
        XCTAssertEqual(neg.media[1].format?.name, "VP9", "the answer's codec")
        XCTAssertEqual(neg.media[1].payloadFormats.mapValues(\.name), [98: "VP9", 99: "VP9", 96: "VP8", 97: "VP8", 100: "VP9", 101: "VP9"])
        XCTAssertEqual(neg.media[1].otherRTXPayloadTypes, [97: 96])
        XCTAssertEqual(neg.media[0].payloadFormats.mapValues(\.name), [111: "opus"])
        // An answer that gives one of our offered payload types to another codec keeps its meaning.
        var reused = answer
        reused.media[1].codecs[0].payloadType = 96
        reused.media[1].formats[0] = "96"
        let n2 = try SDPNegotiation.accept(answer: try SessionDescription.parse(reused.serialized()), offer: offer)
        XCTAssertEqual(n2.media[1].payloadFormats[96]?.name, "VP9")
        XCTAssertNil(n2.media[1].otherRTXPayloadTypes[97], "97 resends 96, which is VP9 in this answer")
        // A (munged) answer without RED and ULPFEC: Chromium wraps video in the offer's RED all the same. We take them
        // from our offer in a section we only receive (subscribers), never in one we send in.
        var noFEC = answer
        noFEC.media[1].codecs.removeAll { ["red", "ulpfec"].contains($0.name) }
        noFEC.media[1].formats = noFEC.media[1].codecs.map { String($0.payloadType) }
        let n3 = try SDPNegotiation.accept(answer: try SessionDescription.parse(noFEC.serialized()), offer: offer)
        XCTAssertEqual(n3.media[1].direction, .recvonly)
        XCTAssertEqual(n3.media[1].redPayloadType, 100)
        XCTAssertEqual(n3.media[1].ulpfecPayloadType, 101)
        XCTAssertEqual(n3.media[1].payloadFormats.mapValues(\.name), [98: "VP9", 99: "VP9", 96: "VP8", 97: "VP8", 100: "VP9", 101: "VP9"])
        a.videoTrack = SDPLocalTrack(ssrc: 7, rtxSSRC: 8, streamID: "s", trackID: "a", cname: "a")
        let sendingOffer = SDPNegotiation.offer(a)
        var sendingAnswer = try SDPNegotiation.answer(to: sendingOffer, local: b).0
        sendingAnswer.media[1].codecs.removeAll { ["red", "ulpfec"].contains($0.name) }
        sendingAnswer.media[1].formats = sendingAnswer.media[1].codecs.map { String($0.payloadType) }
        let n4 = try SDPNegotiation.accept(answer: try SessionDescription.parse(sendingAnswer.serialized()), offer: sendingOffer)
        XCTAssertEqual(n4.media[1].direction, .sendrecv)
        XCTAssertNil(n4.media[1].redPayloadType, "no FEC sent that the answer did not agree to")
    }

    func testOfferAnswerBetweenTwoLocalPeers() throws {
        let fp = SDPFingerprint(algorithm: "sha-256", bytes: Array(0..<32))
        var a = SDPLocalParameters(iceUfrag: "aaaa", icePwd: "aaaaaaaaaaaaaaaaaaaaaa", fingerprint: fp)
        a.audioTrack = SDPLocalTrack(ssrc: 1, streamID: "sa", trackID: "ta", cname: "a")
        a.videoTrack = SDPLocalTrack(ssrc: 2, rtxSSRC: 3, streamID: "sa", trackID: "tv", cname: "a")
        a.candidates = [SDPCandidate(foundation: "1", priority: 100, address: TransportAddress("127.0.0.1:4000")!, kind: .host)]
        let offer = try SessionDescription.parse(SDPNegotiation.offer(a).serialized())
        XCTAssertEqual(offer.media.map(\.candidates.count), [1, 1])  // every bundled section: one transport
        var b = SDPLocalParameters(iceUfrag: "bbbb", icePwd: "bbbbbbbbbbbbbbbbbbbbbb", fingerprint: fp)
        b.video = false
        let (answer, nb) = try SDPNegotiation.answer(to: offer, local: b)
        XCTAssertEqual(nb.media.map(\.kind), ["audio"])
        XCTAssertEqual(nb.media[0].remoteSSRCs, [1])
        XCTAssertEqual(answer.media[1].port, 0)
        let na = try SDPNegotiation.accept(answer: try SessionDescription.parse(answer.serialized()), offer: offer)
        XCTAssertEqual(na.media.map(\.kind), ["audio"])
        XCTAssertEqual(na.media[0].direction, .sendonly)
    }

    func testAnswerRefusesOfferWithoutCredentialsOrMux() throws {
        var offer = try SessionDescription.parse(Self.chromeOffer)
        offer.media[0].fingerprints = []; offer.media[1].fingerprints = []
        let local = SDPLocalParameters(iceUfrag: "loca", icePwd: "0123456789abcdefghijkl", fingerprint: SDPFingerprint(algorithm: "sha-256", bytes: []))
        XCTAssertThrowsError(try SDPNegotiation.answer(to: offer, local: local)) {
            XCTAssertEqual(($0 as? OTError)?.message, "offer: m-section 0 has no a=fingerprint")
        }
        var noMux = try SessionDescription.parse(Self.chromeOffer)
        noMux.media[0].rtcpMux = false; noMux.media[1].rtcpMux = false
        XCTAssertThrowsError(try SDPNegotiation.answer(to: noMux, local: local))
    }

    // MARK: offers as real stacks make them (Fuzz/corpus/sdp holds them, captured from Chromium 156 and aiortc 1.16)

    static func corpus(_ name: String) throws -> SessionDescription {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus/sdp/\(name)")
        return try SessionDescription.parse(String(decoding: try Data(contentsOf: url), as: UTF8.self))
    }

    static var local: SDPLocalParameters {
        var l = SDPLocalParameters(iceUfrag: "loca", icePwd: "0123456789abcdefghijkl",
                                   fingerprint: SDPFingerprint(algorithm: "sha-256", bytes: Array(repeating: 0xAB, count: 32)))
        l.candidates = [SDPCandidate(foundation: "1", priority: 100, address: TransportAddress("127.0.0.1:4000")!, kind: .host)]
        l.endOfCandidates = true
        return l
    }

    func testChromiumCameraOfferWithManyCodecsAndADataChannelGetsOpusAndVP8() throws {
        let offer = try Self.corpus("chrome-camera-balanced-datachannel.sdp")
        var local = Self.local
        local.videoTrack = SDPLocalTrack(ssrc: 77, streamID: "s", trackID: "v", cname: "me")
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: local)
        let parsed = try SessionDescription.parse(answer.serialized())
        XCTAssertEqual(parsed.media.map(\.kind), ["audio", "video", "application"])
        XCTAssertEqual(parsed.media.map(\.port), [9, 9, 0])  // the data channel is rejected
        XCTAssertEqual(parsed.media.map(\.mid), ["0", "1", "2"])
        XCTAssertEqual(parsed.bundleMids, ["0", "1"])
        XCTAssertEqual(parsed.media[0].formats, ["111"])       // RED, G.722, PCMU, PCMA, CN, DTMF left out
        XCTAssertEqual(parsed.media[1].formats, ["96", "97", "118", "120"])  // VP8 + RTX, RED + ULPFEC; H.264, AV1, VP9 left out
        XCTAssertEqual(neg.media[1].redPayloadType, 118)
        XCTAssertEqual(neg.media[1].ulpfecPayloadType, 120)
        XCTAssertNil(neg.media[0].redPayloadType, "audio RED (redundant Opus) is not video FEC")
        XCTAssertTrue(parsed.media[0].rtcpMux && parsed.media[1].rtcpMux)
        // Extensions: MID, transport-wide CC, abs-send-time (and audio level for audio), under the offer's ids.
        XCTAssertEqual(parsed.media[0].extmaps.map(\.id), [1, 2, 3, 4])
        XCTAssertEqual(parsed.media[1].extmaps.map(\.id), [2, 3, 4])
        XCTAssertEqual(neg.media[1].extensionIds, RTPHeaderExtensionIds(absSendTime: 2, transportSequenceNumber: 3, mid: 4))
        XCTAssertEqual(neg.media[0].extensionIds.audioLevel, 1)
        // The transport is the tag's (mid 0): its candidates only, not those of the other sections' ports.
        XCTAssertEqual(neg.remoteIceUfrag, "BOUY")
        XCTAssertEqual(neg.remoteCandidates, offer.media[0].candidates)
        XCTAssertEqual(neg.media.map(\.remoteSSRCs), [[2408546081], [2051759327, 2411732488]])
        XCTAssertEqual(neg.media[1].remoteRTXSSRCs, [2051759327: 2411732488])
    }

    func testEveryBundlePolicyIsAnsweredOnTheTagTransport() throws {
        // aiortc's default (balanced): one port per section, the same ufrag.
        let balanced = try Self.corpus("aiortc-balanced-offer.sdp")
        XCTAssertNotEqual(balanced.media[0].candidates.map(\.address), balanced.media[1].candidates.map(\.address))
        let (a1, n1) = try SDPNegotiation.answer(to: balanced, local: Self.local)
        XCTAssertEqual(a1.bundleMids, ["0", "1"])
        XCTAssertEqual(n1.media.map(\.kind), ["audio", "video"])
        XCTAssertEqual(n1.media.map(\.codec.name), ["opus", "VP8"])
        XCTAssertEqual(n1.remoteCandidates, balanced.media[0].candidates)
        XCTAssertTrue(n1.remoteEndOfCandidates)
        // max-bundle: one port for all.
        let maxBundle = try Self.corpus("aiortc-max-bundle-recvonly-offer.sdp")
        let (a2, n2) = try SDPNegotiation.answer(to: maxBundle, local: Self.local)
        XCTAssertEqual(a2.bundleMids, ["0", "1"])
        XCTAssertEqual(n2.media.map(\.direction), [.inactive, .inactive])  // recvonly offer, nothing to send
        // max-compat: every section its own ICE credentials too; the tag's are used.
        var compat = balanced
        compat.media[1].iceUfrag = "othr"
        compat.media[1].icePwd = "otherotherotherotherot"
        let (_, n3) = try SDPNegotiation.answer(to: compat, local: Self.local)
        XCTAssertEqual(n3.remoteIceUfrag, balanced.media[0].iceUfrag)
        XCTAssertEqual(n3.media.count, 2)
    }

    func testBundleTagMovesPastARejectedSectionAndSectionsOutsideTheGroupAreRejected() throws {
        var offer = try Self.corpus("chrome-camera-balanced-datachannel.sdp")
        offer.groups = [("BUNDLE", ["2", "1", "0"])]  // the data channel suggested as the tag
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: Self.local)
        XCTAssertEqual(answer.bundleMids, ["1", "0"])  // RFC 8843 §7.3.1: the next mid of the group we accept
        XCTAssertEqual(neg.remoteCandidates, offer.media[1].candidates)
        XCTAssertEqual(answer.transportSection?.mid, "1")
        XCTAssertEqual(answer.transportSection?.index, 1)

        var partial = offer
        partial.groups = [("BUNDLE", ["0"])]
        let (a2, n2) = try SDPNegotiation.answer(to: partial, local: Self.local)
        XCTAssertEqual(n2.media.map(\.kind), ["audio"])
        XCTAssertEqual(a2.media.map(\.port), [9, 0, 0])

        var none = offer
        none.groups = []
        let (a3, n3) = try SDPNegotiation.answer(to: none, local: Self.local)
        XCTAssertEqual(n3.media.map(\.kind), ["audio"])  // one transport: the first section only
        XCTAssertNil(a3.bundleMids)
        XCTAssertEqual(a3.media.map(\.port), [9, 0, 0])
    }

    func testBundleOnlySectionsAreAcceptedAndAStrictAnswerIsRead() throws {
        var offer = try Self.corpus("aiortc-max-bundle-recvonly-offer.sdp")
        offer.media[1].port = 0
        offer.media[1].bundleOnly = true
        offer.media[1].candidates = []
        offer.media[1].endOfCandidates = false
        offer.media[1].iceUfrag = nil; offer.media[1].icePwd = nil
        let (answer, neg) = try SDPNegotiation.answer(to: try SessionDescription.parse(offer.serialized()), local: Self.local)
        XCTAssertEqual(neg.media.map(\.kind), ["audio", "video"])
        XCTAssertEqual(answer.media.map(\.port), [9, 9])

        // An RFC 8843 answer to our offer: the tag carries the transport, the other section is bundle-only with port 0.
        var ours = Self.local
        ours.audioTrack = SDPLocalTrack(ssrc: 1, streamID: "s", trackID: "a", cname: "c")
        ours.videoTrack = SDPLocalTrack(ssrc: 2, streamID: "s", trackID: "v", cname: "c")
        let ourOffer = SDPNegotiation.offer(ours)
        var theirs = SDPLocalParameters(iceUfrag: "thei", icePwd: "rsrsrsrsrsrsrsrsrsrsrs", fingerprint: SDPFingerprint(algorithm: "sha-256", bytes: Array(0..<32)))
        theirs.candidates = [SDPCandidate(foundation: "9", priority: 1, address: TransportAddress("127.0.0.1:9999")!, kind: .host)]
        var (strict, _) = try SDPNegotiation.answer(to: ourOffer, local: theirs)
        strict.media[1].port = 0
        strict.media[1].bundleOnly = true
        strict.media[1].candidates = []
        strict.media[1].iceUfrag = nil; strict.media[1].icePwd = nil; strict.media[1].fingerprints = []
        let back = try SDPNegotiation.accept(answer: try SessionDescription.parse(strict.serialized()), offer: ourOffer)
        XCTAssertEqual(back.media.map(\.kind), ["audio", "video"])
        XCTAssertEqual(back.remoteIceUfrag, "thei")
        XCTAssertEqual(back.remoteCandidates.map(\.address.port), [9999])
    }

    func testSimulcastOfferWithoutSSRCsIsAnsweredWithOneStream() throws {
        let offer = try Self.corpus("chrome-simulcast-no-ssrc.sdp")
        XCTAssertTrue(offer.media[1].ssrcs.isEmpty)
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: Self.local)
        XCTAssertEqual(neg.media.map(\.direction), [.recvonly, .recvonly])
        XCTAssertEqual(neg.media[1].remoteSSRCs, [])  // learnt from the MID header extension of the first packets
        XCTAssertNotNil(neg.media[1].extensionIds.mid)
        let text = answer.serialized()
        XCTAssertFalse(text.contains("a=rid"))        // simulcast declined: the browser sends one encoding
        XCTAssertFalse(text.contains("a=simulcast"))
        XCTAssertFalse(text.contains("rtp-stream-id"))
    }

    /// Video FEC (ULPFEC inside RED) is offered and accepted as a pair; an offer with one of them, or a side that does
    /// not do FEC, agrees on none.
    func testREDAndULPFECAreNegotiatedTogether() throws {
        var a = Self.local
        a.videoTrack = SDPLocalTrack(ssrc: 5, streamID: "s", trackID: "v", cname: "a")
        let offer = SDPNegotiation.offer(a)
        XCTAssertEqual(offer.media[1].formats, ["96", "97", "100", "101"])
        XCTAssertEqual(offer.media[1].codec(100)?.name, "red")
        XCTAssertEqual(offer.media[1].codec(101)?.name, "ulpfec")
        let (answer, neg) = try SDPNegotiation.answer(to: try SessionDescription.parse(offer.serialized()), local: Self.local)
        XCTAssertEqual(neg.media[1].redPayloadType, 100)
        XCTAssertEqual(neg.media[1].ulpfecPayloadType, 101)
        XCTAssertEqual(try SDPNegotiation.accept(answer: try SessionDescription.parse(answer.serialized()), offer: offer).media[1].ulpfecPayloadType, 101)
        var noFEC = Self.local
        noFEC.videoFEC = false
        let (plainAnswer, plain) = try SDPNegotiation.answer(to: offer, local: noFEC)
        XCTAssertNil(plain.media[1].redPayloadType)
        XCTAssertEqual(plainAnswer.media[1].formats, ["96", "97"])
        XCTAssertNil(try SDPNegotiation.accept(answer: plainAnswer, offer: offer).media[1].redPayloadType)
        var redOnly = offer
        redOnly.media[1].codecs.removeAll { $0.name == "ulpfec" }
        XCTAssertNil(try SDPNegotiation.answer(to: redOnly, local: Self.local).1.media[1].redPayloadType)
    }

    func testTrackWithoutAKnownSSRCIsAnnouncedByMsidOnly() throws {
        var local = Self.local
        local.videoTrack = SDPLocalTrack(ssrc: 0, streamID: "s", trackID: "v", cname: "c", announcesSSRC: false)
        let (answer, neg) = try SDPNegotiation.answer(to: try Self.corpus("chrome-viewer-max-bundle-mdns.sdp"), local: local)
        XCTAssertEqual(neg.media.map(\.direction), [.inactive, .sendonly])
        XCTAssertEqual(answer.media[1].msids, [SDPMSID(stream: "s", track: "v")])
        XCTAssertEqual(answer.media[1].ssrcs, [])
        // The viewer's host candidates are mDNS names: none is usable, the router learns the browser from its checks.
        XCTAssertEqual(neg.remoteCandidates, [])
    }
}
