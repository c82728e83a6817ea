import OTBase
import OTWire
@testable import OTRTP
import XCTest

/// The sans-IO repair processors alone, on explicit instants: NACK generator and responder (with RTX), keyframe pacing.
final class NACKGeneratorTests: XCTestCase {
    private let t0 = Instant(micros: 1_000_000)
    private func at(_ ms: Int64) -> Instant { t0 + .milliseconds(ms) }

    func testRetriesFollowTheRTTWithAFloor() {
        let g = NACKGenerator()
        XCTAssertEqual(g.retryInterval(rtt: .microseconds(300)), .milliseconds(20), "loopback: the floor")
        XCTAssertEqual(g.retryInterval(rtt: .milliseconds(80)), .milliseconds(100), "RTT + a quarter")
    }

    /// A leg that only receives never measures a round trip by RTCP: its session's estimate stays the 100 ms default
    /// (or a handshake's, inflated by the handshake's own losses), and NACK retries went every 125 ms on a loopback path
    /// (docs/benchmarks.md "Loss", stop 22). The generator measures the round trip of its own repairs (a packet NACKed
    /// once and then arriving; after a retry it is unknown which NACK was answered) and retries on it when shorter.
    func testRetriesFollowTheRoundTripOfItsOwnRepairsWhenShorter() {
        var g = NACKGenerator()
        let rtt = Duration.milliseconds(100)  // the session's unmeasured default
        g.received(sequence: 1, now: at(0))
        g.received(sequence: 3, now: at(0))
        XCTAssertEqual(g.poll(now: at(0), rtt: rtt), [2])
        XCTAssertEqual(g.nextPoll(rtt: rtt), at(125), "nothing measured yet: the session's round trip")
        g.received(sequence: 2, now: at(2))
        XCTAssertEqual(g.repairRoundTrip, .milliseconds(2), "answered 2 ms after its only NACK")
        g.received(sequence: 5, now: at(10))
        XCTAssertEqual(g.poll(now: at(10), rtt: rtt), [4])
        XCTAssertEqual(g.nextPoll(rtt: rtt), at(30), "the 20 ms floor over the measured 2 ms")
        XCTAssertEqual(g.poll(now: at(30), rtt: rtt), [4], "its retransmission was lost: asked for again after 20 ms, not 125")
        g.received(sequence: 4, now: at(70))
        XCTAssertEqual(g.repairRoundTrip, .milliseconds(2), "NACKed twice: no sample")
        g.received(sequence: 7, now: at(100))
        XCTAssertEqual(g.poll(now: at(100), rtt: rtt), [6])
        g.received(sequence: 6, now: at(142))  // a repair that waited (e.g. on the router's own uplink repair)
        XCTAssertEqual(g.repairRoundTrip, .milliseconds(7), "a longer sample raises the estimate by an eighth of the difference")
        XCTAssertEqual(g.retryInterval(rtt: .microseconds(500)), .milliseconds(20), "a shorter session round trip still rules")
        XCTAssertEqual(g.retryInterval(rtt: .milliseconds(200)), .milliseconds(20))
        g.received(sequence: 9, now: at(200))
        XCTAssertEqual(g.poll(now: at(200), rtt: rtt), [8])
        g.received(sequence: 8, now: at(201))
        XCTAssertEqual(g.repairRoundTrip, .milliseconds(1), "a shorter sample is taken at once")
    }

    func testALostRetransmissionIsNackedAgainAfterTheRetryInterval() {
        var g = NACKGenerator()
        let rtt = Duration.milliseconds(40)  // retry interval 50 ms
        g.received(sequence: 10, now: at(0))
        g.received(sequence: 13, now: at(5))
        XCTAssertEqual(g.poll(now: at(5), rtt: rtt), [11, 12], "a gap is NACKed at once")
        XCTAssertEqual(g.poll(now: at(30), rtt: rtt), [], "not again before the retransmission can be back")
        g.received(sequence: 11, now: at(46))
        XCTAssertEqual(g.recovered, 1)
        XCTAssertEqual(g.nextPoll(rtt: rtt), at(55))
        XCTAssertEqual(g.poll(now: at(55), rtt: rtt), [12], "its retransmission was lost: asked for again")
        g.received(sequence: 12, now: at(97))
        XCTAssertEqual(g.recovered, 2)
        XCTAssertEqual(g.outstanding, 0)
        XCTAssertEqual(g.nacked, 3)
        XCTAssertEqual(g.takeGivenUp(), [])
    }

    func testGivesUpOnlyAfterTheLastRetryHadItsChance() {
        var g = NACKGenerator()
        g.maxRetries = 3
        g.minRepairWindow = .zero
        let rtt = Duration.milliseconds(80)  // 100 ms between NACKs
        g.received(sequence: 1, now: at(0))
        g.received(sequence: 3, now: at(0))
        XCTAssertEqual(g.poll(now: at(0), rtt: rtt), [2])
        XCTAssertEqual(g.poll(now: at(100), rtt: rtt), [2])
        XCTAssertEqual(g.poll(now: at(200), rtt: rtt), [2])
        XCTAssertEqual(g.poll(now: at(250), rtt: rtt), [], "the third retry may still be answered")
        XCTAssertEqual(g.takeGivenUp(), [])
        XCTAssertEqual(g.nextPoll(rtt: rtt), at(300))
        XCTAssertEqual(g.poll(now: at(300), rtt: rtt), [])
        XCTAssertEqual(g.takeGivenUp(), [2], "repair is impossible now: the receiver stops waiting")
        XCTAssertEqual(g.givenUp, 1)
        XCTAssertEqual(g.outstanding, 0)
        XCTAssertEqual(g.takeGivenUp(), [], "handed out once")
    }

    func testOnAFastPathRetriesGoOnUntilTheRepairWindowHasPassed() {
        var g = NACKGenerator()  // 10 retries, 500 ms window
        let rtt = Duration.microseconds(200)  // loopback: NACKs 20 ms apart
        g.received(sequence: 1, now: at(0))
        g.received(sequence: 3, now: at(0))
        var sent = 0
        var t: Int64 = 0
        while t < 500 {
            sent += g.poll(now: at(t), rtt: rtt).count
            XCTAssertEqual(g.takeGivenUp(), [], "still repairable at \(t) ms: the uplink may be repairing it")
            t += 20
        }
        XCTAssertEqual(sent, 25, "one NACK every 20 ms, past the 10 retries")
        _ = g.poll(now: at(520), rtt: rtt)
        XCTAssertEqual(g.takeGivenUp(), [2], "given up once the window passed and the last NACK had its chance")
        g.received(sequence: 5, now: at(600))  // 4 missing: it arrives at 630 after 2 NACKs
        XCTAssertEqual(g.poll(now: at(600), rtt: rtt), [4])
        XCTAssertEqual(g.poll(now: at(620), rtt: rtt), [4])
        g.received(sequence: 4, now: at(630))
        XCTAssertEqual(g.outstanding, 0)
    }

    func testPacketsBeforeTheFirstOneReceivedAreNackedOnceAnOlderOneShowsThem() {
        var g = NACKGenerator()
        let rtt = Duration.microseconds(300)
        g.received(sequence: 1002, now: at(0))  // a subscriber's first packet: what came before is unknown
        XCTAssertEqual(g.poll(now: at(0), rtt: rtt), [])
        g.received(sequence: 1000, now: at(5))  // a keyframe's first packet, repaired upstream, arrives after 1002
        XCTAssertEqual(g.poll(now: at(5), rtt: rtt), [1001], "1001 was sent between them and is missing")
        g.received(sequence: 1001, now: at(8))
        XCTAssertEqual(g.recovered, 1)
        g.received(sequence: 400, now: at(9))  // far older than anything tracked: not a gap to repair
        XCTAssertEqual(g.outstanding, 0)
        XCTAssertEqual(g.poll(now: at(30), rtt: rtt), [])
    }

    func testGivesUpPacketsOlderThanMaxAgeAndBeforeAnUntrackableGap() {
        var g = NACKGenerator()
        g.maxAge = .milliseconds(500)
        g.received(sequence: 65534, now: at(0))
        g.received(sequence: 1, now: at(0))  // 65535 and 0 missing, across the wrap
        XCTAssertEqual(g.poll(now: at(0), rtt: .seconds(1)), [65535, 0])
        XCTAssertEqual(g.poll(now: at(501), rtt: .seconds(1)), [])
        XCTAssertEqual(Set(g.takeGivenUp()), [65535, 0])
        g.received(sequence: 3, now: at(600))  // 2 missing
        g.received(sequence: 2003, now: at(610))  // a jump of 2000: not tracked
        XCTAssertEqual(g.takeGivenUp(), [2])
        XCTAssertEqual(g.outstanding, 0)
    }
}

final class NACKResponderTests: XCTestCase {
    private let t = Instant(micros: 0)

    /// Without `keepsPackets` (the packets are kept by a media router's stream), storing notes only the sequence number
    /// and a NACK gives the numbers to resend under the same rules: held (else missed), at most once per RTT.
    func testWithoutPacketsItAnswersWithTheNumbersToResend() {
        var c = NACKResponder(capacity: 16, keepsPackets: false)
        for s: UInt16 in 0..<40 { c.store(sequence: s, packet: [UInt8(s)]) }
        XCTAssertNil(c.lookup(39), "no copy kept")
        XCTAssertEqual(c.resendable([38, 39, 5], now: t, rtt: .milliseconds(100)), [38, 39])
        XCTAssertEqual(c.missed, 1, "5 was overwritten")
        XCTAssertEqual(c.resendable([38], now: t + .milliseconds(50), rtt: .milliseconds(100)), [], "a duplicate NACK")
        XCTAssertEqual(c.suppressed, 1)
        XCTAssertEqual(c.resendable([38], now: t + .milliseconds(150), rtt: .milliseconds(100)), [38], "the retransmission was lost")
        c.store(sequence: 54, packet: [])  // 38's slot, sent again: a NACK right away is answered
        XCTAssertEqual(c.resendable([54], now: t + .milliseconds(160), rtt: .milliseconds(100)), [54])
        XCTAssertEqual(c.wrapped([1, 2, 3]), [1, 2, 3], "without RTX the packet goes as it is")
        XCTAssertEqual(c.resent, 1)
        XCTAssertEqual(c.resentBytes, 3)
    }

    func testAnswersEachPacketAtMostOncePerRTT() {
        var c = NACKResponder(capacity: 16)
        for s: UInt16 in 0..<40 { c.store(sequence: s, packet: [UInt8(s)]) }
        XCTAssertNil(c.lookup(5))  // overwritten
        XCTAssertEqual(c.lookup(39), [39])
        XCTAssertEqual(c.packets(for: [38, 39, 5], now: t, rtt: .milliseconds(100)), [[38], [39]])
        XCTAssertEqual(c.missed, 1)
        XCTAssertEqual(c.packets(for: [38], now: t + .milliseconds(50), rtt: .milliseconds(100)), [], "a duplicate NACK")
        XCTAssertEqual(c.suppressed, 1)
        XCTAssertEqual(c.packets(for: [38], now: t + .milliseconds(150), rtt: .milliseconds(100)), [[38]], "the retransmission was lost")
        XCTAssertEqual(c.resent, 3)
        XCTAssertEqual(c.resentBytes, 3)
    }

    func testResendsOnTheRTXStreamWhenNegotiated() throws {
        var c = NACKResponder(rtx: RTXSender(rtxSSRC: 0xBEEF, payloadTypes: [96: 97], initialSequence: 500))
        let original = RTPPacket(marker: true, payloadType: 96, sequenceNumber: 4242, timestamp: 9000, ssrc: 0xAAAA, payload: [1, 2, 3])
        c.store(sequence: 4242, packet: original.serialized())
        let audio = RTPPacket(payloadType: 111, sequenceNumber: 7, timestamp: 960, ssrc: 0xCCCC, payload: [9])
        c.store(sequence: 7, packet: audio.serialized())
        let out = c.packets(for: [4242, 7], now: t, rtt: .milliseconds(10))
        XCTAssertEqual(out.count, 2)
        let rtx = try RTPPacket(parsing: out[0])
        XCTAssertEqual(rtx.ssrc, 0xBEEF)
        XCTAssertEqual(rtx.payloadType, 97)
        XCTAssertEqual(rtx.sequenceNumber, 500)
        XCTAssertEqual(Array(rtx.payload), [0x10, 0x92, 1, 2, 3], "the original sequence number, then the payload")
        let back = try XCTUnwrap(RTXReceiver(ssrcs: [0xBEEF: 0xAAAA], payloadTypes: [97: 96]).unwrap(rtx))
        XCTAssertEqual(back.serialized(), original.serialized())
        XCTAssertEqual(out[1], audio.serialized(), "a payload type without RTX goes out as it was")
    }
}

final class KeyframeRequestPacerTests: XCTestCase {
    private let t0 = Instant(micros: 1_000_000)
    private func at(_ ms: Int64) -> Instant { t0 + .milliseconds(ms) }

    func testOneRequestPerIntervalNoneLost() {
        var p = KeyframeRequestPacer()
        let rtt = Duration.milliseconds(1)
        XCTAssertEqual(p.interval(rtt: rtt), .milliseconds(100))
        XCTAssertEqual(p.interval(rtt: .milliseconds(150)), .milliseconds(300), "two RTTs on a long path")
        XCTAssertTrue(p.request(now: at(0), rtt: rtt), "the first goes at once")
        XCTAssertNil(p.nextDeadline(rtt: rtt))
        // A decoder asking on every 10 ms tick while it waits: one request per interval goes.
        var sent = [Int64(0)]
        for ms in stride(from: Int64(10), through: 400, by: 10) {
            if p.poll(now: at(ms), rtt: rtt) != nil { sent.append(ms) }
            if p.request(now: at(ms), rtt: rtt) { sent.append(ms) }
        }
        XCTAssertEqual(sent, [0, 100, 200, 300, 400])
        XCTAssertEqual(p.sent, 5)
        // A request folded into a held one goes at the interval's end, as a FIR if any of them was.
        XCTAssertFalse(p.request(now: at(410), rtt: rtt))
        XCTAssertFalse(p.request(useFIR: true, now: at(420), rtt: rtt))
        XCTAssertEqual(p.nextDeadline(rtt: rtt), at(500))
        XCTAssertNil(p.poll(now: at(499), rtt: rtt))
        XCTAssertEqual(p.poll(now: at(500), rtt: rtt), true)
        XCTAssertNil(p.poll(now: at(700), rtt: rtt), "nothing held any more")
    }
}
