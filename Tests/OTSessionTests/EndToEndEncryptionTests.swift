import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import XCTest

/// End-to-end encrypted sessions through the real server and media router on loopback: the router forwards frames
/// it cannot read; only subscribers with the publisher's secret decode them.
final class EndToEndEncryptionTests: RoutedServerTestCase {
    func e2eeSession() throws -> String { try server.server.createSession(apiKey: server.project.apiKey, e2ee: true) }

    func code(_ body: () throws -> Void) -> Int32? {
        do { try body(); return nil } catch { return (error as? OTError)?.code.rawValue ?? -1 }
    }

    func testTheSameSecretDecodesVideoAndAudioThroughTheRouter() throws {
        let sid = try e2eeSession()
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        XCTAssertTrue(a.isEndToEndEncrypted, "the connect reply says the session is end-to-end encrypted")
        XCTAssertFalse(a.isRelayed)
        try a.setEncryptionSecret("our shared secret")
        try b.setEncryptionSecret("our shared secret")
        let (publisher, _, stream) = try publishTone(a, seenBy: bRec)
        let (subscriber, subRec, _) = try subscribe(b, to: stream, frames: 15)
        subRec.wait("1 s of audio") { $0.audioTotal >= 48_000 }

        let stamps = subRec.stamps
        XCTAssertGreaterThanOrEqual(stamps.count, 10, "decrypted frames decode to the readable test pattern")
        for (x, y) in zip(stamps, stamps.dropFirst()) { XCTAssertLessThan(x.frameNumber, y.frameNumber) }
        let (pcm, rate) = subRec.audio
        XCTAssertEqual(toneFrequency(pcm.suffix(24_000), sampleRate: rate), 440, accuracy: 15, "the decrypted audio is the 440 Hz tone")
        XCTAssertFalse(subRec.events.contains(.failed(OTErrorCode.encryptionSecretMismatch.rawValue)))
        XCTAssertGreaterThan(publisher.stats.videoBytesSent, 0)
        XCTAssertGreaterThan(subscriber.stats.framesDecoded, 10)
    }

    func testAnotherSecretGivesAMismatchErrorAndNoPictures() throws {
        let sid = try e2eeSession()
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        try a.setEncryptionSecret("the publisher's secret")
        try b.setEncryptionSecret("another secret entirely")
        let (_, _, stream) = try publishTone(a, seenBy: bRec)
        let subRec = MediaRecorder("wrong secret")
        let subscriber = Subscriber(stream: stream, delegate: subRec)
        try b.subscribe(subscriber)
        subRec.waitFor(.failed(OTErrorCode.encryptionSecretMismatch.rawValue))
        XCTAssertTrue(subRec.failureMessages.contains { $0.contains("encryption secret") }, "\(subRec.failureMessages)")
        let deadline = Date().addingTimeInterval(15)
        while subscriber.stats.videoPacketsReceived < 40 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertGreaterThanOrEqual(subscriber.stats.videoPacketsReceived, 40, "the router forwards the encrypted media")
        XCTAssertEqual(subRec.frames, 0, "no undecryptable frame is rendered")
        XCTAssertEqual(subscriber.stats.framesDecoded, 0)
        XCTAssertTrue(subRec.audio.samples.allSatisfy { $0 == 0 }, "no undecryptable audio is played")
        XCTAssertEqual(subRec.events.filter { $0 == .failed(OTErrorCode.encryptionSecretMismatch.rawValue) }.count, 1,
                       "the mismatch is reported once, not per frame")
    }

    func testSecretsOutside8To256CharactersAreRejected() throws {
        let s = Session(apiKey: server.project.apiKey, sessionId: try e2eeSession(), delegate: nil,
                        settings: SessionSettings(serverURL: server.server.signalingURL))
        for bad in ["", "short", String(repeating: "x", count: 7), String(repeating: "x", count: 257)] {
            XCTAssertEqual(code { try s.setEncryptionSecret(bad) }, 1030, "\(bad.count) characters")
        }
        for good in [String(repeating: "x", count: 8), String(repeating: "é", count: 8), String(repeating: "x", count: 256)] {
            XCTAssertNil(code { try s.setEncryptionSecret(good) }, "\(good.count) characters")
        }
    }

    func testPublishingOrSubscribingWithoutASecretFails() throws {
        let sid = try e2eeSession()
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }
        let pubRec = MediaRecorder("no secret")
        XCTAssertEqual(code { try a.publish(try tonePublisher(pubRec)) }, 1031, "publishing without a secret")
        try a.setEncryptionSecret("our shared secret")
        let custom = try Publisher(delegate: nil, settings: PublisherSettings(videoSource: .testPattern, width: 320, height: 240, fps: 15,
                                                                             frameTransform: XORTransform(key: 1)))
        XCTAssertEqual(code { try a.publish(custom) }, 1011, "a custom transform does not replace end-to-end encryption")
        let (_, _, stream) = try publishTone(a, seenBy: bRec)
        XCTAssertEqual(code { try b.subscribe(Subscriber(stream: stream, delegate: nil)) }, 1031, "subscribing without a secret")
    }

    func testEndToEndEncryptionNeedsARoutedSession() throws {
        XCTAssertEqual(code { _ = try server.server.createSession(apiKey: server.project.apiKey, relayed: true, e2ee: true) }, 1011)
        let plain = try server.session()
        let (c, _) = try server.client(plain, name: "C")
        defer { try? c.disconnect() }
        XCTAssertFalse(c.isEndToEndEncrypted)
    }
}
