import OTBase
import OTWire
@testable import OTTransport
import XCTest

func peerConfig(audioSSRC: UInt32?, videoSSRC: UInt32?, lite: Bool = false, seed: UInt64) -> PeerConnectionConfig {
    var c = PeerConnectionConfig(audioTrack: audioSSRC.map { SDPLocalTrack(ssrc: $0, streamID: "s\($0)", trackID: "a\($0)", cname: "c") },
                                 videoTrack: videoSSRC.map { SDPLocalTrack(ssrc: $0, streamID: "s\($0)", trackID: "v\($0)", cname: "c") },
                                 iceLite: lite)
    c.seed = seed
    c.dtlsTimerMode = .virtualClock(realTimer: .milliseconds(20))
    return c
}

final class PeerConnectionTests: XCTestCase {
    /// A offers, B answers through SDP text; both send 200 video packets 10 ms apart; NACK repairs losses.
    func exchange(loss: Double, reorder: Double = 0, seed: UInt64) throws -> (a: PeerConnection, b: PeerConnection, dropped: Int) {
        let env = EmulatedPeerConnections(seed: seed, conditions: LinkConditions(delay: .milliseconds(20), jitter: .milliseconds(5), loss: loss, reorder: reorder))
        let now = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: 0xA1, videoSSRC: 0xA2, seed: seed), now: now)
        let b = try PeerConnection(config: peerConfig(audioSSRC: 0xB1, videoSSRC: 0xB2, seed: seed + 1), now: now)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        let offer = try a.createOffer()
        let answer = try b.createAnswer(toOffer: offer, now: now)
        try a.setRemoteAnswer(answer, now: now)
        XCTAssertEqual(a.negotiated?.media.map(\.remoteSSRCs), [[0xB1], [0xB2]])
        XCTAssertEqual(b.negotiated?.media.map(\.remoteSSRCs), [[0xA1], [0xA2]])
        XCTAssertTrue(env.run(for: .seconds(30)) { env.connected(0) && env.connected(1) }, "events: \(env.events)")
        XCTAssertTrue(a.isConnected && b.isConnected)

        var gotA: [UInt16: [UInt8]] = [:], gotB: [UInt16: [UInt8]] = [:]
        // 2 s of media, then 6.5 s more of reports: enough sender/receiver report pairs survive 20% loss for an RTT.
        // Ten packets follow the 200 checked ones: a lost last packet has no successor to reveal it, so no NACK.
        // (The loss pattern is seeded, but OpenSSL's DTLS timers run on real time, so where it falls may vary.)
        for i in 0..<850 {
            let t = env.clock.now()
            if i < 210 {
                var pa = testRTP(ssrc: 0xA2, seq: UInt16(1000 + i), ts: UInt32(i) * 900, payload: Array(repeating: UInt8(i & 0xFF), count: 300))
                var pb = testRTP(ssrc: 0xB2, seq: UInt16(60000 &+ i), ts: UInt32(i) * 900, payload: Array(repeating: UInt8(~i & 0xFF), count: 300))
                XCTAssertTrue(a.sendRTP(&pa, now: t))
                XCTAssertTrue(b.sendRTP(&pb, now: t))
            }
            env.run(for: .milliseconds(10))
            for p in env.takeRTP(1) { if let f = testRTPFields(p) { XCTAssertEqual(f.ssrc, 0xA2); gotB[f.seq] = p } }
            for p in env.takeRTP(0) { if let f = testRTPFields(p) { XCTAssertEqual(f.ssrc, 0xB2); gotA[f.seq] = p } }
        }
        // NACK repairs every gap after the first packet that arrives; packets lost before it are unknown to the
        // receiver (it has no sequence number to count from), so the check starts at the first arrival.
        func repaired(_ got: [UInt16: [UInt8]], from base: UInt16) -> Set<UInt16> {
            let first = (0..<200).first { got[base &+ UInt16($0)] != nil } ?? 200
            XCTAssertLessThan(first, 5, "loss \(loss): media arrived early in the run")
            return Set((first..<200).map { base &+ UInt16($0) })
        }
        func checked(_ got: [UInt16: [UInt8]], from base: UInt16) -> Set<UInt16> { Set(got.keys.filter { $0 &- base < 200 }) }
        XCTAssertEqual(checked(gotB, from: 1000), repaired(gotB, from: 1000), "loss \(loss): B got every packet of A from its first")
        XCTAssertEqual(checked(gotA, from: 60000), repaired(gotA, from: 60000), "loss \(loss): A got every packet of B from its first")
        for (seq, p) in gotB { XCTAssertEqual(p.count, 312); XCTAssertEqual(p.last, UInt8((Int(seq) - 1000) & 0xFF)) }
        // At 20% loss a few report exchanges in 3.5 s may all lose an SR or RR; RTT is checked at lower loss.
        if loss < 0.1 { XCTAssertNotNil(a.stats.roundTripTime, "RTT measured from reports") }
        return (a, b, env.net.dropped)
    }

    /// The answerer checks as soon as it answers, so its first check reaches the offerer before the answer does
    /// (signaling is slower than the media path). The offerer answers it at once and checks back once the answer
    /// comes: both connect without waiting for a retransmission (was: the answerer's ICE waited its 250 ms RTO).
    func testChecksThatReachTheOffererBeforeTheAnswerAreAnswered() throws {
        let env = EmulatedPeerConnections(seed: 800, conditions: LinkConditions(delay: .milliseconds(5)))
        let start = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xA2, seed: 800), now: start)
        let b = try PeerConnection(config: peerConfig(audioSSRC: nil, videoSSRC: 0xB2, seed: 801), now: start)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        let answer = try b.createAnswer(toOffer: try a.createOffer(), now: start)
        // The answer takes 30 ms through signaling; b's check arrives after 5.
        XCTAssertFalse(env.run(for: .milliseconds(30)) { env.connected(1) })
        XCTAssertEqual(b.transport?.ice.pairStates.map(\.state), [.succeeded], "the offerer answered the early check")
        XCTAssertNil(a.transport, "no remote description yet")
        let answered = env.clock.now()
        try a.setRemoteAnswer(answer, now: answered)
        // ICE runs on the virtual clock: both sides select their pair within a few round trips of the answer. (DTLS
        // follows; OpenSSL's retransmission timers run on real time, so its finish is not timed here.)
        XCTAssertTrue(env.run(for: .milliseconds(100)) { a.selectedCandidatePair != nil && b.selectedCandidatePair != nil },
                      "ICE up within 100 ms of the answer; events: \(env.events)")
        XCTAssertTrue(env.run(for: .seconds(5)) { env.connected(0) && env.connected(1) }, "events: \(env.events)")
        XCTAssertEqual(a.selectedCandidatePair?.remote.address, TransportAddress("10.0.0.2:6000"))
        XCTAssertEqual(a.selectedCandidatePair?.remote.kind, .host, "the answer's candidate replaced the peer-reflexive one")
        XCTAssertEqual(b.selectedCandidatePair?.remote.address, TransportAddress("10.0.0.1:5000"))
        var p = testRTP(ssrc: 0xB2, seq: 1, ts: 0, payload: [1, 2, 3])
        XCTAssertTrue(b.sendRTP(&p, now: env.clock.now()))
        env.run(for: .milliseconds(20))
        XCTAssertEqual(env.takeRTP(0).count, 1)
    }

    func testTwoPeerConnectionsExchangeRTPWithoutLoss() throws {
        let r = try exchange(loss: 0, seed: 500)
        XCTAssertEqual(r.a.stats.retransmissionsSent + r.b.stats.retransmissionsSent, 0)
        XCTAssertEqual(r.b.stats.packetsReceived, 210, "the 200 checked packets and the 10 that follow them")
        XCTAssertEqual(r.a.stats.srtpErrors + r.b.stats.srtpErrors, 0)
    }

    func testNACKRecoversFivePercentLoss() throws {
        let r = try exchange(loss: 0.05, seed: 501)
        XCTAssertGreaterThan(r.dropped, 0)
        XCTAssertGreaterThan(r.a.stats.retransmissionsSent, 0, "A answered B's NACKs from its cache")
        XCTAssertGreaterThan(r.b.stats.retransmissionsSent, 0)
        XCTAssertGreaterThan(r.a.stats.nacksReceived, 0)
        XCTAssertEqual(r.a.stats.srtpErrors + r.b.stats.srtpErrors, 0, "replays are counted apart, not as errors")
    }

    func testNACKRecoversTwentyPercentLossWithReordering() throws {
        let r = try exchange(loss: 0.20, reorder: 0.1, seed: 502)
        XCTAssertGreaterThan(r.dropped, 50)
        XCTAssertGreaterThan(r.a.stats.retransmissionsSent, 20)
    }

    func testKeyframeRequestReachesTheSender() throws {
        let env = EmulatedPeerConnections(seed: 7, conditions: LinkConditions(delay: .milliseconds(5)))
        let (a, b) = try env.connectedPair(peerConfig(audioSSRC: nil, videoSSRC: 0x77, seed: 7),
                                           peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 8))
        var p = testRTP(ssrc: 0x77, seq: 1, ts: 0, payload: [1, 2, 3])
        a.sendRTP(&p, now: env.clock.now())
        env.run(for: .milliseconds(50))
        b.requestKeyframe(ssrc: 0x77, now: env.clock.now())
        XCTAssertTrue(env.run(for: .seconds(1)) { env.events[0].contains(.keyframeRequested(ssrc: 0x77)) })
        XCTAssertEqual(a.stats.keyframeRequestsReceived, 1)
        // A second request within the pacing interval (100 ms) waits for its end; one its caller paces itself goes at once.
        let received = a.stats.keyframeRequestsReceived
        let t = env.clock.now()
        b.requestKeyframe(ssrc: 0x77, now: t)  // the last was longer ago than the interval: sent
        env.run(for: .milliseconds(20))
        b.requestKeyframe(ssrc: 0x77, now: env.clock.now())
        env.run(for: .milliseconds(20))
        XCTAssertEqual(a.stats.keyframeRequestsReceived, received + 1, "the second is held by the pacer")
        b.requestKeyframe(ssrc: 0x77, paced: false, now: env.clock.now())
        env.run(for: .milliseconds(20))
        XCTAssertEqual(a.stats.keyframeRequestsReceived, received + 2, "unpaced: sent at once")
        XCTAssertLessThan(env.clock.now() - t, .milliseconds(100), "still within the held request's interval")
    }

    /// One malformed packet in a received compound is skipped and counted (`rtcpPacketsSkipped`); the PLI before it and
    /// the NACK after it still reach the sender, which resends the packet asked for.
    func testAMalformedRTCPPacketIsCountedAndTheRestOfItsCompoundHandled() throws {
        let env = EmulatedPeerConnections(seed: 9, conditions: LinkConditions(delay: .milliseconds(5)))
        let (a, b) = try env.connectedPair(peerConfig(audioSSRC: nil, videoSSRC: 0x77, seed: 9),
                                           peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 10))
        for seq: UInt16 in 1...3 {
            var p = testRTP(ssrc: 0x77, seq: seq, ts: 0, payload: [1, 2, 3])
            XCTAssertTrue(a.sendRTP(&p, now: env.clock.now()))
        }
        env.run(for: .milliseconds(50))
        // An XR whose block claims 20 bytes of the 4 its packet holds, between a PLI and a NACK.
        let badXR: [UInt8] = [0x80, 207, 0, 3, 0, 0, 0, 9, 7, 0, 0, 5, 0, 0, 0, 0]
        let compound = RTCP.serialize([.pli(senderSSRC: 9, mediaSSRC: 0x77)]) + badXR
            + RTCP.serialize([.nack(senderSSRC: 9, mediaSSRC: 0x77, lost: [2])])
        XCTAssertTrue(b.sendRTCP(compound))
        XCTAssertTrue(env.run(for: .seconds(1)) { env.events[0].contains(.nackRequested(ssrc: 0x77, sequences: [2])) })
        XCTAssertTrue(env.events[0].contains(.keyframeRequested(ssrc: 0x77)))
        XCTAssertEqual(a.stats.rtcpPacketsSkipped, 1)
        XCTAssertEqual(a.stats.retransmissionsSent, 1)
        XCTAssertEqual(b.stats.rtcpPacketsSkipped, 0, "what a connection sends parses")
    }

    /// An answer without RTX means that no RTX is sent, so there is nothing to unwrap (stop 23's open case, decided): an
    /// answerer declares an RTX SSRC (`a=ssrc-group:FID`) only when its answer lists RTX (libwebrtc's `AddStreamParams`,
    /// `include_rtx_streams`; our `SDPNegotiation.answer` likewise), and without one it resends the lost packets
    /// themselves. So a codec of our offer that such an answer left out (Chromium with codec preferences of VP9 only
    /// sends the offer's first codec, VP8) is repaired by its own retransmissions; the offer's RTX payload types are
    /// not taken, and an RTX packet that came anyway is handed up unassigned, as any payload type nothing negotiated.
    func testAnAnswerWithoutRTXRepairsALeftOutCodecWithItsOwnPackets() throws {
        let env = EmulatedPeerConnections(seed: 21, conditions: LinkConditions(delay: .milliseconds(5)))
        let now = env.clock.now()
        var offerer = peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 21)
        offerer.videoFormats = [PayloadFormats.vp8, PayloadFormats.vp9]
        var answerer = peerConfig(audioSSRC: nil, videoSSRC: 0xB2, seed: 22)
        answerer.videoFormats = [PayloadFormats.vp9]
        let a = try PeerConnection(config: offerer, now: now), b = try PeerConnection(config: answerer, now: now)
        env.add(a, "10.0.0.1:5000")
        env.add(b, "10.0.0.2:6000")
        var answer = try SessionDescription.parse(try b.createAnswer(toOffer: try a.createOffer(), now: now))
        answer.media[1].codecs.removeAll { $0.name == "rtx" }
        answer.media[1].formats = answer.media[1].codecs.map { String($0.payloadType) }
        XCTAssertEqual(answer.media[1].codecs.map(\.name), ["VP9", "red", "ulpfec"])
        XCTAssertEqual(answer.media[1].ssrcGroups, [], "no RTX, no RTX SSRC")
        try a.setRemoteAnswer(answer.serialized(), now: now)
        let video = try XCTUnwrap(a.negotiated?.media[1])
        XCTAssertNil(video.rtxPayloadType)
        XCTAssertEqual(video.otherRTXPayloadTypes, [:], "no RTX payload type of the offer is taken")
        XCTAssertEqual(video.payloadFormats.mapValues(\.name), [98: "VP9", 96: "VP8", 100: "VP9", 101: "VP9"])
        XCTAssertTrue(env.run(for: .seconds(30)) { env.connected(0) && env.connected(1) }, "events: \(env.events)")

        // VP8 on 96, as Chromium sends the offer's first codec; the second packet is lost on the way.
        func send(_ seq: UInt16, pt: UInt8 = 96, ssrc: UInt32 = 0xB2) {
            var p = RTPPacket(payloadType: pt, sequenceNumber: seq, timestamp: 0, ssrc: ssrc, payload: [0x90, 0x80, 1, 2][...]).serialized()
            XCTAssertTrue(b.sendRTP(&p, now: env.clock.now()))
        }
        send(1)
        env.drain(now: env.clock.now())
        env.net.conditions.loss = 1
        send(2)
        env.drain(now: env.clock.now())
        env.net.conditions.loss = 0
        send(3)
        func arrived() -> [ReceivedRTP] { env.events[0].compactMap { if case .rtp(let r) = $0 { r } else { nil } } }
        XCTAssertTrue(env.run(for: .seconds(2)) { arrived().contains { $0.packet.sequenceNumber == 2 } }, "seq 2 repaired")
        let repaired = try XCTUnwrap(arrived().first { $0.packet.sequenceNumber == 2 })
        XCTAssertEqual([repaired.packet.ssrc, UInt32(repaired.packet.payloadType)], [0xB2, 96], "the packet itself, resent")
        XCTAssertEqual(repaired.section?.format?.name, "VP8")
        XCTAssertEqual(a.stats.nackRepaired, 1)
        XCTAssertEqual(b.stats.retransmissionsSent, 1)
        XCTAssertEqual(a.stats.rtxPacketsReceived, 0)
        // A peer that sent RTX on the offer's 97 regardless (its own answer did not allow it): not taken as RTX.
        send(1, pt: 97, ssrc: 0xB3)
        XCTAssertTrue(env.run(for: .seconds(1)) { arrived().contains { $0.packet.payloadType == 97 } })
        XCTAssertNil(arrived().first { $0.packet.payloadType == 97 }?.section)
        XCTAssertEqual(a.stats.rtxPacketsReceived + a.stats.rtxPacketsDiscarded, 0)
    }

    /// The transport parses each packet once and assigns it to the negotiated section its payload type names: Opus
    /// (111) to audio, VP8 (96) to video, with the format; a payload type no section negotiated comes up unassigned.
    func testReceivedRTPIsDemultiplexedByPayloadTypeOntoTheNegotiatedSections() throws {
        let env = EmulatedPeerConnections(seed: 11, conditions: LinkConditions(delay: .milliseconds(5)))
        let (a, _) = try env.connectedPair(peerConfig(audioSSRC: 0x71, videoSSRC: 0x72, seed: 11),
                                           peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 12))
        for (pt, ssrc, seq) in [(UInt8(111), UInt32(0x71), UInt16(1)), (96, 0x72, 1), (77, 0x72, 2)] {
            var p = RTPPacket(payloadType: pt, sequenceNumber: seq, timestamp: 0, ssrc: ssrc, payload: [0x78, 1, 2][...]).serialized()
            XCTAssertTrue(a.sendRTP(&p, now: env.clock.now()))
        }
        var got: [ReceivedRTP] = []
        XCTAssertTrue(env.run(for: .seconds(1)) {
            env.events[1].removeAll { if case .rtp(let r) = $0 { got.append(r); return true }; return false }
            return got.count == 3
        })
        got.sort { $0.packet.payloadType > $1.packet.payloadType }
        XCTAssertEqual(got.map(\.packet.payloadType), [111, 96, 77])
        XCTAssertEqual(got.map { $0.section?.kind }, [.audio, .video, nil])
        XCTAssertEqual(got.map { $0.section?.format?.name }, ["opus", "VP8", nil])
        XCTAssertEqual(got.map { $0.section?.mid }, ["0", "1", nil])
        XCTAssertEqual(got.map { Array($0.packet.payload) }, [[0x78, 1, 2], [0x78, 1, 2], [0x78, 1, 2]])
        XCTAssertEqual(got[0].bytes, RTPPacket(payloadType: 111, sequenceNumber: 1, timestamp: 0, ssrc: 0x71, payload: [0x78, 1, 2][...]).serialized())
    }

    func testFingerprintMismatchFailsTheConnection() throws {
        let env = EmulatedPeerConnections(seed: 9, conditions: LinkConditions(delay: .milliseconds(5)))
        let now = env.clock.now()
        let a = try PeerConnection(config: peerConfig(audioSSRC: 1, videoSSRC: nil, seed: 9), now: now)
        let b = try PeerConnection(config: peerConfig(audioSSRC: 2, videoSSRC: nil, seed: 10), now: now)
        env.add(a, "10.0.0.1:5000"); env.add(b, "10.0.0.2:6000")
        let offer = try a.createOffer()
        // Someone swapped the fingerprint in transit.
        let other = try DTLSCertificate().fingerprint.description
        let forged = offer.replacingOccurrences(of: a.certificate.fingerprint.description, with: other)
        XCTAssertNotEqual(forged, offer)
        try a.setRemoteAnswer(try b.createAnswer(toOffer: forged, now: now), now: now)
        XCTAssertTrue(env.run(for: .seconds(30)) { env.events[1].contains { if case .failed = $0 { true } else { false } } })
        XCTAssertFalse(b.isConnected)
        XCTAssertTrue(env.events[1].contains { if case .failed(let e) = $0 { e.code == .connectionRefused } else { false } })
    }

    func testGarbageDatagramsAreDroppedAndTheConnectionKeepsWorking() throws {
        let env = EmulatedPeerConnections(seed: 11, conditions: LinkConditions(delay: .milliseconds(5)))
        let (a, b) = try env.connectedPair(peerConfig(audioSSRC: nil, videoSSRC: 0x31, seed: 11),
                                           peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 12))
        var rng = SeededRandom(seed: 99)
        let from = TransportAddress("10.0.0.1:5000")!, to = TransportAddress("10.0.0.2:6000")!
        for i in 0..<3000 {
            // Every demultiplexer range (STUN, DTLS, RTP/RTCP, TURN channel, other) with random lengths and bytes.
            let first: [UInt8] = [0, 1, 20, 23, 64, 128, 200, 201, 255]
            var d = (0..<Int(rng.next() % 300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if !d.isEmpty { d[0] = first[i % first.count] }
            b.handleReceive(d, from: from, local: to, now: env.clock.now())
        }
        env.drain(now: env.clock.now())
        XCTAssertTrue(b.isConnected)
        XCTAssertFalse(b.isFailed)
        XCTAssertGreaterThan(b.stats.srtpErrors, 100)
        XCTAssertFalse(env.events[1].contains { if case .rtp = $0 { true } else { false } }, "nothing forged got through SRTP")
        var p = testRTP(ssrc: 0x31, seq: 5, ts: 0, payload: [7])
        a.sendRTP(&p, now: env.clock.now())
        XCTAssertTrue(env.run(for: .seconds(1)) { env.takeRTP(1).count == 1 })
    }

    func testMalformedSDPIsAnError() throws {
        let pc = try PeerConnection(config: PeerConnectionConfig(), now: .zero)
        XCTAssertThrowsError(try pc.createAnswer(toOffer: "v=0\r\nm=audio x\r\n", now: .zero))
        XCTAssertThrowsError(try pc.setRemoteAnswer("v=0\r\n", now: .zero), "no offer yet")
    }
}
