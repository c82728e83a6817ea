import OTBase
import OTWire
@testable import OTRTP
@testable import OTTransport
import XCTest

/// ULPFEC with RED between a sender and a receiver processor, over the seeded emulator on virtual time: losses are
/// rebuilt without any retransmission, bit for bit, and the sequence space stays gap-free for the receiver.
final class ULPFECTests: XCTestCase {
    func testProtectionFollowsTheLossWhereItPays() {
        let rtt = Duration.milliseconds(60)
        XCTAssertEqual(ULPFECSender.protection(forLoss: 0.02, roundTripTime: rtt), 0, "NACK alone below 5 %")
        XCTAssertEqual(ULPFECSender.protection(forLoss: 0.10, roundTripTime: rtt), 0.15, accuracy: 1e-9)
        XCTAssertEqual(ULPFECSender.protection(forLoss: 0.40, roundTripTime: rtt), 0.5, "at most one FEC packet per two media packets")
        XCTAssertEqual(ULPFECSender.protection(forLoss: .nan, roundTripTime: rtt), 0)
        XCTAssertEqual(ULPFECSender.protection(forLoss: 0.30, roundTripTime: .milliseconds(2)), 0, "a short path: NACK is quicker")
    }

    /// FEC packets take numbers after frames; a media packet that reaches the sender late (a router forwards what its
    /// uplink repaired) keeps the number of its place, so the receiver's NACK for that number is answered by it.
    func testALatePacketKeepsTheNumberOfItsPlace() throws {
        var s = ULPFECSender(mediaPayloadType: 96, redPayloadType: 100, ulpfecPayloadType: 101)
        s.protection = 1
        func media(_ seq: UInt16, marker: Bool) -> [UInt8] {
            RTPPacket(marker: marker, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(seq / 2) * 3000, ssrc: 1, payload: [1, 2, 3]).serialized()
        }
        var wire: [UInt16] = []
        for seq: UInt16 in [10, 11, 12, 13] where seq != 11 {  // 11 is late
            var p = media(seq, marker: seq % 2 == 1)
            let fec = s.process(&p)
            wire.append(UInt16(p[2]) << 8 | UInt16(p[3]))
            wire += fec.map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        }
        XCTAssertEqual(wire, [10, 12, 13, 14, 15, 16], "11's place is kept; three FEC packets (protection 1) after 13 ends a frame")
        var late = media(11, marker: true)
        XCTAssertEqual(s.process(&late), [], "no FEC for a late packet")
        XCTAssertEqual(UInt16(late[2]) << 8 | UInt16(late[3]), 11)
        XCTAssertEqual(late[1] & 0x7F, 100, "as RED")
        var next = media(14, marker: true)
        _ = s.process(&next)
        XCTAssertEqual(UInt16(next[2]) << 8 | UInt16(next[3]), 17, "after the FEC packets")
    }

    func testLossesAreRebuiltFromFECOverTheEmulator() throws {
        let clock = VirtualClock()
        var net = NetworkEmulator(seed: 2024, conditions: LinkConditions(delay: .milliseconds(30), jitter: .milliseconds(4), loss: 0.10))
        let a = TransportAddress("10.0.0.1:5000")!, b = TransportAddress("10.0.0.2:6000")!
        var sender = ULPFECSender(mediaPayloadType: 96, redPayloadType: 100, ulpfecPayloadType: 101)
        sender.protection = ULPFECSender.protection(forLoss: 0.2, roundTripTime: .milliseconds(60))
        var receiver = ULPFECReceiver(redPayloadType: 100, ulpfecPayloadType: 101)
        var sentMedia: [UInt16: [UInt8]] = [:]   // plain media as protected, by the sequence number on the wire
        var wireSeqs: [UInt16] = []
        var delivered: [UInt16: [UInt8]] = [:]
        var recoveredSeqs: Set<UInt16> = []
        // 200 frames of 1–6 packets, 33 ms apart.
        var seq: UInt16 = 65_400
        for f in 0..<200 {
            let n = 1 + f % 6
            for k in 0..<n {
                var p = RTPPacket(marker: k == n - 1, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(f) * 3000, ssrc: 0x5EED,
                                  payload: (0..<(100 + 37 * k)).map { UInt8(truncatingIfNeeded: $0 ^ f) }[...]).serialized()
                seq &+= 1
                let fec = sender.process(&p)
                let wire = try RTPPacket(parsing: p)
                XCTAssertEqual(wire.payloadType, 100, "media goes as RED")
                var plain = wire
                plain.payloadType = 96
                plain.payload = wire.payload.dropFirst()
                sentMedia[wire.sequenceNumber] = plain.serialized()
                wireSeqs.append(wire.sequenceNumber)
                net.send(p, from: a, to: b, now: clock.now())
                for x in fec {
                    wireSeqs.append(UInt16(x[2]) << 8 | UInt16(x[3]))
                    net.send(x, from: a, to: b, now: clock.now())
                }
            }
            clock.advance(by: .milliseconds(33))
            while let d = net.poll(now: clock.now()) {
                for (out, rebuilt) in receiver.receive(d.bytes) {
                    let s = UInt16(out[2]) << 8 | UInt16(out[3])
                    delivered[s] = out
                    if rebuilt { recoveredSeqs.insert(s) }
                }
            }
        }
        clock.advance(by: .seconds(1))
        while let d = net.poll(now: clock.now()) { for (out, _) in receiver.receive(d.bytes) { delivered[UInt16(out[2]) << 8 | UInt16(out[3])] = out } }
        // The wire numbering has no holes: FEC packets take the numbers between frames.
        XCTAssertEqual(wireSeqs, (0..<wireSeqs.count).map { 65_400 &+ UInt16($0) })
        XCTAssertGreaterThan(sender.fecPackets, 150)
        let lostMedia = sentMedia.keys.filter { delivered[$0] == nil || recoveredSeqs.contains($0) }
        XCTAssertGreaterThan(lostMedia.count, 30, "the seed drops media")
        XCTAssertGreaterThan(recoveredSeqs.count, lostMedia.count / 2, "most losses rebuilt without a retransmission")
        XCTAssertEqual(receiver.recovered, recoveredSeqs.count)
        for s in recoveredSeqs { XCTAssertEqual(delivered[s], sentMedia[s], "rebuilt bit for bit") }
        for (s, p) in delivered { XCTAssertEqual(p, sentMedia[s], "only media comes out, as sent") }
    }
}

/// Two `PeerConnection`s negotiate ULPFEC inside RED; with NACK off, what the receiver gets back after 15 % loss is
/// what FEC rebuilt: protection starts once the sender's transport-wide feedback shows the loss.
final class PeerConnectionFECTests: XCTestCase {
    func testFECRebuildsLossesBetweenPeerConnections() throws {
        try exchange(nack: false, loss: 0.15)
    }

    func testFECWithNACKAndRTX() throws {
        try exchange(nack: true, loss: 0.25)
    }

    func exchange(nack: Bool, loss: Double) throws {
        let env = EmulatedPeerConnections(seed: 15, conditions: LinkConditions(delay: .milliseconds(20), jitter: .milliseconds(2), loss: loss))
        var ca = peerConfig(audioSSRC: nil, videoSSRC: 0xA2, seed: 15), cb = peerConfig(audioSSRC: nil, videoSSRC: nil, seed: 16)
        ca.nack = nack
        cb.nack = nack
        if nack { ca.videoTrack?.rtxSSRC = 0xA3 }
        let (a, b) = try env.connectedPair(ca, cb)
        XCTAssertEqual(a.negotiated?.media.first { $0.kind == "video" }?.ulpfecPayloadType, 101)
        let twcc = try RTPHeaderExtensions([RTPHeaderExtensionElement(id: SDPNegotiation.transportCCExtensionId, value: [0, 0][...])])
        var sent: Set<[UInt8]> = []
        var seq: UInt16 = 100
        for f in 0..<240 {
            for k in 0..<3 {
                let payload = [UInt8(f & 0xFF), UInt8(f >> 8), UInt8(k)] + Array(repeating: UInt8(truncatingIfNeeded: f * 3 + k), count: 200)
                var p = RTPPacket(marker: k == 2, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(f) * 3000, ssrc: 0xA2,
                                  extensions: twcc, payload: payload[...]).serialized()
                seq &+= 1
                sent.insert(payload)
                XCTAssertTrue(a.sendRTP(&p, now: env.clock.now()))
            }
            env.run(for: .milliseconds(33))
        }
        env.run(for: .seconds(1))
        let got = env.takeRTP(1).compactMap { try? RTPPacket(parsing: $0) }
        XCTAssertTrue(got.allSatisfy { $0.payloadType == 96 }, "only media comes out, RED unwrapped, FEC consumed")
        XCTAssertTrue(got.allSatisfy { sent.contains(Array($0.payload)) }, "every payload as sent")
        XCTAssertGreaterThan(a.stats.fecPacketsSent, 50, "protection on after the loss showed")
        XCTAssertGreaterThan(b.stats.fecPacketsRecovered, 20)
        if !nack {
            XCTAssertEqual(a.stats.retransmissionsSent, 0, "no NACK here")
            // Without FEC about 15 % would be missing; with it, clearly fewer.
            XCTAssertGreaterThan(Set(got.map { Array($0.payload) }).count, Int(Double(sent.count) * 0.9))
        } else {
            XCTAssertGreaterThan(a.stats.retransmissionsSent, 0)
            XCTAssertGreaterThanOrEqual(Set(got.map { Array($0.payload) }).count, sent.count - 3, "NACK and FEC together: everything but the first few")
        }
    }
}
