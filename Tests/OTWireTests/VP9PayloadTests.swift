import XCTest
@testable import OTWire

/// Fake VP9 frames: an uncompressed header (profile 0; a keyframe's sync code, colour config and size), then filler.
func fakeVP9Frame(key: Bool, size: Int, width: Int = 640, height: Int = 480, fill: UInt8 = 0x5A) -> [UInt8] {
    var bits: [Int] = [1, 0, 0, 0, 0, key ? 0 : 1, 1, 0]  // frame marker, profile 0, not shown-existing, type, shown, no ER
    func put(_ v: Int, _ n: Int) { for i in stride(from: n - 1, through: 0, by: -1) { bits.append(v >> i & 1) } }
    if key {
        put(0x49, 8); put(0x83, 8); put(0x42, 8)
        put(1, 3); put(0, 1)  // BT.601, studio range
        put(width - 1, 16); put(height - 1, 16)
    }
    var f: [UInt8] = []
    for i in stride(from: 0, to: bits.count, by: 8) {
        var b: UInt8 = 0
        for j in 0..<8 { b = b << 1 | UInt8(i + j < bits.count ? bits[i + j] : 0) }
        f.append(b)
    }
    return f + [UInt8](repeating: fill, count: max(0, size - f.count))
}

/// Packetizes VP9 frames (100-byte payloads, picture ids from 0x7FFE) into RTP packets with consecutive sequence numbers.
typealias FakeVP9Sender = FakeSender<VP9Packetizer>
extension FakeSender where Packetizer == VP9Packetizer {
    init() { self.init(packetizer: VP9Packetizer(maxPayloadSize: 100, initialPictureId: 0x7FFE), payloadType: 98) }
}

final class VP9PayloadTests: XCTestCase {
    func testDescriptorRoundTrips() throws {
        let cases = [
            VP9PayloadDescriptor(interPicture: true, startOfFrame: true, endOfFrame: true),
            VP9PayloadDescriptor(interPicture: true, startOfFrame: false, endOfFrame: true, pictureId: 0x55, pictureIdIs15Bit: false),
            VP9PayloadDescriptor(interPicture: false, startOfFrame: true, endOfFrame: false, notInterLayerReference: true,
                                 pictureId: 0x7ABC, layer: .init(temporal: 2, switchingUp: true, spatial: 1, interLayerDependent: true),
                                 tl0PicIdx: 9),
            VP9PayloadDescriptor(interPicture: false, startOfFrame: true, endOfFrame: false, pictureId: 3,
                                 scalability: .init(spatialLayers: 1, width: 1280, height: 720, picturesInGroup: 1)),
        ]
        for d in cases {
            var bytes: [UInt8] = []
            d.write(into: &bytes)
            XCTAssertEqual(bytes.count, d.encodedLength)
            bytes.append(0xEE)
            let (parsed, rest) = try VP9PayloadDescriptor.parse(bytes[...])
            XCTAssertEqual(parsed, d)
            XCTAssertEqual(Array(rest), [0xEE])
        }
        // Flexible mode: the P_DIFFs (N bit chains them) are skipped.
        let (flex, data) = try VP9PayloadDescriptor.parse([0xD8, 0x05, 0x03, 0x05, 0x02, 0xEE][...])
        XCTAssertTrue(flex.flexible)
        XCTAssertEqual(flex.pictureId, 5)
        XCTAssertEqual(flex.referenceCount, 3)
        XCTAssertEqual(Array(data), [0xEE])
        XCTAssertThrowsError(try VP9PayloadDescriptor.parse([0xD8, 0x05, 0x03, 0x03, 0x03, 0x02, 0xEE][...]), "four references")
        XCTAssertThrowsError(try VP9PayloadDescriptor.parse([0x88, 0x80][...]), "15-bit picture id truncated")
        XCTAssertThrowsError(try VP9PayloadDescriptor.parse([0x0A, 0x10, 0x05][...]), "SS resolution truncated")
        XCTAssertThrowsError(try VP9PayloadDescriptor.parse([0x08][...]), "no VP9 data")
    }

    func testFrameHeaderTellsKeyframesAndTheirSize() {
        let key = fakeVP9Frame(key: true, size: 50, width: 1280, height: 720)
        XCTAssertTrue(VP9FrameHeader.isKeyframe(key[...]))
        XCTAssertEqual(VP9FrameHeader.keyframeSize(key[...])?.width, 1280)
        XCTAssertEqual(VP9FrameHeader.keyframeSize(key[...])?.height, 720)
        // The size lies within the clear prefix end-to-end encryption keeps.
        let prefix = PayloadFormats.vp9.clearPrefixLength(isKeyframe: true)
        XCTAssertEqual(VP9FrameHeader.keyframeSize(key.prefix(prefix))?.width, 1280)
        XCTAssertFalse(VP9FrameHeader.isKeyframe(fakeVP9Frame(key: false, size: 50)[...]))
        XCTAssertNil(VP9FrameHeader.keyframeSize(fakeVP9Frame(key: false, size: 50)[...]))
        XCTAssertNil(VP9FrameHeader.parse(key.prefix(5)), "a keyframe header cut before its size")
        XCTAssertNil(VP9FrameHeader.parse([0x42, 0x49][...]), "no frame marker")
        var badSync = key
        badSync[1] = 0
        XCTAssertNil(VP9FrameHeader.parse(badSync[...]))
    }

    func testPacketizerSendsScalabilityStructureOnKeyframesAndConsecutivePictureIds() throws {
        var sender = FakeVP9Sender()
        let key = sender.send(fakeVP9Frame(key: true, size: 350, width: 320, height: 240))
        let delta = sender.send(fakeVP9Frame(key: false, size: 250))
        var descriptors: [VP9PayloadDescriptor] = []
        for p in key + delta {
            XCTAssertLessThanOrEqual(p.payload.count, 100)
            descriptors.append(try VP9PayloadDescriptor.parse(p.payload).0)
        }
        XCTAssertEqual(key.count, 4)
        XCTAssertEqual(descriptors[0].scalability, .init(spatialLayers: 1, width: 320, height: 240, picturesInGroup: 1))
        XCTAssertTrue(descriptors[1...].allSatisfy { $0.scalability == nil })
        XCTAssertEqual(descriptors.map(\.startOfFrame), [true, false, false, false, true, false, false])
        XCTAssertEqual(descriptors.map(\.endOfFrame), [false, false, false, true, false, false, true])
        XCTAssertEqual((key + delta).map(\.marker), descriptors.map(\.endOfFrame))
        XCTAssertEqual(descriptors.map(\.interPicture), [false, false, false, false, true, true, true])
        XCTAssertEqual(descriptors.map(\.pictureId), [0x7FFE, 0x7FFE, 0x7FFE, 0x7FFE, 0x7FFF, 0x7FFF, 0x7FFF])
        // The format: keyframe start only on the keyframe's first packet; frame ids from the descriptor.
        let f = PayloadFormats.vp9
        XCTAssertEqual((key + delta).map { f.isKeyframeStart($0.payload) }, [true, false, false, false, false, false, false])
        XCTAssertEqual(f.frameID(delta[0].payload), 0x7FFF)
        XCTAssertTrue(PayloadFormats.isKeyframeStart(f, rtpPacket: key[0].serialized()))
        // The next picture id wraps at 15 bits.
        XCTAssertEqual(try VP9PayloadDescriptor.parse(sender.send(fakeVP9Frame(key: false, size: 20))[0].payload).0.pictureId, 0)
    }

    func testDepacketizerReassemblesAndAsksForKeyframeAfterLoss() {
        var sender = FakeVP9Sender()
        var d = VP9Depacketizer(reorderWindow: 4)
        var events: [String] = [], frames: [[UInt8]] = [], sizes: [Int] = []
        func feed(_ packets: [RTPPacket]) {
            for p in packets {
                d.insert(p) { e in
                    switch e {
                    case .frame(let f):
                        events.append(f.isKeyframe ? "K" : "D"); frames.append(Array(f.data))
                        if let s = f.keyframeSize { sizes += [s.width, s.height] }
                    case .keyframeRequest(let r): events.append("R:\(r)")
                    }
                }
            }
        }
        let key = fakeVP9Frame(key: true, size: 300, width: 320, height: 180), delta = fakeVP9Frame(key: false, size: 200, fill: 7)
        var packets = sender.send(key) + sender.send(delta)
        packets.swapAt(1, 2)
        feed(packets)
        XCTAssertEqual(frames, [key, delta])
        XCTAssertEqual(sizes, [320, 180])
        var lossy = sender.send(fakeVP9Frame(key: false, size: 300))
        lossy.remove(at: 1)
        feed(lossy)
        for _ in 0..<4 { feed(sender.send(fakeVP9Frame(key: false, size: 120))) }
        XCTAssertEqual(events.filter { $0.hasPrefix("R:") }, ["R:packetLoss(missing: 1)"])
        XCTAssertEqual(events.filter { $0 == "D" }.count, 1, "no delta frame may pass after the loss: \(events)")
        XCTAssertTrue(d.isWaitingForKeyframe)
        feed(sender.send(fakeVP9Frame(key: true, size: 300)))
        feed(sender.send(fakeVP9Frame(key: false, size: 100)))
        XCTAssertEqual(Array(events.suffix(2)), ["K", "D"])
        XCTAssertFalse(d.isWaitingForKeyframe)
    }

    func testADeltaPictureWithKeyframeHeaderBitsIsNotAKeyframe() {
        // P set in the descriptor: not a keyframe start, whatever the data says.
        var bytes: [UInt8] = []
        VP9PayloadDescriptor(interPicture: true, startOfFrame: true, endOfFrame: true, pictureId: 1).write(into: &bytes)
        bytes += fakeVP9Frame(key: true, size: 20)
        XCTAssertFalse(PayloadFormats.vp9.isKeyframeStart(bytes[...]))
        // P clear but the header says inter frame (the safety check): not one either.
        bytes = []
        VP9PayloadDescriptor(interPicture: false, startOfFrame: true, endOfFrame: true, pictureId: 1).write(into: &bytes)
        bytes += fakeVP9Frame(key: false, size: 20)
        XCTAssertFalse(PayloadFormats.vp9.isKeyframeStart(bytes[...]))
    }

    func testFormatNegotiatesProfileZeroOnly() {
        let f = PayloadFormats.vp9
        XCTAssertTrue(f.matches(SDPCodec(payloadType: 98, name: "VP9", clockRate: 90000, fmtp: "profile-id=0")))
        XCTAssertTrue(f.matches(SDPCodec(payloadType: 98, name: "vp9", clockRate: 90000)))
        XCTAssertFalse(f.matches(SDPCodec(payloadType: 100, name: "VP9", clockRate: 90000, fmtp: "profile-id=2")))
        XCTAssertFalse(f.matches(SDPCodec(payloadType: 96, name: "VP8", clockRate: 90000)))
        XCTAssertEqual(f.sdpCodec(payloadType: 98).fmtp, "profile-id=0")
        XCTAssertEqual(PayloadFormats.format(named: "vp9")?.name, "VP9")
        XCTAssertEqual(PayloadFormats.video.map(\.name), ["VP8", "VP9"])
    }
}
