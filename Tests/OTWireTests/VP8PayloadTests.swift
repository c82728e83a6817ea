import XCTest
@testable import OTWire

/// Fake VP8 frames: the payload header bits the depacketizer reads, then filler.
func fakeVP8Frame(key: Bool, size: Int, width: Int = 640, height: Int = 480, fill: UInt8 = 0x5A) -> [UInt8] {
    var f = [UInt8](repeating: fill, count: max(size, 10))
    f[0] = key ? 0x10 : 0x11
    if key {
        f[3] = 0x9D; f[4] = 0x01; f[5] = 0x2A
        f[6] = UInt8(width & 0xFF); f[7] = UInt8(width >> 8); f[8] = UInt8(height & 0xFF); f[9] = UInt8(height >> 8)
    }
    return f
}

/// Packetizes frames into RTP packets with consecutive sequence numbers.
struct FakeSender<Packetizer: RTPPacketizer> {
    var packetizer: Packetizer
    var payloadType: UInt8
    var seq: UInt16 = 65500
    var timestamp: UInt32 = 1000

    mutating func send(_ frame: [UInt8]) -> [RTPPacket] {
        var out: [RTPPacket] = []
        let ts = timestamp
        var s = seq
        _ = frame.withUnsafeBytes { raw in
            packetizer.packetize(raw) { payload, last in
                out.append(RTPPacket(marker: last, payloadType: payloadType, sequenceNumber: s, timestamp: ts, ssrc: 42,
                                     payload: Array(payload)[...]))
                s &+= 1
            }
        }
        seq = s
        timestamp &+= 3000
        return out
    }
}

typealias FakeVP8Sender = FakeSender<VP8Packetizer>
extension FakeSender where Packetizer == VP8Packetizer {
    init() { self.init(packetizer: VP8Packetizer(maxPayloadSize: 100), payloadType: 96) }
}

/// A depacketizer with what it delivered: frames and keyframe requests, in order.
struct DepacketizerProbe {
    var d: VP8Depacketizer
    var got: [[UInt8]] = []
    var requests: [KeyframeRequestReason] = []

    init(reorderWindow: Int) { d = VP8Depacketizer(reorderWindow: reorderWindow) }

    mutating func insert(_ packets: [RTPPacket]) {
        for p in packets {
            d.insert(p) { e in
                switch e {
                case .frame(let fr): got.append(Array(fr.data))
                case .keyframeRequest(let r): requests.append(r)
                }
            }
        }
    }
}

final class VP8PayloadTests: XCTestCase {
    func testDescriptorRoundTrips() throws {
        let cases = [
            VP8PayloadDescriptor(startOfPartition: true),
            VP8PayloadDescriptor(nonReference: true, startOfPartition: false, partitionIndex: 3, pictureId: 0x55, pictureIdIs15Bit: false),
            VP8PayloadDescriptor(startOfPartition: true, pictureId: 0x7ABC, tl0PicIdx: 9, temporalLayer: 2, layerSync: true, keyIndex: 17),
        ]
        for d in cases {
            var bytes: [UInt8] = []
            d.write(into: &bytes)
            XCTAssertEqual(bytes.count, d.encodedLength)
            bytes.append(0xEE)
            let (parsed, rest) = try VP8PayloadDescriptor.parse(bytes[...])
            XCTAssertEqual(parsed, d)
            XCTAssertEqual(Array(rest), [0xEE])
        }
        XCTAssertThrowsError(try VP8PayloadDescriptor.parse([0x90, 0x80, 0x80][...]), "15-bit picture id truncated")
        XCTAssertThrowsError(try VP8PayloadDescriptor.parse([0x10][...]), "no VP8 data")
    }

    func testKeyframeDetectionAndSize() {
        let key = fakeVP8Frame(key: true, size: 50, width: 1280, height: 720)
        XCTAssertTrue(VP8FrameHeader.isKeyframe(key[...]))
        XCTAssertEqual(VP8FrameHeader.keyframeSize(key[...])?.width, 1280)
        XCTAssertEqual(VP8FrameHeader.keyframeSize(key[...])?.height, 720)
        XCTAssertFalse(VP8FrameHeader.isKeyframe(fakeVP8Frame(key: false, size: 50)[...]))
        XCTAssertNil(VP8FrameHeader.keyframeSize([0x10, 0, 0, 0x9D][...]))
    }

    func testPacketizerRespectsMTUAndBalancesSizes() {
        var p = VP8Packetizer(maxPayloadSize: 1000)
        let frame = fakeVP8Frame(key: true, size: 2500)
        var sizes: [Int] = [], markers: [Bool] = [], starts: [Bool] = [], ids: [UInt16?] = []
        var data: [UInt8] = []
        _ = frame.withUnsafeBytes { raw in
            p.packetize(raw) { payload, last in
                sizes.append(payload.count); markers.append(last)
                if let (d, rest) = try? VP8PayloadDescriptor.parse(payload) {
                    starts.append(d.startOfPartition); ids.append(d.pictureId); data += rest
                }
            }
        }
        XCTAssertEqual(sizes.count, 3)
        XCTAssertTrue(sizes.allSatisfy { $0 <= 1000 })
        XCTAssertLessThanOrEqual(sizes.max()! - sizes.min()!, 1, "balanced split")
        XCTAssertEqual(markers, [false, false, true])
        XCTAssertEqual(starts, [true, false, false])
        XCTAssertEqual(Set(ids), [0])
        XCTAssertEqual(data, frame)
        XCTAssertEqual(p.pictureId, 1)
        XCTAssertEqual(VP8Packetizer.maxPayloadSize(mtu: 1200, rtpHeaderLength: 20, srtpOverhead: 16), 1136)
    }

    func testPacketizerSignalsTemporalLayers() throws {
        var p = VP8Packetizer(maxPayloadSize: 1200, initialPictureId: 0x7FFF)
        let layers = [TemporalLayerInfo(temporalLayer: 0, layerSync: true), TemporalLayerInfo(temporalLayer: 1, layerSync: true),
                      TemporalLayerInfo(temporalLayer: 0, layerSync: false)]
        var seen: [VP8PayloadDescriptor] = []
        for (i, layer) in layers.enumerated() {
            let frame = fakeVP8Frame(key: i == 0, size: 50)
            _ = try frame.withUnsafeBytes { raw in
                try p.packetize(raw, nonReference: layer.temporalLayer == 1, layer: layer) { payload, _ in
                    seen.append(try VP8PayloadDescriptor.parse(payload).0)
                }
            }
        }
        XCTAssertEqual(seen.map(\.pictureId), [0x7FFF, 0, 1], "15-bit picture id wraps")
        XCTAssertEqual(seen.map(\.temporalLayer), [0, 1, 0])
        XCTAssertEqual(seen.map(\.tl0PicIdx), [1, 1, 2], "TL0PICIDX advances on base-layer frames only")
        XCTAssertEqual(seen.map(\.layerSync), [true, true, false])
        XCTAssertEqual(seen.map(\.nonReference), [false, true, false])
    }

    func testDepacketizerReassemblesFramesAcrossPacketsAndWrap() {
        var sender = FakeVP8Sender()
        var d = VP8Depacketizer()
        let frames = [fakeVP8Frame(key: true, size: 450), fakeVP8Frame(key: false, size: 230, fill: 1), fakeVP8Frame(key: false, size: 90, fill: 2)]
        var got: [[UInt8]] = [], requests = 0
        for f in frames {
            for p in sender.send(f) {
                d.insert(p) { e in
                    switch e {
                    case .frame(let fr): got.append(Array(fr.data))
                    case .keyframeRequest: requests += 1
                    }
                }
            }
        }
        XCTAssertEqual(got, frames)
        XCTAssertEqual(requests, 0)
    }

    /// A keyframe's middle packet comes late (repaired) after the next frames arrived whole: those frames are kept and
    /// delivered after the keyframe, in order, and nothing waits for numbers already received (netns relayed 10 %:
    /// dropped while waiting, they were what the stream then waited for, and video stopped for good).
    func testFramesAfterAKeyframeBeingRepairedAreKeptAndFollowIt() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 256)
        let key = fakeVP8Frame(key: true, size: 450)
        var keyPackets = sender.send(key)
        let late = keyPackets.remove(at: 2)
        probe.insert(keyPackets)
        let deltas = (0..<3).map { fakeVP8Frame(key: false, size: 60, fill: UInt8(20 + $0)) }
        for f in deltas { probe.insert(sender.send(f)) }
        XCTAssertEqual(probe.got.count, 0, "nothing before the keyframe is whole")
        probe.insert([late])
        XCTAssertEqual(probe.got, [key] + deltas, "the keyframe, then the frames kept meanwhile")
        let next = fakeVP8Frame(key: false, size: 60, fill: 30)
        probe.insert(sender.send(next))
        XCTAssertEqual(probe.got.last, next, "and the stream goes on")
        XCTAssertEqual(probe.requests.count, 0, "no keyframe asked for: the one being repaired is enough")
    }

    /// A delta frame completes while the keyframe before it still lacks its first packet (no keyframe start held, so
    /// nothing says one is coming): the delta is dropped. When the repair completes the keyframe, the dropped frame's
    /// numbers follow it and will never come again (the transport received them): a keyframe is asked for at once,
    /// not after the hole's repair wait (a 1.2–1.3 s freeze in the relayed netns tests at 10–20 % loss).
    func testAKeyframeCompletedAfterTheFramesFollowingItWereDroppedAsksForAnotherAtOnce() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 256)
        let key = fakeVP8Frame(key: true, size: 450)
        var keyPackets = sender.send(key)
        let first = keyPackets.removeFirst()
        probe.insert(keyPackets)
        let delta = fakeVP8Frame(key: false, size: 60, fill: 21)
        probe.insert(sender.send(delta))
        XCTAssertEqual(probe.got.count, 0)
        XCTAssertEqual(probe.requests, [.noKeyframeYet], "the delta was dropped: no keyframe start was held")
        probe.insert([first])
        XCTAssertEqual(probe.got, [key], "the repaired keyframe is delivered")
        XCTAssertEqual(probe.requests, [.noKeyframeYet, .packetLoss(missing: 1)], "and a keyframe asked for at once")
        let later = fakeVP8Frame(key: false, size: 60, fill: 22)
        probe.insert(sender.send(later))
        XCTAssertEqual(probe.got, [key], "a delta after the lost one is not decodable")
        let next = fakeVP8Frame(key: true, size: 300)
        probe.insert(sender.send(next))
        XCTAssertEqual(probe.got, [key, next], "the stream goes on from the next keyframe")
    }

    /// A frame of more packets than the reorder window (a 720p keyframe is 40 or more), arriving in order, is still
    /// arriving, not lost: it is delivered whole and nothing is asked for.
    func testAFrameLongerThanTheReorderWindowIsNotGivenUp() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 16)
        let key = fakeVP8Frame(key: true, size: 40 * 100, fill: 1)
        let delta = fakeVP8Frame(key: false, size: 30 * 100, fill: 2)
        probe.insert(sender.send(key))
        probe.insert(sender.send(delta))
        XCTAssertEqual(probe.got.map(\.count), [key.count, delta.count])
        XCTAssertTrue(probe.got == [key, delta], "delivered byte for byte")
        XCTAssertEqual(probe.requests, [])
        XCTAssertEqual(probe.d.stats.unassemblable, 0)
    }

    /// `firstMissing` names the hole the stream waits on (the pipeline gives it up once no repair can come): not a
    /// frame longer than the reorder window still arriving in order, not numbers that carried FEC before the next
    /// picture, and nothing while a keyframe is awaited.
    func testFirstMissingIsTheHoleNotALongFrameNorFECNumbers() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 16)
        XCTAssertNil(probe.d.firstMissing, "nothing yet")
        let key = sender.send(fakeVP8Frame(key: true, size: 40 * 100, fill: 1))
        probe.insert(Array(key.dropLast()))
        XCTAssertNil(probe.d.firstMissing, "while a keyframe is awaited")
        probe.insert([key.last!])
        XCTAssertEqual(probe.got.count, 1)
        let long = sender.send(fakeVP8Frame(key: false, size: 40 * 100, fill: 2))
        probe.insert(Array(long.dropLast()))
        XCTAssertNil(probe.d.firstMissing, "a 40-packet frame still arriving in order is no hole")
        probe.insert([long.last!])
        sender.seq &+= 2  // two FEC packets
        let next = sender.send(fakeVP8Frame(key: false, size: 250, fill: 3))
        XCTAssertEqual(next.count, 3)
        probe.insert(Array(next.prefix(2)))
        XCTAssertEqual(probe.got.count, 2)
        XCTAssertNil(probe.d.firstMissing, "FEC numbers before the next picture are no hole")
        probe.insert([next[2]])
        let lossy = sender.send(fakeVP8Frame(key: false, size: 250, fill: 4))
        probe.insert([lossy[0], lossy[2]])
        XCTAssertEqual(probe.d.firstMissing.map { UInt16(truncatingIfNeeded: $0) }, lossy[1].sequenceNumber)
        probe.insert(sender.send(fakeVP8Frame(key: false, size: 90, fill: 5)))
        XCTAssertEqual(probe.d.firstMissing.map { UInt16(truncatingIfNeeded: $0) }, lossy[1].sequenceNumber,
                       "the same hole while later packets come")
        probe.insert([lossy[1]])
        XCTAssertNil(probe.d.firstMissing, "repaired")
        XCTAssertEqual(probe.got.count, 5)
        XCTAssertEqual(probe.requests, [])
    }

    /// `firstMissing` is tracked as packets come, not found by scanning the window on every packet: across the
    /// sequence-number wrap and with repairs out of order, filling the first of two holes moves it to the second, a
    /// later hole repaired first changes nothing, and a frame's last packet not come yet is no hole until a packet after
    /// it arrives.
    func testFirstMissingFollowsRepairsAcrossTheWrapAndReordering() {
        var sender = FakeVP8Sender()
        sender.seq = 65531
        var probe = DepacketizerProbe(reorderWindow: 16)
        func first() -> UInt16? { probe.d.firstMissing.map { UInt16(truncatingIfNeeded: $0) } }
        probe.insert(sender.send(fakeVP8Frame(key: true, size: 250, fill: 1)))
        XCTAssertEqual(probe.got.count, 1)
        let a = sender.send(fakeVP8Frame(key: false, size: 250, fill: 2))
        let b = sender.send(fakeVP8Frame(key: false, size: 250, fill: 3))
        let c = sender.send(fakeVP8Frame(key: false, size: 250, fill: 4))
        XCTAssertEqual(a.map(\.sequenceNumber), [65534, 65535, 0])
        probe.insert([a[0], a[2]])
        XCTAssertEqual(first(), 65535)
        probe.insert([b[0], b[2]])
        XCTAssertEqual(first(), 65535, "the first hole, not the second")
        probe.insert([c[1]])
        XCTAssertEqual(first(), 65535)
        probe.insert([a[1]])
        XCTAssertEqual(probe.got.count, 2)
        XCTAssertEqual(first(), b[1].sequenceNumber, "repaired after the wrap: the next hole")
        probe.insert([c[0]])
        XCTAssertEqual(first(), b[1].sequenceNumber, "a later hole repaired first")
        probe.insert([b[1]])
        XCTAssertEqual(probe.got.count, 3)
        XCTAssertNil(first(), "c's last packet has not come yet: nothing after it")
        let d = sender.send(fakeVP8Frame(key: false, size: 90, fill: 5))
        probe.insert(d)
        XCTAssertEqual(first(), c[2].sequenceNumber)
        probe.insert([c[2]])
        XCTAssertNil(first())
        XCTAssertEqual(probe.got.count, 5)
        XCTAssertEqual(probe.requests, [])
    }

    /// Every packet from the next expected number on is here, yet they make no frame (a frame's start never came
    /// under its number: here a sender's continuation packets take the numbers after the last frame): no repair can
    /// help, so after the reorder window the depacketizer gives up as for a loss and asks for a keyframe, instead of
    /// holding every later frame for ever while nobody asks.
    func testPacketsThatCanNeverMakeAFrameAreGivenUpLikeALoss() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 16)
        probe.insert(sender.send(fakeVP8Frame(key: true, size: 250)))
        XCTAssertEqual(probe.got.count, 1)
        var broken = sender.send(fakeVP8Frame(key: false, size: 350, fill: 7))
        broken.removeFirst()  // its start is gone, and its continuations are numbered from where the start would be
        for i in broken.indices { broken[i].sequenceNumber &-= 1 }
        sender.seq &-= 1
        probe.insert(broken)
        for i in 0..<20 { probe.insert(sender.send(fakeVP8Frame(key: false, size: 90, fill: UInt8(10 + i)))) }
        XCTAssertEqual(probe.got.count, 1, "nothing after the broken frame can be decoded")
        XCTAssertEqual(probe.requests, [.packetLoss(missing: 0)], "given up as lost once the window passed: a keyframe is asked for")
        XCTAssertEqual(probe.d.stats.unassemblable, 1)
        XCTAssertTrue(probe.d.isWaitingForKeyframe)
        probe.insert(sender.send(fakeVP8Frame(key: true, size: 250, fill: 3)))
        probe.insert(sender.send(fakeVP8Frame(key: false, size: 90, fill: 4)))
        XCTAssertEqual(probe.got.count, 3, "the keyframe and what follows it decode")
    }

    /// FEC packets share the media's sequence numbers (ULPFEC inside RED) and never reach the depacketizer: the next
    /// picture ID says a frame follows the last one across those numbers, so nothing waits and no keyframe is asked
    /// for; a whole missing frame (a picture ID skipped) still waits.
    func testFramesFollowByPictureIDAcrossNumbersThatCarriedFEC() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 16)
        var frames: [[UInt8]] = []
        for i in 0..<30 {
            let f = fakeVP8Frame(key: i == 0, size: 150 + 20 * (i % 4), fill: UInt8(i))
            frames.append(f)
            probe.insert(sender.send(f))
            sender.seq &+= UInt16(1 + i % 2)  // one or two FEC packets after each frame
        }
        XCTAssertEqual(probe.got, frames)
        XCTAssertEqual(probe.requests.count, 0)
        // A frame lost whole, FEC and all: its successor does not follow, and waits (here until the window gives up).
        _ = sender.send(fakeVP8Frame(key: false, size: 120, fill: 99))
        sender.seq &+= 1
        for i in 0..<10 { probe.insert(sender.send(fakeVP8Frame(key: false, size: 120, fill: UInt8(100 + i)))) }
        XCTAssertEqual(probe.got.count, 30)
        XCTAssertEqual(probe.requests.count, 1, "the loss is noticed")
    }

    /// The next picture may complete before the current one does (its last packet came late, repaired), with FEC
    /// numbers between them: once the current one completes, the next one held is delivered too, and those after.
    func testAPictureHeldAcrossFECNumbersIsDeliveredWhenTheOneBeforeCompletes() {
        var sender = FakeVP8Sender()
        var probe = DepacketizerProbe(reorderWindow: 64)
        let frames = (0..<6).map { fakeVP8Frame(key: $0 == 0, size: $0 == 2 ? 180 : 60, fill: UInt8($0)) }
        probe.insert(sender.send(frames[0]))
        probe.insert(sender.send(frames[1]))
        let third = sender.send(frames[2])  // two packets; its last one comes late
        XCTAssertEqual(third.count, 2)
        probe.insert([third[0]])
        sender.seq &+= 1  // an FEC packet
        probe.insert(sender.send(frames[3]))
        probe.insert([third[1]])
        probe.insert(sender.send(frames[4]))
        sender.seq &+= 2
        probe.insert(sender.send(frames[5]))
        XCTAssertEqual(probe.got, frames)
    }

    func testReorderedPacketsWithinWindowStillAssemble() {
        var sender = FakeVP8Sender()
        var d = VP8Depacketizer(reorderWindow: 8)
        let frames = [fakeVP8Frame(key: true, size: 350), fakeVP8Frame(key: false, size: 300, fill: 1), fakeVP8Frame(key: false, size: 150, fill: 2)]
        var packets = frames.flatMap { sender.send($0) }
        XCTAssertEqual(packets.count, 10)  // 4 + 4 + 2 packets
        packets.swapAt(1, 2)   // inside the keyframe
        packets.swapAt(3, 4)   // the keyframe's last packet after the next frame's first
        packets.swapAt(7, 9)   // the end of frame 2 after all of frame 3
        var got: [[UInt8]] = [], requests = 0
        for p in packets {
            d.insert(p) { if case .frame(let f) = $0 { got.append(Array(f.data)) } else { requests += 1 } }
        }
        XCTAssertEqual(got, frames)
        XCTAssertEqual(requests, 0)
        // A duplicate of a delivered packet is ignored.
        d.insert(packets[2]) { _ in XCTFail("duplicate must not produce output") }
        XCTAssertEqual(d.stats.latePackets, 1)
    }

    func testLostPacketYieldsKeyframeRequestAndNoBrokenFrames() {
        var sender = FakeVP8Sender()
        var d = VP8Depacketizer(reorderWindow: 4)
        var events: [String] = []
        func feed(_ packets: [RTPPacket]) {
            for p in packets {
                d.insert(p) { e in
                    switch e {
                    case .frame(let f): events.append(f.isKeyframe ? "K" : "D")
                    case .keyframeRequest(let r): events.append("R:\(r)")
                    }
                }
            }
        }
        feed(sender.send(fakeVP8Frame(key: true, size: 300)))
        var lossy = sender.send(fakeVP8Frame(key: false, size: 300))
        lossy.remove(at: 1)   // a middle packet of a delta frame is lost
        feed(lossy)
        for _ in 0..<4 { feed(sender.send(fakeVP8Frame(key: false, size: 120))) }
        XCTAssertEqual(events.first, "K")
        XCTAssertEqual(events.filter { $0.hasPrefix("R:") }.count, 1, "\(events)")
        XCTAssertTrue(events.contains("R:packetLoss(missing: 1)"), "\(events)")
        XCTAssertEqual(events.filter { $0 == "D" }.count, 0, "no delta frame may pass after the loss: \(events)")
        XCTAssertTrue(d.isWaitingForKeyframe)
        XCTAssertGreaterThan(d.stats.framesDropped, 0)
        // The sender answers with a keyframe; decoding resumes.
        feed(sender.send(fakeVP8Frame(key: true, size: 300)))
        feed(sender.send(fakeVP8Frame(key: false, size: 100)))
        XCTAssertEqual(Array(events.suffix(2)), ["K", "D"])
        XCTAssertFalse(d.isWaitingForKeyframe)
    }

    func testStreamStartingWithDeltaFramesAsksForKeyframe() {
        var sender = FakeVP8Sender()
        var d = VP8Depacketizer()
        var requests: [KeyframeRequestReason] = [], frames = 0
        for _ in 0..<3 {
            for p in sender.send(fakeVP8Frame(key: false, size: 150)) {
                d.insert(p) { if case .keyframeRequest(let r) = $0 { requests.append(r) } else { frames += 1 } }
            }
        }
        XCTAssertEqual(requests, [.noKeyframeYet])
        XCTAssertEqual(frames, 0)
    }
}
