import XCTest
@testable import OTWire

final class RTPPayloadFormatTests: XCTestCase {
    /// The router's question: which RTP packets start a keyframe, asked of the format with the packet's bytes.
    func testVP8KeyframeStartFromRTPBytes() throws {
        var sender = FakeVP8Sender()
        let key = sender.send(fakeVP8Frame(key: true, size: 350))
        let delta = sender.send(fakeVP8Frame(key: false, size: 250))
        XCTAssertGreaterThan(key.count, 1)
        let vp8 = PayloadFormats.vp8
        XCTAssertTrue(PayloadFormats.isKeyframeStart(vp8, rtpPacket: key[0].serialized()))
        for p in key.dropFirst() { XCTAssertFalse(PayloadFormats.isKeyframeStart(vp8, rtpPacket: p.serialized())) }
        for p in delta { XCTAssertFalse(PayloadFormats.isKeyframeStart(vp8, rtpPacket: p.serialized())) }
        // The same with CSRCs, a header extension and padding in front of and behind the payload.
        var p = key[0]
        p.csrcs = [7, 8]
        p.extensions = try RTPHeaderExtensions([RTPHeaderExtensionElement(id: 3, value: [1, 2][...])])
        p.paddingLength = 5
        XCTAssertTrue(PayloadFormats.isKeyframeStart(vp8, rtpPacket: p.serialized()))
        // Not RTP, truncated, or a descriptor without data: no keyframe, no trap.
        XCTAssertFalse(PayloadFormats.isKeyframeStart(vp8, rtpPacket: []))
        XCTAssertFalse(PayloadFormats.isKeyframeStart(vp8, rtpPacket: Array(key[0].serialized().prefix(13))))
        XCTAssertFalse(PayloadFormats.isKeyframeStart(vp8, [0x10][...]))
    }

    func testPayloadRangeAgreesWithTheParser() throws {
        var rng = SystemRandomNumberGenerator()
        for i in 0..<300 {
            var bytes = (0..<Int.random(in: 0...80, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if i % 2 == 0, !bytes.isEmpty { bytes[0] = 0x80 | bytes[0] & 0x3F }
            let parsed = try? RTPPacket(parsing: bytes)
            let range = RTPPacket.payloadRange(in: bytes)
            if let parsed {
                XCTAssertEqual(range.map { Array(bytes[$0]) }, Array(parsed.payload), "bytes \(bytes)")
            }
        }
    }

    func testVP8FrameIdAndClearPrefix() {
        var sender = FakeVP8Sender()
        let a = sender.send(fakeVP8Frame(key: true, size: 50)), b = sender.send(fakeVP8Frame(key: false, size: 50))
        let vp8 = PayloadFormats.vp8
        let ida = vp8.frameID(a[0].payload), idb = vp8.frameID(b[0].payload)
        XCTAssertNotNil(ida)
        XCTAssertEqual(idb, ida.map { ($0 + 1) & 0x7FFF })
        XCTAssertEqual(vp8.clearPrefixLength(isKeyframe: true), 10)
        XCTAssertEqual(vp8.clearPrefixLength(isKeyframe: false), 3)
        XCTAssertEqual(PayloadFormats.opus.clearPrefixLength(isKeyframe: true), 1)
    }

    /// A packetizer and depacketizer made by the format, used only through the protocols, carry a frame through.
    func testFormatsRoundTripFramesThroughTheProtocols() {
        func roundTrip<F: RTPPayloadFormat>(_ format: F, _ frame: [UInt8]) -> [ReceivedEncodedFrame] {
            var packetizer = format.makePacketizer(maxPayloadSize: 100)
            var depacketizer = format.makeDepacketizer(reorderWindow: 16)
            var packets: [RTPPacket] = []
            var seq: UInt16 = 65534
            frame.withUnsafeBytes { raw in
                packetizer.packetize(raw) { payload, last in
                    packets.append(RTPPacket(marker: last, payloadType: format.preferredPayloadType, sequenceNumber: seq,
                                             timestamp: 9000, ssrc: 1, payload: Array(payload)[...]))
                    seq &+= 1
                }
            }
            var frames: [ReceivedEncodedFrame] = []
            for p in packets.reversed() {
                depacketizer.insert(p) { if case .frame(var f) = $0 { f.data = Array(f.data)[...]; frames.append(f) } }
            }
            return frames
        }
        let key = fakeVP8Frame(key: true, size: 420)
        let v = roundTrip(PayloadFormats.vp8, key)
        XCTAssertEqual(v.count, 1)
        XCTAssertEqual(v.first.map { Array($0.data) }, key)
        XCTAssertEqual(v.first?.isKeyframe, true)
        XCTAssertEqual(v.first?.keyframeSize?.width, 640)
        let opus: [UInt8] = [0x78] + [UInt8](repeating: 3, count: 60)
        let o = roundTrip(PayloadFormats.opus, opus)
        XCTAssertEqual(o.map { Array($0.data) }, [opus])
        XCTAssertEqual(o.first?.rtpTimestamp, 9000)
        // An Opus frame larger than a payload is not sent; an empty payload is not a frame.
        XCTAssertTrue(roundTrip(PayloadFormats.opus, [UInt8](repeating: 0x78, count: 101)).isEmpty)
        var d = OpusDepacketizer()
        d.insert(RTPPacket(payloadType: 111, sequenceNumber: 1, timestamp: 0, ssrc: 1)) { _ in XCTFail("empty payload delivered") }
        XCTAssertEqual(d.stats.malformedPackets, 1)
    }

    func testFormatsMatchRemoteCodecs() {
        XCTAssertEqual(PayloadFormats.format(for: SDPCodec(payloadType: 120, name: "vp8", clockRate: 90000))?.name, "VP8")
        XCTAssertEqual(PayloadFormats.format(for: SDPCodec(payloadType: 109, name: "OPUS", clockRate: 48000, channels: 2))?.name, "opus")
        XCTAssertNil(PayloadFormats.format(for: SDPCodec(payloadType: 96, name: "VP8", clockRate: 48000)))
        XCTAssertNil(PayloadFormats.format(for: SDPCodec(payloadType: 98, name: "H264", clockRate: 90000)))
        XCTAssertEqual(PayloadFormats.format(named: "Opus")?.kind, .audio)
        let line = PayloadFormats.opus.sdpCodec(payloadType: 111)
        XCTAssertEqual(line, SDPCodec(payloadType: 111, name: "opus", clockRate: 48000, channels: 2, fmtp: "minptime=10;useinbandfec=1",
                                      rtcpFeedback: ["transport-cc"]))
    }
}
