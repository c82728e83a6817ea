import OTBase
@testable import OTRTP
import OTWire
import XCTest

final class XRRoundTripTests: XCTestCase {
    let t0 = Instant(micros: 10_000_000)
    /// An NTP time whose middle 32 bits are 0x0001_8000 (1.5 s).
    let ntp: UInt64 = 0x0000_0001_8000_0000

    private func rrtr(_ packet: RTCPPacket?) -> UInt64? {
        guard case .extendedReport(_, let blocks)? = packet else { return nil }
        for case .receiverReferenceTime(let t) in blocks { return t }
        return nil
    }

    private func dlrr(_ packet: RTCPPacket?) -> [RTCPDLRRSubBlock] {
        guard case .extendedReport(_, let blocks)? = packet else { return [] }
        return blocks.flatMap { b -> [RTCPDLRRSubBlock] in if case .dlrr(let s) = b { return s } else { return [] } }
    }

    /// RRTR out; the peer's DLRR (the RRTR's middle bits, and how long it held it) comes back: RTT = now − LRR − DLRR.
    func testAnRRTRAnsweredByADLRRGivesTheRoundTrip() {
        var x = XRRoundTrip()
        XCTAssertNil(x.report(senderSSRC: 7, referenceTime: false, ntp: ntp, now: t0), "nothing to say")
        let out = x.report(senderSSRC: 7, referenceTime: true, ntp: ntp, now: t0)
        guard case .extendedReport(let ssrc, _)? = out else { return XCTFail("\(String(describing: out))") }
        XCTAssertEqual(ssrc, 7)
        XCTAssertEqual(rrtr(out), ntp)
        // The peer held it 0.5 s (32768/65536); it came back 0.58 s after it left: 80 ms of path.
        let answer: [RTCPXRBlock] = [.dlrr([.init(ssrc: 7, lastRR: 0x0001_8000, delaySinceLastRR: 32768)])]
        XCTAssertEqual(x.received(senderSSRC: 9, blocks: answer, localSSRC: 7, now: t0 + .milliseconds(580)), .milliseconds(80))
    }

    func testDLRRsThatMeasureNothingAreIgnored() {
        var x = XRRoundTrip()
        _ = x.report(senderSSRC: 7, referenceTime: true, ntp: ntp, now: t0)
        let now = t0 + .milliseconds(580)
        func rtt(_ d: RTCPDLRRSubBlock) -> Duration? { x.received(senderSSRC: 9, blocks: [.dlrr([d])], localSSRC: 7, now: now) }
        XCTAssertNil(rtt(.init(ssrc: 8, lastRR: 0x0001_8000, delaySinceLastRR: 32768)), "for another SSRC")
        XCTAssertNil(rtt(.init(ssrc: 7, lastRR: 0x0001_8001, delaySinceLastRR: 32768)), "an RRTR we never sent")
        XCTAssertNil(rtt(.init(ssrc: 7, lastRR: 0, delaySinceLastRR: 0)), "LRR 0: no RRTR received")
        XCTAssertNil(rtt(.init(ssrc: 7, lastRR: 0x0001_8000, delaySinceLastRR: 65536)), "held longer than it was away: negative")
        XCTAssertNil(rtt(.init(ssrc: 7, lastRR: 0x0001_8000, delaySinceLastRR: .max)), "wrapped: negative")
        var late = XRRoundTrip()
        _ = late.report(senderSSRC: 7, referenceTime: true, ntp: ntp, now: t0)
        XCTAssertNil(late.received(senderSSRC: 9, blocks: [.dlrr([.init(ssrc: 7, lastRR: 0x0001_8000, delaySinceLastRR: 0)])],
                                   localSSRC: 7, now: t0 + .seconds(61)), "over 60 s")
        XCTAssertEqual(rtt(.init(ssrc: 7, lastRR: 0x0001_8000, delaySinceLastRR: 32768)), .milliseconds(80), "the real answer still counts")
    }

    /// Every leg answers: the last RRTR of each sender, once, in the next report, with how long it was held.
    func testReceivedRRTRsAreAnsweredOnceInTheNextReport() {
        var x = XRRoundTrip()
        XCTAssertNil(x.received(senderSSRC: 0xA, blocks: [.receiverReferenceTime(ntp: 0x0000_0002_0000_0000)], localSSRC: 7, now: t0))
        _ = x.received(senderSSRC: 0xB, blocks: [.receiverReferenceTime(ntp: 0x0000_0003_0000_0000)], localSSRC: 7, now: t0)
        // A newer RRTR from A replaces its older one.
        _ = x.received(senderSSRC: 0xA, blocks: [.receiverReferenceTime(ntp: 0x0000_0004_4000_0000)], localSSRC: 7, now: t0 + .milliseconds(250))
        let out = x.report(senderSSRC: 7, referenceTime: false, ntp: ntp, now: t0 + .milliseconds(500))
        XCTAssertNil(rrtr(out))
        XCTAssertEqual(dlrr(out), [.init(ssrc: 0xA, lastRR: 0x0004_4000, delaySinceLastRR: 16384),
                                   .init(ssrc: 0xB, lastRR: 0x0003_0000, delaySinceLastRR: 32768)])
        XCTAssertNil(x.report(senderSSRC: 7, referenceTime: false, ntp: ntp, now: t0 + .seconds(1)), "answered once")
    }

    func testRememberedSendersAreBounded() {
        var x = XRRoundTrip()
        for s in 0..<UInt32(XRRoundTrip.maxRemembered + 5) {
            _ = x.received(senderSSRC: s, blocks: [.receiverReferenceTime(ntp: UInt64(s + 1) << 32)], localSSRC: 7, now: t0)
        }
        XCTAssertEqual(dlrr(x.report(senderSSRC: 7, referenceTime: false, ntp: ntp, now: t0)).map(\.ssrc),
                       (0..<UInt32(XRRoundTrip.maxRemembered)).map { $0 })
    }

    /// A session (`receiverReferenceTime` is on by default) that receives and sends nothing puts an RRTR in its reports;
    /// another session's DLRR answer sets its `rtt` as a report block would (`rttMeasured`, `.roundTripTime`); a
    /// malformed XR is skipped and changes nothing.
    func testASessionAsksWithRRTRAndTakesTheDLRRAsItsRoundTrip() throws {
        let receiver = RTPSession(config: .init(localSSRCs: [0x2222], cname: "r"), now: t0)
        let sender = RTPSession(config: .init(localSSRCs: [0x1111], cname: "s"), now: t0)
        receiver.setInitialRoundTripTime(.milliseconds(31))
        receiver.received(ssrc: 0x1111, sequence: 1, rtpTimestamp: 0, clockRate: 90000, now: t0)
        var now = t0 + .milliseconds(500)
        receiver.handleTimeout(now: now)
        let report = try XCTUnwrap(receiver.pollRTCP())
        let asked = try RTCP.parse(report)
        XCTAssertNotNil(rrtr(asked.last), "\(asked)")
        // 20 ms to the sender, which reports 300 ms later, 20 ms back.
        now = now + .milliseconds(20)
        sender.handleRTCP(report, now: now)
        now = now + .milliseconds(300)
        sender.sent(ssrc: 0x1111, sequence: 2, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 1, packet: [0], now: now)
        sender.handleTimeout(now: now)
        let answer = try XCTUnwrap(sender.pollRTCP())
        XCTAssertEqual(dlrr(try RTCP.parse(answer).last).map(\.ssrc), [0x2222])
        XCTAssertNil(rrtr(try RTCP.parse(answer).last), "the sender asks with SRs, not RRTRs")
        now = now + .milliseconds(20)
        // A malformed XR (an RRTR block with no room for its 8 bytes) is skipped and measures nothing.
        XCTAssertEqual(receiver.handleRTCP([0x80, 207, 0, 2, 0, 0, 0, 9, 4, 0, 0, 2], now: now).skipped, 1)
        XCTAssertFalse(receiver.rttMeasured)
        XCTAssertEqual(receiver.rtt, .milliseconds(31))
        receiver.handleRTCP(answer, now: now)
        XCTAssertTrue(receiver.rttMeasured)
        // 40 ms, and what the DLRR's 1/65536 s units truncate (13 µs here).
        let rtt = receiver.rtt
        XCTAssertTrue(rtt >= .milliseconds(40) && rtt < .microseconds(40_020), "\(rtt)")
        var events: [RTPSessionEvent] = []
        while let e = receiver.pollEvent() { events.append(e) }
        XCTAssertEqual(events, [.roundTripTime(rtt)])
        receiver.setInitialRoundTripTime(.milliseconds(31))
        XCTAssertEqual(receiver.rtt, rtt, "a measured round trip stays")
    }

    func testASessionWithoutTheSettingOrThatSendsAsksWithNoRRTR() throws {
        var config = RTPSession.Config(localSSRCs: [1], cname: "p")
        config.receiverReferenceTime = false
        let plain = RTPSession(config: config, now: t0)
        let sending = RTPSession(config: .init(localSSRCs: [2], cname: "s"), now: t0)
        let now = t0 + .milliseconds(500)
        for s in [plain, sending] { s.received(ssrc: 9, sequence: 1, rtpTimestamp: 0, clockRate: 90000, now: t0) }
        sending.sent(ssrc: 2, sequence: 1, rtpTimestamp: 0, clockRate: 90000, payloadBytes: 1, packet: [0], now: t0)
        for s in [plain, sending] {
            s.handleTimeout(now: now)
            let packets = try RTCP.parse(try XCTUnwrap(s.pollRTCP()))
            XCTAssertFalse(packets.contains { if case .extendedReport = $0 { return true } else { return false } }, "\(packets)")
        }
    }
}
