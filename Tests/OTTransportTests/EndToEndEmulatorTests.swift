import OTBase
import OTWire
@testable import OTRTP
@testable import OTTransport
import XCTest

/// The whole transport stack over the seeded emulator: ICE, DTLS, SRTP with the exported keys, and an RTP
/// session whose NACKs recover lost video packets. Deterministic for a seed; virtual time only.
final class EndToEndEmulatorTests: XCTestCase {
    func runVideo(loss: Double, seed: UInt64) throws -> (delivered: [UInt16], recovered: Int, dropped: Int, replays: Int) {
        let certA = try DTLSCertificate(), certB = try DTLSCertificate()
        let a = makePeer("a", role: .controlling, ["10.0.0.1:5000"], seed: seed)
        let b = makePeer("b", role: .controlled, ["10.0.0.2:6000"], seed: seed + 1)
        a.dtls = try DTLSEndpoint(role: .client, certificate: certA, remoteFingerprint: certB.fingerprint, timerMode: .virtualClock(realTimer: .milliseconds(20)))
        b.dtls = try DTLSEndpoint(role: .server, certificate: certB, remoteFingerprint: certA.fingerprint, timerMode: .virtualClock(realTimer: .milliseconds(20)))
        var pair = EmulatedPair(seed: seed, conditions: LinkConditions(delay: .milliseconds(25), jitter: .milliseconds(8), loss: loss, reorder: 0.05), a: a, b: b)
        signal(a, b, now: pair.clock.now())
        XCTAssertTrue(pair.run(for: .seconds(60)) { a.dtlsConnected && b.dtlsConnected })
        let ka = try XCTUnwrap(a.dtls?.keyingMaterial), kb = try XCTUnwrap(b.dtls?.keyingMaterial)
        let aSRTP = try SRTPContext(profile: ka.profile, keys: ka.srtpKeys), bSRTP = try SRTPContext(profile: kb.profile, keys: kb.srtpKeys)
        func protect(_ ctx: SRTPContext, _ bytes: [UInt8], rtcp: Bool) throws -> [UInt8] {
            var b = bytes
            if rtcp { try ctx.protectRTCP(&b) } else { try ctx.protectRTP(&b) }
            return b
        }

        let ssrc: UInt32 = 0xABCD
        let sender = RTPSession(config: .init(localSSRCs: [ssrc], cname: "a"), now: pair.clock.now())
        let receiver = RTPSession(config: .init(localSSRCs: [0x5555], cname: "b"), now: pair.clock.now())
        var buffer = RTPReceiveBuffer<[UInt8]>()
        var delivered: [UInt16] = []
        var replays = 0
        // 200 packets checked, then 10 more: a lost packet is only known (and NACKed) once a later one arrives.
        let total = 210
        for i in 0..<(total + 150) {  // 10 ms apart, then 1.5 s for the last repairs
            let now = pair.clock.now()
            if i < total {
                let pkt = testRTP(ssrc: ssrc, seq: UInt16(i), ts: UInt32(i) * 900, payload: Array(repeating: UInt8(i & 0xFF), count: 200))
                // The cache keeps the protected packet: a retransmission is the same SRTP packet again.
                let protected = try protect(aSRTP, pkt, rtcp: false)
                sender.sent(ssrc: ssrc, sequence: UInt16(i), rtpTimestamp: UInt32(i) * 900, clockRate: 90000, payloadBytes: 200, packet: protected, now: now)
                a.sendMedia(protected, into: &pair.net, now: now)
            }
            sender.handleTimeout(now: now); receiver.handleTimeout(now: now)
            while let r = sender.pollRTCP() { a.sendMedia(try protect(aSRTP, r, rtcp: true), into: &pair.net, now: now) }
            while let r = sender.pollRetransmission() { a.sendMedia(r, into: &pair.net, now: now) }
            while let r = receiver.pollRTCP() { b.sendMedia(try protect(bSRTP, r, rtcp: true), into: &pair.net, now: now) }
            pair.run(for: .milliseconds(10))
            let t = pair.clock.now()
            for d in b.received {
                let isRTCP = DemuxKind.classify(d) == .rtcp
                var plain = d
                do {
                    if isRTCP { try bSRTP.unprotectRTCP(&plain) } else { try bSRTP.unprotectRTP(&plain) }
                } catch SRTPError.replayed {
                    replays += 1  // a retransmission of a packet that also arrived (it was only late): dropped
                    continue
                } catch {
                    XCTFail("SRTP unprotect failed at b: \(error)")
                    continue
                }
                if isRTCP { receiver.handleRTCP(plain, now: t); continue }
                guard let f = testRTPFields(plain) else { continue }
                XCTAssertEqual(plain.count, 12 + 200)
                XCTAssertEqual(plain.last, UInt8(f.seq & 0xFF), "payload content survives")
                receiver.received(ssrc: f.ssrc, sequence: f.seq, rtpTimestamp: f.ts, clockRate: 90000, now: t)
                buffer.insert(sequence: f.seq, packet: plain)
                while let p = buffer.pop() { delivered.append(p.sequence) }
            }
            b.received.removeAll()
            for d in a.received {
                let isRTCP = DemuxKind.classify(d) == .rtcp
                var plain = d
                do { if isRTCP { try aSRTP.unprotectRTCP(&plain) } else { try aSRTP.unprotectRTP(&plain) } } catch { XCTFail("SRTP unprotect failed at a: \(error)"); continue }
                if isRTCP { sender.handleRTCP(plain, now: t) }
            }
            a.received.removeAll()
        }
        return (delivered, receiver.nackCounters(ssrc: ssrc)?.recovered ?? 0, pair.net.dropped, replays)
    }

    func testVideoOverICEDTLSSRTPRecoversLossesWithNACK() throws {
        for (loss, seed) in [(0.0, UInt64(300)), (0.05, 301), (0.20, 302)] {
            let r = try runVideo(loss: loss, seed: seed)
            print("E2E loss \(loss): dropped \(r.dropped), NACK-recovered \(r.recovered), duplicate retransmissions \(r.replays)")
            XCTAssertEqual(Array(r.delivered.prefix(200)), (0..<200).map { UInt16($0) }, "loss \(loss): every packet, in order")
            if loss > 0 {
                XCTAssertGreaterThan(r.dropped, 0)
                XCTAssertGreaterThan(r.recovered, 0, "loss \(loss): NACK recovered packets")
            }
        }
    }
}
