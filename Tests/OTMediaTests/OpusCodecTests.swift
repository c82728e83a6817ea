import XCTest
@testable import OTMedia
import OTWire

final class OpusCodecTests: XCTestCase {
    func roundTrip(_ enc: OpusAudioEncoder, _ dec: OpusAudioDecoder, frequencies: [Double], frames: Int) throws -> [Int16] {
        var packet: [UInt8] = [], pcm: [Int16] = [], out: [Int16] = []
        let n = enc.config.samplesPerFrame
        for i in 0..<frames {
            try enc.encode(tone(frequencies: frequencies, startSample: i * n, count: n)[...], into: &packet)
            XCTAssertEqual(try OpusPayload.packetInfo(packet[...]).samples, 960)
            XCTAssertEqual(try dec.decode(packet[...], into: &pcm), n)
            out += pcm
        }
        return out
    }

    func testToneKeepsItsFrequency() throws {
        let enc = try OpusAudioEncoder(config: OpusEncoderConfig())
        let dec = try OpusAudioDecoder()
        let out = try roundTrip(enc, dec, frequencies: [1000], frames: 50)
        let steady = Array(out[4800...])  // skip the codec's start-up
        let zc = zeroCrossingFrequency(steady)
        XCTAssertEqual(zc, 1000, accuracy: 20, "zero-crossing frequency \(zc) Hz")
        let at = goertzel(steady, frequency: 1000)
        XCTAssertGreaterThan(at, 100 * goertzel(steady, frequency: 700))
        XCTAssertGreaterThan(at, 100 * goertzel(steady, frequency: 1400))
    }

    func testStereoKeepsEachChannelsFrequency() throws {
        let enc = try OpusAudioEncoder(config: OpusEncoderConfig(channels: 2, bitrateBps: 64_000))
        let dec = try OpusAudioDecoder(channels: 2)
        let out = try roundTrip(enc, dec, frequencies: [440, 1200], frames: 50)
        let steady = Array(out[9600...])
        XCTAssertEqual(zeroCrossingFrequency(steady, channels: 2, channel: 0), 440, accuracy: 15)
        XCTAssertEqual(zeroCrossingFrequency(steady, channels: 2, channel: 1), 1200, accuracy: 25)
    }

    func testLossConcealmentAndFECRecovery() throws {
        let enc = try OpusAudioEncoder(config: OpusEncoderConfig(fec: true, expectedLossPercent: 20))
        XCTAssertTrue(enc.config.fec)
        let dec = try OpusAudioDecoder()
        var packets: [[UInt8]] = []
        var packet: [UInt8] = []
        for i in 0..<30 {
            try enc.encode(tone(frequencies: [600], startSample: i * 960, count: 960)[...], into: &packet)
            packets.append(packet)
        }
        var pcm: [Int16] = []
        for p in packets[0..<20] { try dec.decode(p[...], into: &pcm) }
        // Packet 20 is lost: rebuild it from packet 21's FEC data, then decode 21.
        XCTAssertEqual(try dec.recoverWithFEC(from: packets[21][...], samples: 960, into: &pcm), 960)
        XCTAssertGreaterThan(goertzel(pcm, frequency: 600), 100 * goertzel(pcm, frequency: 1500), "FEC carries the tone")
        try dec.decode(packets[21][...], into: &pcm)
        // Packet 22 is lost with nothing after it: conceal.
        XCTAssertEqual(try dec.concealLoss(samples: 960, into: &pcm), 960)
        XCTAssertGreaterThan(pcm.map { abs(Int($0)) }.max() ?? 0, 500, "concealment continues the signal")
        XCTAssertThrowsError(try dec.decode([][...], into: &pcm))
    }

    func testDTXShrinksSilence() throws {
        let silence = [Int16](repeating: 0, count: 960)
        var packet: [UInt8] = []
        func sizes(dtx: Bool) throws -> [Int] {
            let enc = try OpusAudioEncoder(config: OpusEncoderConfig(dtx: dtx))
            var s: [Int] = []
            for _ in 0..<40 { s.append(try enc.encode(silence[...], into: &packet)) }
            return s
        }
        let on = try sizes(dtx: true), off = try sizes(dtx: false)
        XCTAssertGreaterThan(on.filter { $0 <= OpusPayload.dtxMaxLength }.count, 10, "\(on)")
        XCTAssertLessThan(on.reduce(0, +), off.reduce(0, +))
        let enc = try OpusAudioEncoder(config: OpusEncoderConfig())
        try enc.setDTX(true); try enc.setBitrate(16_000); try enc.setComplexity(5)
        XCTAssertEqual(enc.config.bitrateBps, 16_000)
        XCTAssertThrowsError(try enc.encode([Int16](repeating: 0, count: 100)[...], into: &packet))
    }
}
