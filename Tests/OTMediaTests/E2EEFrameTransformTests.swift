import OTBase
@testable import OTMedia
import OTWire
import XCTest
import Foundation

/// AES-256-GCM per-frame encryption: round trips, clear prefixes, tampering, wrong keys, IV uniqueness, bad input.
final class E2EEFrameTransformTests: XCTestCase {
    static let key = try? E2EEKey(secret: "correct horse battery")
    let audio = EncodedFrameInfo(kind: .audio, ssrc: 1, rtpTimestamp: 960, isKeyframe: false)
    let keyframe = EncodedFrameInfo(kind: .video, ssrc: 2, rtpTimestamp: 3000, isKeyframe: true)
    let delta = EncodedFrameInfo(kind: .video, ssrc: 2, rtpTimestamp: 6000, isKeyframe: false)

    func transform() throws -> E2EEFrameTransform { try E2EEFrameTransform(key: XCTUnwrap(Self.key)) }

    func encrypt(_ t: E2EEFrameTransform, _ frame: [UInt8], _ info: EncodedFrameInfo) throws -> [UInt8] {
        var out: [UInt8] = []
        try frame.withUnsafeBytes { try t.transformOutgoing($0, info: info, into: &out) }
        return out
    }

    func decrypt(_ t: E2EEFrameTransform, _ frame: [UInt8], _ info: EncodedFrameInfo) throws -> [UInt8] {
        var out: [UInt8] = []
        try frame.withUnsafeBytes { try t.transformIncoming($0, info: info, into: &out) }
        return out
    }

    func testAudioAndVideoFramesRoundTripWithTheirHeadersInClear() throws {
        let sender = try transform(), receiver = try transform()
        let opus: [UInt8] = [0x78] + (0..<60).map { UInt8($0) }
        let vp8Key: [UInt8] = [0x50, 0x42, 0x00, 0x9d, 0x01, 0x2a, 0x40, 0x01, 0xf0, 0x00] + (0..<900).map { UInt8($0 & 0xFF) }
        let vp8Delta: [UInt8] = [0x31, 0x07, 0x00] + (0..<200).map { UInt8(($0 * 7) & 0xFF) }
        for (frame, info, clear) in [(opus, audio, 1), (vp8Key, keyframe, 10), (vp8Delta, delta, 3)] {
            let sealed = try encrypt(sender, frame, info)
            XCTAssertEqual(sealed.count, frame.count + E2EEFrameTransform.overhead)
            XCTAssertEqual(Array(sealed[..<clear]), Array(frame[..<clear]), "the header the receiver reads stays in clear")
            XCTAssertEqual(sealed[clear], E2EEFrameTransform.version)
            let body = sealed[(clear + E2EEFrameTransform.headerLength)...].prefix(frame.count - clear)
            XCTAssertNotEqual(Array(body), Array(frame[clear...]), "the rest is encrypted")
            XCTAssertEqual(try decrypt(receiver, sealed, info), frame)
        }
        XCTAssertEqual(sender.counters.framesEncrypted, 3)
        XCTAssertEqual(receiver.counters, E2EEFrameTransform.Counters(framesEncrypted: 0, framesDecrypted: 3, decryptionFailures: 0))
    }

    /// The clear prefix is the frame's payload format's: a format that needs 6 bytes readable gets 6.
    func testTheClearPrefixIsTheFormats() throws {
        struct SixByteHeaderFormat: RTPPayloadFormat {
            var name: String { "X-SIX" }
            var kind: MediaKind { .video }
            var clockRate: UInt32 { 90_000 }
            var rtcpFeedback: [String] { [] }
            var preferredPayloadType: UInt8 { 120 }
            func isKeyframeStart(_ payload: ArraySlice<UInt8>) -> Bool { false }
            func frameID(_ payload: ArraySlice<UInt8>) -> UInt16? { nil }
            func clearPrefixLength(isKeyframe: Bool) -> Int { 6 }
            func makePacketizer(maxPayloadSize: Int) -> OpusPacketizer { OpusPacketizer(maxPayloadSize: maxPayloadSize) }
            func makeDepacketizer(reorderWindow: Int) -> OpusDepacketizer { OpusDepacketizer() }
        }
        let info = EncodedFrameInfo(kind: .video, ssrc: 1, rtpTimestamp: 0, isKeyframe: false, format: SixByteHeaderFormat())
        let frame = (0..<100).map { UInt8($0) }
        let sealed = try encrypt(try transform(), frame, info)
        XCTAssertEqual(Array(sealed[..<6]), Array(frame[..<6]))
        XCTAssertEqual(sealed[6], E2EEFrameTransform.version)
        XCTAssertEqual(try decrypt(try transform(), sealed, info), frame)
    }

    func testFramesShorterThanTheClearPrefixAndEmptyFramesRoundTrip() throws {
        let t = try transform()
        for frame in [[], [0x50], [0x50, 0x42, 0x00, 0x9d]] as [[UInt8]] {
            XCTAssertEqual(try decrypt(t, encrypt(t, frame, keyframe), keyframe), frame)
        }
    }

    func testAnyAlteredByteFailsAuthenticationAndIsCounted() throws {
        let sender = try transform(), receiver = try transform()
        let frame: [UInt8] = [0x50, 0x42, 0x00, 0x9d, 0x01, 0x2a, 0x40, 0x01, 0xf0, 0x00] + Array(repeating: 0xAB, count: 100)
        let sealed = try encrypt(sender, frame, keyframe)
        // The clear prefix (authenticated), the IV, the ciphertext and the tag.
        for index in [0, 9, 11, 30, sealed.count - 1] {
            var altered = sealed
            altered[index] ^= 0x01
            XCTAssertThrowsError(try decrypt(receiver, altered, keyframe)) {
                XCTAssertEqual($0 as? FrameDecryptionError, .authenticationFailed, "byte \(index)")
            }
        }
        XCTAssertEqual(receiver.counters.decryptionFailures, 5)
        XCTAssertEqual(try decrypt(receiver, sealed, keyframe), frame, "a failure leaves the transform usable")
    }

    func testAnotherSecretCannotDecrypt() throws {
        let sender = try transform()
        let other = try E2EEFrameTransform(secret: "another secret")
        let sealed = try encrypt(sender, Array(repeating: 0x42, count: 50), audio)
        var out: [UInt8] = [1, 2, 3]
        XCTAssertThrowsError(try sealed.withUnsafeBytes { try other.transformIncoming($0, info: audio, into: &out) }) {
            XCTAssertEqual($0 as? FrameDecryptionError, .authenticationFailed)
        }
        XCTAssertTrue(out.isEmpty, "no partial plaintext is handed on")
        XCTAssertEqual(other.counters.decryptionFailures, 1)
    }

    func testKeyDerivationIsDeterministicAndSecretDependent() throws {
        XCTAssertEqual(try E2EEKey(secret: "correct horse battery"), Self.key)
        XCTAssertNotEqual(try E2EEKey(secret: "correct horse batterY"), Self.key)
        XCTAssertEqual(Self.key?.bytes.count, 32)
    }

    func testIVsNeverRepeatWithinOrAcrossSenders() throws {
        let a = try transform(), b = try transform()
        var ivs = Set<[UInt8]>()
        for t in [a, b] {
            for i in 0..<500 {
                let sealed = try encrypt(t, [0x78, UInt8(i & 0xFF)], i % 2 == 0 ? audio : delta)
                let clear = i % 2 == 0 ? 1 : 2
                ivs.insert(Array(sealed[(clear + 1)..<(clear + 1 + E2EEFrameTransform.ivLength)]))
            }
        }
        XCTAssertEqual(ivs.count, 1000)
    }

    func testMalformedInputThrowsInsteadOfTrapping() throws {
        let t = try transform()
        for n in 0..<E2EEFrameTransform.overhead {
            XCTAssertThrowsError(try decrypt(t, Array(repeating: 0x01, count: n), delta)) {
                XCTAssertEqual($0 as? FrameDecryptionError, .truncated(length: n))
            }
        }
        var sealed = try encrypt(t, [0x31, 0x07, 0x00, 9, 9, 9], delta)
        sealed[3] = 7
        XCTAssertThrowsError(try decrypt(t, sealed, delta)) { XCTAssertEqual($0 as? FrameDecryptionError, .unknownVersion(7)) }
        var random = SystemRandomNumberGenerator()
        for n in [29, 30, 40, 200] {
            let junk = (0..<n).map { _ in UInt8.random(in: 0...255, using: &random) }
            XCTAssertThrowsError(try decrypt(t, junk, keyframe))
        }
        XCTAssertEqual(t.counters.decryptionFailures, E2EEFrameTransform.overhead + 5)
    }

    /// Round trips many frames of typical sizes; prints the per-frame cost (docs/e2ee.md; not asserted).
    func testManyFramesRoundTripAndFigures() throws {
        let sender = try transform(), receiver = try transform()
        for (size, info) in [(10_000, delta), (120, audio)] {
            let frame = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            var sealed: [UInt8] = [], plain: [UInt8] = []
            let n = 5_000
            let start = Date()
            for _ in 0..<n {
                try frame.withUnsafeBytes { try sender.transformOutgoing($0, info: info, into: &sealed) }
                try sealed.withUnsafeBytes { try receiver.transformIncoming($0, info: info, into: &plain) }
            }
            let micros = Date().timeIntervalSince(start) / Double(n) * 1e6
            XCTAssertEqual(plain, frame)
            print(String(format: "[figures] e2ee %d-byte %@ frame: encrypt + decrypt %.1f us", size, info.kind.rawValue, micros))
        }
        XCTAssertEqual(receiver.counters.framesDecrypted, 10_000)
        let start = Date()
        _ = try E2EEKey(secret: "a measured secret")
        print(String(format: "[figures] e2ee key derivation (PBKDF2-SHA256, %d rounds) %.1f ms", E2EEKey.iterations,
                     Date().timeIntervalSince(start) * 1000))
    }
}
