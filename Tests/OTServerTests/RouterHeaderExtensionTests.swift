import COTAllocCounter
import Foundation
import OTBase
@testable import OTServer
import OTTransport
import OTWire
import Synchronization
import XCTest

/// The router writes each subscriber the header extensions it negotiated, under its ids, with its own mids; and
/// learns the SSRCs of a publisher whose offer had no `a=ssrc` from the MID of its first packets.
final class RouterHeaderExtensionTests: RouterTestCase {
    /// An offer of ours as another stack would write it: mids renamed, extension ids changed, extensions added.
    struct Munge {
        var mids: [String: String] = [:]
        var ids: [String: UInt16] = [:]
        var add: [(kind: String, SDPExtmap)] = []
        var dropSSRCs = false

        func apply(_ sdp: String) throws -> String {
            var sd = try SessionDescription.parse(sdp)
            sd.groups = sd.groups.map { ($0.semantics, $0.mids.map { mids[$0] ?? $0 }) }
            for i in sd.media.indices {
                sd.media[i].mid = sd.media[i].mid.map { mids[$0] ?? $0 }
                sd.media[i].extmaps = sd.media[i].extmaps.map { e in var e = e; e.id = ids[e.uri] ?? e.id; return e }
                sd.media[i].extmaps += add.filter { $0.kind == sd.media[i].kind }.map(\.1)
                if dropSSRCs { sd.media[i].ssrcs = []; sd.media[i].ssrcGroups = [] }
            }
            return sd.serialized()
        }
        /// The router's answer, with our own mids back, so our client accepts it (ids stay as negotiated).
        func undo(_ answer: String) throws -> String {
            var back = Munge()
            for (k, v) in mids { back.mids[v] = k }
            return try back.apply(answer)
        }
    }

    func negotiate(_ c: RouterClient, peer: String, _ dir: MediaDirection, _ munge: Munge) throws -> SessionDescription {
        let offer = try munge.apply(try c.driver.createOffer())
        let result = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: "s", connectionId: "c-\(peer)", peerId: peer, streamId: "st", direction: dir, sdp: offer)) {
            r in result.withLock { $0 = r }
        }
        XCTAssertTrue(waitFor { result.withLock { $0 != nil } })
        let answer = try XCTUnwrap(result.withLock { $0 }).get()
        try c.driver.setRemoteAnswer(try munge.undo(answer))
        return try SessionDescription.parse(answer)
    }

    /// Chromium's ids: audio level 1, abs-send-time 2, transport-wide 3, MID 4; and video orientation (13), which the
    /// router does not accept. Its mids are "pa" and "pv".
    static let chromium = Munge(mids: ["0": "pa", "1": "pv"],
                                ids: [MidExtension.uri: 4, TransportWideSequenceNumber.uri: 3, AudioLevelExtension.uri: 1],
                                add: [("audio", SDPExtmap(id: 2, uri: AbsSendTime.uri)), ("video", SDPExtmap(id: 2, uri: AbsSendTime.uri)),
                                      ("video", SDPExtmap(id: 13, uri: "urn:3gpp:video-orientation"))])

    /// What a Chromium publisher's packets carry.
    func publisherPacket(video: Bool, seq: UInt16, keyframe: Bool = false) throws -> [UInt8] {
        var elements: [RTPHeaderExtensionElement] = [.init(id: 2, value: [9, 9, 9]), .init(id: 3, value: [0, 0]),
                                                     .init(id: 4, value: Array((video ? "pv" : "pa").utf8)[...])]
        elements += video ? [.init(id: 13, value: [1])] : [.init(id: 1, value: [0x80 | 33])]
        return RTPPacket(marker: true, payloadType: video ? 96 : 111, sequenceNumber: seq, timestamp: UInt32(seq) * 3000,
                         ssrc: video ? Self.video : Self.audio, extensions: try RTPHeaderExtensions(elements),
                         payload: video ? [0x10, keyframe ? 0 : 1, UInt8(seq & 0xFF)] : [0xF8, UInt8(seq & 0xFF)]).serialized()
    }

    func sendFromPublisher(_ pub: RouterClient, _ seqs: Range<UInt16>) throws {
        for s in seqs {
            var v = try publisherPacket(video: true, seq: s, keyframe: s == seqs.lowerBound)
            XCTAssertTrue(pub.driver.sendRTP(&v))
            var a = try publisherPacket(video: false, seq: s)
            XCTAssertTrue(pub.driver.sendRTP(&a))
        }
    }

    /// The RTP a client received, in order: SSRC and extension elements.
    func received(_ c: RouterClient) -> [(ssrc: UInt32, elements: [UInt8: [UInt8]], twoByte: Bool)] {
        c.events.withLock {
            $0.compactMap {
                guard case .rtp(let r) = $0 else { return nil }
                let p = r.packet
                var d: [UInt8: [UInt8]] = [:]
                for e in p.extensions.elements { d[e.id] = Array(e.value) }
                return (p.ssrc, d, p.extensions.isTwoByte)
            }
        }
    }

    func testEachSubscriberGetsItsOwnIdsMidsAndTransportWideNumbers() throws {
        router = try MediaRouter()
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video)
        // The subscriber: MID as id 2, transport-cc as id 5, and video as mid "0", audio as mid "1".
        let swapped = Munge(mids: ["0": "1", "1": "0"], ids: [MidExtension.uri: 2, TransportWideSequenceNumber.uri: 5, AudioLevelExtension.uri: 7])
        // Our own ids plus abs-send-time; and one whose ids need the two-byte form.
        let plain = Munge(add: [("audio", SDPExtmap(id: 14, uri: AbsSendTime.uri)), ("video", SDPExtmap(id: 14, uri: AbsSendTime.uri))])
        let wide = Munge(ids: [MidExtension.uri: 20, TransportWideSequenceNumber.uri: 30])
        let subs = try (0..<3).map { _ in try RouterClient() }
        clients = [pub] + subs
        let pubAnswer = try negotiate(pub, peer: "pub", .publish, Self.chromium)
        XCTAssertEqual(pubAnswer.media[1].extmaps.map(\.id), [4, 3, 2], "video orientation is not accepted")
        let answers = try zip(subs, [swapped, plain, wide]).enumerated().map { i, p in try negotiate(p.0, peer: "sub\(i)", .subscribe, p.1) }
        XCTAssertEqual(answers[0].bundleMids, ["1", "0"])
        XCTAssertTrue(waitFor { ([pub] + subs).allSatisfy(\.connected) })
        try sendFromPublisher(pub, 0..<30)
        XCTAssertTrue(waitFor { subs.allSatisfy { s in self.received(s).filter { $0.ssrc == Self.audio }.count == 30 } })

        let expected: [[UInt32: Set<UInt8>]] = [
            [Self.audio: [2, 5, 7], Self.video: [2, 5]],
            [Self.audio: [1, 2, 3, 14], Self.video: [1, 2, 14]],
            [Self.audio: [20, 30, 3], Self.video: [20, 30]],
        ]
        let midId: [UInt8] = [2, 1, 20], twccId: [UInt8] = [5, 2, 30]
        let mids: [[UInt32: String]] = [[Self.audio: "1", Self.video: "0"], [Self.audio: "0", Self.video: "1"], [Self.audio: "0", Self.video: "1"]]
        for (i, s) in subs.enumerated() {
            let got = received(s)
            XCTAssertGreaterThanOrEqual(got.count, 40)
            var twcc: [UInt16] = []
            for p in got {
                XCTAssertEqual(Set(p.elements.keys), expected[i][p.ssrc], "subscriber \(i): exactly what it negotiated")
                XCTAssertEqual(p.elements[midId[i]], mids[i][p.ssrc].map { Array($0.utf8) }, "subscriber \(i): its own mid")
                XCTAssertEqual(p.twoByte, i == 2)
                if let v = p.elements[twccId[i]], v.count == 2 { twcc.append(UInt16(v[0]) << 8 | UInt16(v[1])) }
                if p.ssrc == Self.audio, let level = p.elements[[7, 3, 3][i]] { XCTAssertEqual(level, [0x80 | 33], "the publisher's audio level") }
            }
            // The subscriber's own transport-wide numbering: one per packet sent on its connection, in order.
            XCTAssertEqual(twcc.count, got.count)
            XCTAssertEqual(twcc, Array(twcc.first!..<(twcc.first! + UInt16(twcc.count))), "subscriber \(i)")
        }
    }

    func testSSRCsOfAnOfferWithoutSSRCLinesAreLearntFromTheMID() throws {
        router = try MediaRouter()
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video)
        let early = try RouterClient(), late = try RouterClient()
        clients = [pub, early, late]
        var noSSRC = Self.chromium
        noSSRC.dropSSRCs = true
        _ = try negotiate(pub, peer: "pub", .publish, noSSRC)
        // Before any packet: the subscriber's answer announces the tracks by msid, without SSRCs.
        let earlyAnswer = try negotiate(early, peer: "early", .subscribe, Munge())
        XCTAssertEqual(earlyAnswer.media.map(\.direction), [.sendonly, .sendonly])
        XCTAssertEqual(earlyAnswer.media.map(\.ssrcs.count), [0, 0])
        XCTAssertEqual(earlyAnswer.media.map(\.msids.count), [1, 1])
        XCTAssertTrue(waitFor { pub.connected && early.connected })
        try sendFromPublisher(pub, 0..<20)
        XCTAssertTrue(waitFor { self.received(early).filter { $0.ssrc == Self.audio }.count == 20 })
        XCTAssertTrue(waitFor { self.received(early).filter { $0.ssrc == Self.video }.count >= 10 })
        // Once learnt, a new subscriber's answer names them.
        let lateAnswer = try negotiate(late, peer: "late", .subscribe, Munge())
        // (The video section's second SSRC is the router's RTX stream, paired by a=ssrc-group:FID.)
        XCTAssertEqual(lateAnswer.media.map { $0.ssrcList.first }, [Self.audio, Self.video])
        XCTAssertEqual(lateAnswer.media[1].ssrcGroups.first.map { $0.semantics + " \($0.ssrcs.first ?? 0)" }, "FID \(Self.video)")
        XCTAssertTrue(waitFor { late.connected })
    }

    /// Steady rewriting into a reused buffer allocates nothing (`ot_alloc_count` counts every malloc of the process;
    /// other threads may allocate meanwhile, hence the small allowance).
    func testRewritingDoesNotAllocate() throws {
        let r = RTPExtensionRewriter(source: RTPHeaderExtensionIds(audioLevel: 1),
                                     target: RTPHeaderExtensionIds(absSendTime: 3, transportSequenceNumber: 5, mid: 2, audioLevel: 7), mid: "1")
        let packet = try publisherPacket(video: false, seq: 1)
        var out: [UInt8] = []
        out.reserveCapacity(1500)
        for i in 0..<100 { r.rewrite(packet, into: &out, now: Instant(micros: Int64(i))) }
        let before = ot_alloc_count()
        for i in 0..<100_000 { r.rewrite(packet, into: &out, now: Instant(micros: Int64(i))) }
        let allocations = ot_alloc_count() - before
        XCTAssertLessThan(allocations, 100, "\(allocations) allocations for 100,000 rewrites")
    }
}
