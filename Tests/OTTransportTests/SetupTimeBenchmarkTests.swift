import Foundation
import OTBase
import OTMedia
import OTTestSupport
import OTWire
@testable import OTTransport
import XCTest

/// Connection setup on loopback, ours against aiortc, in one run: offer created -> ICE + DTLS connected, and
/// offer created -> first VP8 frame decoded at the answerer (audio + video offer, host candidates on 127.0.0.1,
/// no STUN servers). Prints medians and their ratios (docs/benchmarks-transport.md); asserts only that every
/// connection succeeded and a frame was decoded.
final class SetupTimeBenchmarkTests: XCTestCase {
    func testSetupTimeOursVersusAiortcPair() throws {
        let runs = 5
        var ours: [Double] = [], oursFrame: [Double] = []
        for _ in 0..<runs {
            let a = try LoopbackPeer(), b = try LoopbackPeer()
            let start = try LoopbackTransportTests.startPair(a, b)
            XCTAssertTrue(LoopbackPeer.wait { a.has(isDTLSConnected) && b.has(isDTLSConnected) })
            ours.append(Double((MonotonicClock.now() - start).microseconds) / 1000)
            oursFrame.append(try firstDecodedFrame(from: a, to: b, start: start))
            a.driver.stop(); b.driver.stop()
        }
        var theirs: [Double] = [], theirsFrame: [Double] = []
        for _ in 0..<runs {
            let child = try PythonChild(AiortcInteropTests.script, ["pair"])
            let (proc, reader) = (child.process, child.output)
            let report = reader.json(where: "event", is: "pair")
            proc.waitUntilExit()
            theirs.append(try XCTUnwrap(report?["ms"] as? Double, "aiortc pair did not connect"))
            theirsFrame.append(try XCTUnwrap(report?["firstFrameMs"] as? Double, "aiortc pair decoded no frame"))
        }
        func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
        func list(_ v: [Double]) -> String { v.map { String(format: "%.1f", $0) }.joined(separator: ",") }
        print(String(format: "SETUP_BENCH connected: runs=%d ours_median_ms=%.1f aiortc_pair_median_ms=%.1f ratio_ours_over_aiortc=%.2f ours=%@ aiortc=%@",
                     runs, median(ours), median(theirs), median(ours) / median(theirs), list(ours), list(theirs)))
        print(String(format: "SETUP_BENCH first-decoded-frame: runs=%d ours_median_ms=%.1f aiortc_pair_median_ms=%.1f ratio_ours_over_aiortc=%.2f ours=%@ aiortc=%@",
                     runs, median(oursFrame), median(theirsFrame), median(oursFrame) / median(theirsFrame), list(oursFrame), list(theirsFrame)))
    }

    /// Once connected, `a` encodes one 320x240 VP8 keyframe and sends it over SRTP; returns the time from `start`
    /// until `b` has decoded it (polled every 0.5 ms on the test thread).
    func firstDecodedFrame(from a: LoopbackPeer, to b: LoopbackPeer, start: Instant) throws -> Double {
        let ka = try XCTUnwrap(a.withTransport { $0?.dtls.keyingMaterial }), kb = try XCTUnwrap(b.withTransport { $0?.dtls.keyingMaterial })
        let tx = try SRTPContext(profile: ka.profile, keys: ka.srtpKeys), rx = try SRTPContext(profile: kb.profile, keys: kb.srtpKeys)
        let encoder = try VP8Encoder(config: VideoEncoderConfig(width: 320, height: 240))
        var packets: [[UInt8]] = []
        var seq: UInt16 = 0
        try encoder.encode(VideoFrame(width: 320, height: 240), forceKeyframe: true) { enc in
            let data = Array(enc.data)
            var offset = 0
            while offset < data.count {
                let n = min(1000, data.count - offset)
                var payload: [UInt8] = []
                VP8PayloadDescriptor(startOfPartition: offset == 0).write(into: &payload)
                payload += data[offset..<offset + n]
                offset += n
                var bytes = RTPPacket(marker: offset == data.count, payloadType: 96, sequenceNumber: seq, timestamp: 0, ssrc: 12, payload: payload[...]).serialized()
                try tx.protectRTP(&bytes)
                packets.append(bytes)
                seq &+= 1
            }
        }
        a.withTransport { t in for p in packets { _ = t?.sendMedia(p) } }
        a.driver.wake()
        let decoder = try VP8Decoder()
        var assembler = VP8Assembler()
        var frame = VideoFrame(width: 16, height: 16)
        var seen = 0
        let end = MonotonicClock.now() + .seconds(5)
        while MonotonicClock.now() < end {
            let events = b.events.withLock { Array($0.dropFirst(seen)) }
            seen += events.count
            for e in events {
                guard case .srtp(var bytes, false) = e else { continue }
                try rx.unprotectRTP(&bytes)
                if let data = try assembler.add(try RTPPacket(parsing: bytes)), try decoder.decode(data[...], into: &frame) {
                    XCTAssertEqual(frame.width, 320)
                    return Double((MonotonicClock.now() - start).microseconds) / 1000
                }
            }
            usleep(500)
        }
        XCTFail("no frame decoded")
        return .nan
    }
}

/// Reassembles VP8 frames from RTP packets of one SSRC (in order on loopback; a gap drops the frame).
struct VP8Assembler {
    var timestamp: UInt32?
    var lastSeq: UInt16?
    var parts: [UInt8] = []
    var broken = false

    mutating func add(_ p: RTPPacket) throws -> [UInt8]? {
        let (desc, body) = try VP8PayloadDescriptor.parse(p.payload)
        if desc.startsFrame || timestamp != p.timestamp {
            timestamp = p.timestamp; parts = []; broken = !desc.startsFrame
        } else if let l = lastSeq, p.sequenceNumber != l &+ 1 {
            broken = true
        }
        lastSeq = p.sequenceNumber
        parts.append(contentsOf: body)
        guard p.marker, !broken else { return nil }
        defer { parts = [] }
        return parts
    }
}
