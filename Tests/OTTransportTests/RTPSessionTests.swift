import COTAllocCounter
import OTBase
import OTWire
@testable import OTRTP
@testable import OTTransport
import XCTest

/// Minimal RTP bytes for tests (the RTP header type itself belongs to the codec layer).
func testRTP(ssrc: UInt32, seq: UInt16, ts: UInt32, payload: [UInt8]) -> [UInt8] {
    var w = ByteWriter()
    w.u8(0x80); w.u8(96); w.u16(seq); w.u32(ts); w.u32(ssrc); w.append(payload)
    return w.bytes
}
func testRTPFields(_ b: [UInt8]) -> (ssrc: UInt32, seq: UInt16, ts: UInt32)? {
    var r = ByteReader(b)
    guard (try? r.u16()) != nil, let seq = try? r.u16(), let ts = try? r.u32(), let ssrc = try? r.u32() else { return nil }
    return (ssrc, seq, ts)
}

/// Where `exchange`'s sender and receiver are.
let senderAddress = TransportAddress("10.0.0.1:5000")!, receiverAddress = TransportAddress("10.0.0.2:6000")!

/// One step of a sending and a receiving session over `net` at `now`: both sessions' timers, their RTCP each way and
/// the sender's retransmissions sent; what arrives delivered (RTCP to its session, RTP to the receiver, then `rtp`).
func exchange(_ sender: RTPSession, _ receiver: RTPSession, over net: inout NetworkEmulator, clockRate: UInt32, now: Instant,
              rtp: ([UInt8]) -> Void = { _ in }) throws {
    sender.handleTimeout(now: now); receiver.handleTimeout(now: now)
    while let r = sender.pollRTCP() { net.send(r, from: senderAddress, to: receiverAddress, now: now) }
    while let r = sender.pollRetransmission() { net.send(r, from: senderAddress, to: receiverAddress, now: now) }
    while let r = receiver.pollRTCP() { net.send(r, from: receiverAddress, to: senderAddress, now: now) }
    while let d = net.poll(now: now) {
        if DemuxKind.classify(d.bytes) == .rtcp {
            XCTAssertEqual((d.to == senderAddress ? sender : receiver).handleRTCP(d.bytes, now: now).skipped, 0, "what a session sends parses")
        } else if let f = testRTPFields(d.bytes) {
            receiver.received(ssrc: f.ssrc, sequence: f.seq, rtpTimestamp: f.ts, clockRate: clockRate, now: now)
            rtp(d.bytes)
        }
    }
}

final class RTPReceiveBufferTests: XCTestCase {
    func testReordersAndReportsMissing() {
        var buf = RTPReceiveBuffer<String>(capacity: 64)
        XCTAssertEqual(buf.insert(sequence: 10, packet: "a"), .inserted)
        XCTAssertEqual(buf.insert(sequence: 13, packet: "d"), .inserted)
        XCTAssertEqual(buf.insert(sequence: 12, packet: "c"), .inserted)
        XCTAssertEqual(buf.insert(sequence: 12, packet: "c"), .duplicate)
        XCTAssertEqual(buf.missing, [11])
        XCTAssertEqual(buf.pop()?.packet, "a")
        XCTAssertNil(buf.pop())
        XCTAssertEqual(buf.insert(sequence: 11, packet: "b"), .inserted)
        XCTAssertEqual([buf.pop(), buf.pop(), buf.pop()].map { $0?.packet }, ["b", "c", "d"])
        XCTAssertEqual(buf.insert(sequence: 9, packet: "old"), .tooOld)
        XCTAssertEqual(buf.count, 0)
    }

    func testWrapsAroundAndSkips() {
        var buf = RTPReceiveBuffer<UInt16>(capacity: 32)
        for s: UInt16 in [65533, 65534, 1, 2] { buf.insert(sequence: s, packet: s) }
        XCTAssertEqual(buf.missing, [65535, 0])
        XCTAssertEqual(buf.pop()?.sequence, 65533)
        XCTAssertEqual(buf.pop()?.sequence, 65534)
        XCTAssertNil(buf.pop())
        XCTAssertEqual(buf.skipToNextAvailable(), [65535, 0])
        XCTAssertEqual(buf.pop()?.sequence, 1)
        XCTAssertEqual(buf.pop()?.sequence, 2)
    }

    func testFarAheadPacketMovesWindow() {
        var buf = RTPReceiveBuffer<Int>(capacity: 16)
        buf.insert(sequence: 0, packet: 0)
        _ = buf.pop()
        buf.insert(sequence: 100, packet: 100)
        XCTAssertEqual(buf.missing.count, 15)
        XCTAssertEqual(buf.skipToNextAvailable().count, 15)
        XCTAssertEqual(buf.pop()?.packet, 100)
    }
}

final class NACKTests: XCTestCase {
    func testStatisticsFractionLost() {
        var s = RTPReceiveStatistics(ssrc: 9, clockRate: 90000)
        let t = Instant(micros: 0)
        for seq: UInt16 in 0..<100 where seq % 4 != 0 || seq == 0 { s.record(sequence: seq, rtpTimestamp: UInt32(seq) * 3000, now: t + .milliseconds(Int64(seq) * 33)) }
        let b = s.reportBlock(now: t + .seconds(4))
        XCTAssertEqual(b.cumulativeLost, 24)
        XCTAssertEqual(b.extendedHighestSequence, 99)
        XCTAssertEqual(b.fractionLost, UInt8(24 * 256 / 100))
        XCTAssertEqual(s.reportBlock(now: t + .seconds(5)).fractionLost, 0)
    }
}

final class RTPSessionTests: XCTestCase {
    /// A sender and a receiver session over the emulator; the receiver NACKs and the sender resends from its cache.
    func testNACKRecoversLostVideoPacketsOverLossyNetwork() throws {
        let clock = VirtualClock()
        var net = NetworkEmulator(seed: 77, conditions: LinkConditions(delay: .milliseconds(30), jitter: .milliseconds(5), loss: 0.10, reorder: 0.05))
        let sender = RTPSession(config: .init(localSSRCs: [0x1111], cname: "a"), now: clock.now())
        let receiver = RTPSession(config: .init(localSSRCs: [0x2222], cname: "b"), now: clock.now())
        var buffer = RTPReceiveBuffer<[UInt8]>()
        var delivered: [UInt16] = []
        let total: UInt16 = 300
        var nextSend: UInt16 = 0
        var keyframeRequests = 0
        var rtts: [Duration] = []
        let end = clock.now() + .seconds(15)
        while clock.now() < end {
            let now = clock.now()
            // 30 packets per second... well, one every 10 ms.
            if nextSend < total && now.micros % 10_000 == 0 {
                let pkt = testRTP(ssrc: 0x1111, seq: nextSend &+ 65000, ts: UInt32(nextSend) * 900, payload: [UInt8(truncatingIfNeeded: nextSend)])
                sender.sent(ssrc: 0x1111, sequence: nextSend &+ 65000, rtpTimestamp: UInt32(nextSend) * 900, clockRate: 90000, payloadBytes: 1, packet: pkt, now: now)
                net.send(pkt, from: senderAddress, to: receiverAddress, now: now)
                nextSend += 1
            }
            try exchange(sender, receiver, over: &net, clockRate: 90000, now: now) { bytes in
                guard let f = testRTPFields(bytes) else { return }
                buffer.insert(sequence: f.seq, packet: bytes)
                while let p = buffer.pop() { delivered.append(p.sequence) }
            }
            while let e = sender.pollEvent() {
                if case .roundTripTime(let r) = e { rtts.append(r) }
                if case .keyframeRequested = e { keyframeRequests += 1 }
            }
            clock.advance(by: .milliseconds(1))
        }
        XCTAssertGreaterThan(net.dropped, 20)
        XCTAssertEqual(delivered, (0..<total).map { $0 &+ 65000 }, "every packet delivered in order, across the wrap")
        let counters = try XCTUnwrap(receiver.nackCounters(ssrc: 0x1111))
        XCTAssertGreaterThan(counters.recovered, 10)
        XCTAssertEqual(counters.outstanding, 0)
        // RTT from SR/RR: two one-way delays of 30 ms (+ up to 5 ms jitter each way, 1 ms steps).
        let rtt = try XCTUnwrap(rtts.last)
        XCTAssertGreaterThanOrEqual(rtt, .milliseconds(59))
        XCTAssertLessThanOrEqual(rtt, .milliseconds(72))
        XCTAssertEqual(keyframeRequests, 0)
        // The receiver's report of the stream shows the losses before NACK recovery.
        XCTAssertGreaterThan(try XCTUnwrap(receiver.statistics(ssrc: 0x1111)).received, Int64(total))  // retransmissions count too
    }

    /// A receive-only session (a router's uplink, a subscriber) gets no report block about a stream of its own; with
    /// `receiverReferenceTime` its RRTRs, answered by the sender's DLRRs, measure two one-way delays of 40 ms, although
    /// the sender answers only with its next report (0.5–1.5 s later: the DLRR's delay, subtracted). Without the
    /// setting it never measures.
    func testAReceiveOnlySessionMeasuresItsRoundTripFromXR() throws {
        func run(receiverReferenceTime: Bool) throws -> (receiver: [Duration], sender: [Duration], final: Duration, measured: Bool) {
            let clock = VirtualClock()
            var net = NetworkEmulator(seed: 5, conditions: LinkConditions(delay: .milliseconds(40)))
            let sender = RTPSession(config: .init(localSSRCs: [0x1111], cname: "a"), now: clock.now())
            var rc = RTPSession.Config(localSSRCs: [0x2222], cname: "b")
            rc.receiverReferenceTime = receiverReferenceTime
            let receiver = RTPSession(config: rc, now: clock.now())
            // What a DTLS handshake would have guessed, to be replaced.
            receiver.setInitialRoundTripTime(.milliseconds(31))
            var seq: UInt16 = 0
            var receiverRTTs: [Duration] = [], senderRTTs: [Duration] = []
            let end = clock.now() + .seconds(8)
            while clock.now() < end {
                let now = clock.now()
                if now.micros % 20_000 == 0 {
                    let pkt = testRTP(ssrc: 0x1111, seq: seq, ts: UInt32(seq) * 960, payload: [1])
                    sender.sent(ssrc: 0x1111, sequence: seq, rtpTimestamp: UInt32(seq) * 960, clockRate: 48000, payloadBytes: 1, packet: pkt, now: now)
                    net.send(pkt, from: senderAddress, to: receiverAddress, now: now)
                    seq &+= 1
                }
                try exchange(sender, receiver, over: &net, clockRate: 48000, now: now)
                while let e = receiver.pollEvent() { if case .roundTripTime(let r) = e { receiverRTTs.append(r) } }
                while let e = sender.pollEvent() { if case .roundTripTime(let r) = e { senderRTTs.append(r) } }
                clock.advance(by: .milliseconds(1))
            }
            return (receiverRTTs, senderRTTs, receiver.rtt, receiver.rttMeasured)
        }
        let xr = try run(receiverReferenceTime: true)
        XCTAssertGreaterThanOrEqual(xr.receiver.count, 4, "one sample per answered report")
        // 80 ms, and what the DLRR's 1/65536 s units truncate (under 16 µs).
        for r in xr.receiver { XCTAssertTrue(r >= .milliseconds(80) && r < .microseconds(80_016), "\(xr.receiver)") }
        XCTAssertTrue(xr.measured)
        XCTAssertEqual(xr.final, xr.receiver.last)
        XCTAssertGreaterThanOrEqual(xr.sender.count, 4, "the sender still measures from the receiver's report blocks")
        let plain = try run(receiverReferenceTime: false)
        XCTAssertEqual(plain.receiver, [])
        XCTAssertFalse(plain.measured)
        XCTAssertEqual(plain.final, .milliseconds(31))
    }

    /// A compound from a peer that sends and receives: its SR (with a report block), a malformed XR and its NACK. The
    /// XR is skipped; the SR is taken (its time is echoed in our next report, its block raises an event) and the NACK is
    /// answered with the packet it asks for (was: the whole compound thrown away).
    func testAMalformedPacketInACompoundLosesOnlyItself() throws {
        let t0 = Instant(micros: 1_000_000)
        let s = RTPSession(config: .init(localSSRCs: [0x1111], cname: "s"), now: t0)
        let r = RTPSession(config: .init(localSSRCs: [0x2222], cname: "r"), now: t0)
        for seq: UInt16 in 1...5 {
            let packet = testRTP(ssrc: 0x1111, seq: seq, ts: 0, payload: [UInt8(seq)])
            s.sent(ssrc: 0x1111, sequence: seq, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 1, packet: packet, now: t0)
            if seq != 3 { r.received(ssrc: 0x1111, sequence: seq, rtpTimestamp: 0, clockRate: 90000, now: t0) }
        }
        r.sent(ssrc: 0x2222, sequence: 1, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 1, packet: [0], now: t0)
        s.received(ssrc: 0x2222, sequence: 1, rtpTimestamp: 0, clockRate: 90000, now: t0)
        let nack = try XCTUnwrap(r.pollRTCP(), "the gap is NACKed at once")
        XCTAssertEqual(try RTCP.parse(nack), [.nack(senderSSRC: 0x2222, mediaSSRC: 0x1111, lost: [3])])
        let now = t0 + .milliseconds(1500)
        r.handleTimeout(now: now)
        var report: [UInt8]?
        while let p = r.pollRTCP() { if case .senderReport? = try RTCP.parse(p).first { report = p } }
        let srCompound = try XCTUnwrap(report, "r's regular report (1 s ± 50 %) is due")
        guard case .senderReport(let sr)? = try RTCP.parse(srCompound).first else { return XCTFail("an SR first") }
        XCTAssertEqual(sr.reports.map(\.ssrc), [0x1111])
        // An XR whose block claims 20 bytes of the 4 its packet holds.
        let badXR: [UInt8] = [0x80, 207, 0, 3, 0, 0, 0x22, 0x22, 7, 0, 0, 5, 0, 0, 0, 0]

        let compound = s.handleRTCP(srCompound + badXR + nack, now: now)
        XCTAssertEqual(compound.skipped, 1)
        XCTAssertEqual(s.pollRetransmission().flatMap { testRTPFields($0)?.seq }, 3, "the NACK is answered")
        XCTAssertEqual(s.pollEvent(), .receiverReport(sr.reports[0]), "the SR's report block is taken")
        s.handleTimeout(now: now + .seconds(2))
        let ours = try RTCP.parse(try XCTUnwrap(s.pollRTCP()))
        guard case .receiverReport(_, let blocks)? = ours.first else { return XCTFail("\(ours)") }
        XCTAssertEqual(blocks.map(\.lastSR), [UInt32(truncatingIfNeeded: sr.ntpTime >> 16)], "the SR's time is echoed")
    }

    func testPLIAndFIRRaiseKeyframeRequests() throws {
        let s = RTPSession(config: .init(localSSRCs: [5], cname: "x"), now: .zero)
        let r = RTPSession(config: .init(localSSRCs: [6], cname: "y"), now: .zero)
        s.sent(ssrc: 5, sequence: 1, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 10, packet: [1], now: .zero)
        r.requestKeyframe(ssrc: 5, now: .zero)
        // A second request within the pacing interval is held until it ends (as a FIR, the stronger of the two).
        r.requestKeyframe(ssrc: 5, useFIR: true, now: .zero + .milliseconds(10))
        while let p = r.pollRTCP() { s.handleRTCP(p, now: .zero) }
        XCTAssertEqual(s.pollEvent(), .keyframeRequested(ssrc: 5))
        XCTAssertNil(s.pollEvent())
        let due = try XCTUnwrap(r.pollTimeout())
        XCTAssertLessThanOrEqual(due, .zero + .milliseconds(200))
        r.handleTimeout(now: due)
        let held = try XCTUnwrap(r.pollRTCP())
        guard case .fir(_, let entries) = try XCTUnwrap(RTCP.parse(held).first) else { return XCTFail("a FIR") }
        XCTAssertEqual(entries.map(\.ssrc), [5])
        s.handleRTCP(held, now: due)
        XCTAssertEqual(s.pollEvent(), .keyframeRequested(ssrc: 5))
        // A header whose length runs past the datagram: nothing read, counted as skipped, nothing raised.
        XCTAssertEqual(s.handleRTCP([0x81, 200, 0, 50], now: .zero).skipped, 1)
        XCTAssertNil(s.pollEvent())
    }
}

final class TransportCCRecorderTests: XCTestCase {
    /// The receive-side counters (W3C-style transport loss) and when feedback is due: from the first packet a
    /// feedback covers, cleared when it is built.
    func testCountsArrivalsAndLossAndSchedulesFeedback() {
        var r = TransportCCRecorder()
        r.feedbackInterval = .milliseconds(50)
        let t0 = Instant(micros: 1_000_000)
        XCTAssertNil(r.feedbackDue)
        for (i, seq) in [UInt16(65530), 65531, 65534, 0, 1, 1].enumerated() { r.record(sequence: seq, arrival: t0 + .milliseconds(Int64(i))) }
        XCTAssertEqual(r.packetsRecorded, 6, "duplicates counted")
        XCTAssertEqual(r.packetsLost, 2, "8 numbers from 65530 to 1 (wrapped), 6 packets recorded (a duplicate among them)")
        XCTAssertEqual(r.feedbackDue, t0 + .milliseconds(50))
        XCTAssertNotNil(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        XCTAssertNil(r.feedbackDue)
        r.record(sequence: 2, arrival: t0 + .milliseconds(70))
        XCTAssertEqual(r.feedbackDue, t0 + .milliseconds(120))
    }

    func testFeedbackReportsArrivalsAndLosses() throws {
        var r = TransportCCRecorder()
        let t0 = Instant(micros: 10_000_000)  // a multiple of 64 ms plus 16 ms
        r.record(sequence: 65534, arrival: t0)
        r.record(sequence: 65535, arrival: t0 + .microseconds(1000))
        r.record(sequence: 1, arrival: t0 + .microseconds(500))   // reordered, 0 lost
        r.record(sequence: 2, arrival: t0 + .milliseconds(100))
        let fb = try XCTUnwrap(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        XCTAssertEqual(fb.baseSequence, 65534)
        XCTAssertEqual(fb.referenceTime, Int32(10_000_000 / 64_000))
        XCTAssertEqual(fb.deltas.count, 5)
        XCTAssertNil(fb.deltas[2])  // sequence 0 never arrived
        // Deltas add back up to each arrival time.
        var clock = Int64(fb.referenceTime) * 64_000
        var arrivals: [Int64] = []
        for d in fb.deltas { if let d { clock += Int64(d) * 250; arrivals.append(clock) } }
        XCTAssertEqual(arrivals, [10_000_000, 10_001_000, 10_000_500, 10_100_000])
        XCTAssertEqual(fb.deltas[3], -2)  // negative delta for the reordered packet
        // It survives the wire, and the next feedback starts after it.
        XCTAssertEqual(try RTCP.parse(RTCP.serialize([.transportCC(fb)])), [.transportCC(fb)])
        XCTAssertNil(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        r.record(sequence: 1, arrival: t0)  // late duplicate of a reported one: ignored
        r.record(sequence: 3, arrival: t0 + .milliseconds(120))
        let next = try XCTUnwrap(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        XCTAssertEqual(next.baseSequence, 3)
        XCTAssertEqual(next.feedbackCount, 1)
    }

    func testAPacketReportedMissingThatArrivesLateIsReportedAgain() throws {
        var r = TransportCCRecorder()
        let t0 = Instant(micros: 6_400_000)
        r.record(sequence: 10, arrival: t0)
        r.record(sequence: 12, arrival: t0 + .milliseconds(2))
        let first = try XCTUnwrap(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        XCTAssertEqual(first.deltas.map { $0 != nil }, [true, false, true], "11 is missing so far")
        r.record(sequence: 11, arrival: t0 + .milliseconds(30))  // reordered by more than the feedback interval
        r.record(sequence: 13, arrival: t0 + .milliseconds(31))
        let second = try XCTUnwrap(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        XCTAssertEqual(second.baseSequence, 11, "reporting reopens at the late packet")
        XCTAssertEqual(second.deltas.map { $0 != nil }, [true, true, true])
        XCTAssertEqual(try RTCP.parse(RTCP.serialize([.transportCC(second)])), [.transportCC(second)])

        // The sender's side counts 11 as lost after the first feedback and takes it back after the second.
        var adapter = TransportFeedbackAdapter()
        for s in UInt16(10)...13 { adapter.sent(sequence: s, size: 1000, at: t0 - .milliseconds(20) + .milliseconds(Int64(s))) }
        adapter.process(first)
        XCTAssertEqual(adapter.lost, 1)
        XCTAssertEqual(adapter.acked.count, 2)
        adapter.process(second)
        XCTAssertEqual(adapter.lost, -1, "the packet thought lost arrived")
        XCTAssertEqual(adapter.acked.count, 2, "11 and 13; 12 was acknowledged already")
        XCTAssertEqual(adapter.acked.map(\.sendMicros), [t0.micros - 9_000, t0.micros - 7_000])
        XCTAssertEqual(adapter.acked.map(\.arrivalMicros), [t0.micros + 30_000, t0.micros + 31_000])
    }

    func testOldAndDuplicateArrivalsDoNotReopenReporting() throws {
        var r = TransportCCRecorder()
        let t0 = Instant(micros: 1_000_000)
        for s in UInt16(0)..<2000 { r.record(sequence: s, arrival: t0 + .microseconds(Int64(s) * 100)) }
        _ = try XCTUnwrap(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        _ = try XCTUnwrap(r.feedback(senderSSRC: 1, mediaSSRC: 2))  // 1000 per feedback
        XCTAssertNil(r.feedback(senderSSRC: 1, mediaSSRC: 2))
        r.record(sequence: 5, arrival: t0 + .seconds(1))      // far behind: ignored
        r.record(sequence: 1999, arrival: t0 + .seconds(1))   // duplicate: ignored
        XCTAssertNil(r.feedback(senderSSRC: 1, mediaSSRC: 2))
    }
}

final class FIFOTests: XCTestCase {
    func testOrderAcrossCompaction() {
        var q = FIFO<Int>()
        var out: [Int] = []
        for i in 0..<500 {
            q.push(i)
            if i % 3 == 0, let x = q.pop() { out.append(x) }
        }
        q.filter { $0 % 2 == 0 || $0 < 200 }
        while let x = q.pop() { out.append(x) }
        XCTAssertTrue(q.isEmpty)
        XCTAssertEqual(out, out.sorted())
        XCTAssertEqual(out.count, 167 + (200 - 167) + (300 / 2))
    }
}

/// Per-packet cost of the RTP session bookkeeping (prints packets per second; asserts only the outcome).
final class RTPSessionThroughputTests: XCTestCase {
    func testSendAndReceiveBookkeepingThroughput() {
        let s = RTPSession(config: .init(localSSRCs: [1], cname: "s"), now: .zero)
        let r = RTPSession(config: .init(localSSRCs: [2], cname: "r"), now: .zero)
        let packet = [UInt8](repeating: 0, count: 1200)
        let n = 100_000
        let t0 = MonotonicClock.now()
        for i in 0..<n {
            let now = Instant(micros: Int64(i) * 1000)
            s.sent(ssrc: 1, sequence: UInt16(truncatingIfNeeded: i), rtpTimestamp: UInt32(i) * 90, clockRate: 90000, payloadBytes: 1188, packet: packet, now: now)
            if i % 50 != 7 { r.received(ssrc: 1, sequence: UInt16(truncatingIfNeeded: i), rtpTimestamp: UInt32(i) * 90, clockRate: 90000, now: now) }
        }
        let elapsed = MonotonicClock.now() - t0
        print(String(format: "RTP_SESSION_BENCH %d packets sent+received in %.1f ms (%.0f packets/s, this build)", n, Double(elapsed.microseconds) / 1000, Double(n) / elapsed.seconds))
        XCTAssertEqual(r.statistics(ssrc: 1)?.received, Int64(n - n / 50))
    }
}

final class RTPSessionSendHistoryTests: XCTestCase {
    /// The send history (`NACKResponder`, one per sent SSRC of an `RTPSession`) copies each packet into a reused slot,
    /// so the sender can protect its own buffer in place (as `PeerConnection` does with SRTP) without a copy-on-write:
    /// steady storing allocates nothing. A NACK is still answered with the packet as it was stored.
    /// (Called directly: in debug builds the dictionary access around it in `RTPSession` allocates by itself.)
    func testStoringAllocatesNothingAndNACKsGetThePacketAsSent() throws {
        var history = NACKResponder()
        var packet = testRTP(ssrc: 7, seq: 0, ts: 0, payload: Array(repeating: 0x11, count: 1100))
        func send(_ seq: UInt16) {
            packet[2] = UInt8(seq >> 8); packet[3] = UInt8(truncatingIfNeeded: seq)
            packet[12] = 0x11
            history.store(sequence: seq, packet: packet)
            packet[12] = 0xEE  // what in-place protection does to the sender's buffer once the history has the packet
        }
        for seq in 0..<2048 { send(UInt16(seq)) }  // every slot has held a packet of this size
        let before = ot_alloc_count()
        for i in 0..<50_000 { send(UInt16(truncatingIfNeeded: 2048 + i)) }
        let allocations = ot_alloc_count() - before
        XCTAssertLessThan(allocations, 100, "\(allocations) allocations for 50,000 packets stored")
        let last = UInt16(truncatingIfNeeded: 2048 + 49_999)
        let resent = history.packets(for: [last], now: Instant(micros: 1_000_000), rtt: .milliseconds(100))
        XCTAssertEqual(resent.count, 1)
        XCTAssertEqual(resent.first.flatMap { testRTPFields($0)?.seq }, last)
        XCTAssertEqual(resent.first?[12], 0x11, "the history kept the packet as it was when stored")
    }
}

final class RTPSessionNACKAnswerTests: XCTestCase {
    /// A sender answers a NACK repeated within the round trip only once that round trip is measured (RTCP): the 100 ms
    /// default, or a handshake's round trip inflated by its own losses, held back every retry of a receiver on a fast
    /// path (at 20 % loss through the router, the publisher answered one of three NACKs for a keyframe's first packet:
    /// docs/benchmarks.md "Loss", stop 22).
    func testARepeatedNACKIsAnsweredUntilTheRoundTripIsMeasured() throws {
        let t0 = Instant(micros: 1_000_000)
        for initial in [nil, Duration.milliseconds(54)] {
            let s = RTPSession(config: .init(localSSRCs: [0x1111], cname: "a"), now: t0)
            if let initial { s.setInitialRoundTripTime(initial) }
            let packet = testRTP(ssrc: 0x1111, seq: 42, ts: 0, payload: [1, 2, 3])
            s.sent(ssrc: 0x1111, sequence: 42, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 3, packet: packet, now: t0)
            let nack = RTCP.serialize([.nack(senderSSRC: 0x2222, mediaSSRC: 0x1111, lost: [42])])
            s.handleRTCP(nack, now: t0 + .milliseconds(1))
            XCTAssertEqual(s.pollRetransmission().flatMap { testRTPFields($0)?.seq }, 42)
            s.handleRTCP(nack, now: t0 + .milliseconds(21))
            XCTAssertEqual(s.pollRetransmission().flatMap { testRTPFields($0)?.seq }, 42,
                           "the receiver's retry 20 ms later is answered (initial RTT \(String(describing: initial)))")
            XCTAssertEqual(s.retransmissionCounters(ssrc: 0x1111)?.packets, 2)
        }
    }
}

final class RTPSessionExternalHistoryTests: XCTestCase {
    /// Without a send history of its own (a media router's subscriber connection), a NACK comes up as the sequence
    /// numbers to resend, with the history's rules applied (numbers never sent are misses; the once-per-RTT rule:
    /// `NACKResponderTests`), and what the caller finds is resent as the session's own answers are: on
    /// the RTX stream when negotiated; a packet the caller no longer holds counts as a miss.
    func testNACKsAskForWhatToResendAndTheAnswersGoOutAsRTX() throws {
        let t0 = Instant(micros: 1_000_000)
        var config = RTPSession.Config(localSSRCs: [0x1111, 0x1112], cname: "a")
        config.sendHistory = false
        let s = RTPSession(config: config, now: t0)
        s.enableRTX(ssrc: 0x1111, rtx: RTXSender(rtxSSRC: 0x1112, payloadTypes: [96: 97], initialSequence: 9))
        for seq: UInt16 in 40...44 {
            s.sent(ssrc: 0x1111, sequence: seq, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 3,
                   packet: testRTP(ssrc: 0x1111, seq: seq, ts: 0, payload: [1, 2, 3]), now: t0)
        }
        s.handleRTCP(RTCP.serialize([.nack(senderSSRC: 0x2222, mediaSSRC: 0x1111, lost: [41, 43, 500])]), now: t0 + .milliseconds(1))
        XCTAssertEqual(s.pollEvent(), .retransmissionsRequested(ssrc: 0x1111, sequences: [41, 43]))
        XCTAssertNil(s.pollRetransmission(), "nothing kept, nothing resent by the session itself")
        XCTAssertEqual(s.repair.retransmissionMisses, 1, "500 was never sent")

        s.resend(ssrc: 0x1111, testRTP(ssrc: 0x1111, seq: 41, ts: 0, payload: [1, 2, 3]))
        s.resend(ssrc: 0x1111, nil)
        let rtx = try RTPPacket(parsing: try XCTUnwrap(s.pollRetransmission()))
        XCTAssertEqual([rtx.ssrc, UInt32(rtx.payloadType), UInt32(rtx.sequenceNumber)], [0x1112, 97, 9])
        XCTAssertEqual(Array(rtx.payload), [0, 41, 1, 2, 3], "the original sequence number, then the payload")
        XCTAssertNil(s.pollRetransmission())
        XCTAssertEqual(s.repair.retransmissionsQueued, 1)
        XCTAssertEqual(s.repair.retransmissionMisses, 2, "43 was no longer held by the caller")
        XCTAssertEqual(s.retransmissionCounters(ssrc: 0x1111)?.packets, 1)

    }
}

final class RTXTests: XCTestCase {
    func testWrapAndUnwrapRoundTrip() throws {
        var tx = RTXSender(rtxSSRC: 0xBEEF, payloadTypes: [96: 97], initialSequence: 65535)
        let original = RTPPacket(marker: true, payloadType: 96, sequenceNumber: 1234, timestamp: 90000, ssrc: 0xCAFE, payload: [1, 2, 3][...])
        let rtx = try XCTUnwrap(tx.wrap(original))
        XCTAssertEqual(rtx.ssrc, 0xBEEF)
        XCTAssertEqual(rtx.payloadType, 97)
        XCTAssertEqual(rtx.sequenceNumber, 65535)
        XCTAssertEqual(Array(rtx.payload), [0x04, 0xD2, 1, 2, 3])
        XCTAssertEqual(tx.wrap(original)?.sequenceNumber, 0, "RTX has its own sequence, wrapping")
        XCTAssertNil(tx.wrap(RTPPacket(payloadType: 111, sequenceNumber: 1, timestamp: 0, ssrc: 1)), "no RTX for Opus here")

        let rx = RTXReceiver(ssrcs: [0xBEEF: 0xCAFE], payloadTypes: [97: 96])
        let back = try XCTUnwrap(rx.unwrap(try RTPPacket(parsing: rtx.serialized())))
        XCTAssertEqual(back.ssrc, 0xCAFE)
        XCTAssertEqual(back.sequenceNumber, 1234)
        XCTAssertEqual(back.payloadType, 96)
        XCTAssertTrue(back.marker)
        XCTAssertEqual(Array(back.payload), [1, 2, 3])
        XCTAssertNil(try rx.unwrap(original), "media packets pass through")
        XCTAssertThrowsError(try rx.unwrap(RTPPacket(payloadType: 97, sequenceNumber: 1, timestamp: 0, ssrc: 0xBEEF, payload: [7][...])))
    }
}

/// A peer that sends from ever new SSRCs cannot make the session's per-packet chain lookup long.
final class RTPSessionSSRCLimitTests: XCTestCase {
    func testRemoteSSRCsBeyondTheLimitAreNotTracked() {
        let s = RTPSession(config: .init(localSSRCs: [1], cname: "s"), now: .zero)
        let now = Instant(micros: 1_000_000)
        for ssrc in UInt32(100)..<UInt32(100 + 1000) {
            s.received(ssrc: ssrc, sequence: 7, rtpTimestamp: 0, clockRate: 90000, now: now)
        }
        XCTAssertNotNil(s.statistics(ssrc: 100 + UInt32(RTPSession.maxRemoteSSRCs) - 1))
        XCTAssertNil(s.statistics(ssrc: 100 + UInt32(RTPSession.maxRemoteSSRCs)), "the first SSRC past the limit is not tracked")
        s.received(ssrc: 100, sequence: 8, rtpTimestamp: 0, clockRate: 90000, now: now)
        XCTAssertEqual(s.statistics(ssrc: 100)?.packetsReceived, 2, "tracked SSRCs go on")
    }
}
