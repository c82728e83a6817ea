import Foundation
import OTBase
@testable import OTServer
import OTTransport
import OTWire
import Synchronization
import XCTest

/// The router forwards the publisher's codec, whatever it is: VP9 here, its keyframe gate asking the VP9 format.
final class RouterCodecTests: RouterTestCase {
    /// The router's answer to `client`'s offer (not yet applied).
    func answer(_ client: RouterClient, peer: String, _ dir: MediaDirection) throws -> Result<String, OTError> {
        let offer = try client.driver.createOffer()
        let result = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: "sess", connectionId: "c-\(peer)", peerId: peer, streamId: "st1",
                                             direction: dir, sdp: offer)) { r in result.withLock { $0 = r } }
        XCTAssertTrue(waitFor { result.withLock { $0 != nil } })
        return try XCTUnwrap(result.withLock { $0 })
    }

    /// One-packet VP9 pictures: a keyframe (P clear, keyframe header) or a delta frame.
    func vp9(seq: UInt16, keyframe: Bool) -> [UInt8] {
        var payload: [UInt8] = []
        VP9PayloadDescriptor(interPicture: !keyframe, startOfFrame: true, endOfFrame: true, pictureId: seq & 0x7FFF).write(into: &payload)
        // Uncompressed header: marker, profile 0, frame type, then (keyframe) sync code, BT.601, 320×240.
        payload += keyframe ? [0x82, 0x49, 0x83, 0x42, 0x20, 0x13, 0xF0, 0x0E, 0xF0] : [0x86, 0x00]
        return RTPPacket(marker: true, payloadType: 98, sequenceNumber: seq, timestamp: UInt32(seq) * 3000, ssrc: Self.video,
                         payload: payload[...]).serialized()
    }

    func testAVP9PublisherIsForwardedFromAKeyframeToASubscriberAnsweredWithVP9Only() throws {
        router = try MediaRouter()
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video, videoFormats: [PayloadFormats.vp9, PayloadFormats.vp8])
        let sub = try RouterClient(videoFormats: PayloadFormats.video)
        clients = [pub, sub]
        let pubAnswer = try answer(pub, peer: "pub", .publish).get()
        XCTAssertTrue(pubAnswer.contains("a=rtpmap:98 VP9/90000"), "the publisher's first choice: \(pubAnswer)")
        try pub.driver.setRemoteAnswer(pubAnswer)
        let subAnswer = try answer(sub, peer: "sub", .subscribe).get()
        XCTAssertTrue(subAnswer.contains("VP9/90000"), subAnswer)
        XCTAssertFalse(subAnswer.contains("VP8/90000"), "only the publisher's codec: \(subAnswer)")
        try sub.driver.setRemoteAnswer(subAnswer)
        XCTAssertEqual(sub.driver.negotiated?.media.first { $0.kind == "video" }?.format?.name, "VP9")
        XCTAssertTrue(waitFor { pub.connected && sub.connected })
        // Delta frames are held at the gate until the format says a keyframe starts.
        var seq: UInt16 = 100
        func send(keyframe: Bool) { var p = vp9(seq: seq, keyframe: keyframe); XCTAssertTrue(pub.driver.sendRTP(&p)); seq += 1 }
        for _ in 0..<5 { send(keyframe: false) }
        XCTAssertTrue(waitFor { pub.keyframeRequests > 0 }, "the new subscriber's keyframe is asked for")
        send(keyframe: true)
        for _ in 0..<5 { send(keyframe: false) }
        XCTAssertTrue(waitFor { sub.received(ssrc: Self.video).count == 6 })
        let got = sub.received(ssrc: Self.video)
        XCTAssertTrue(PayloadFormats.vp9.isKeyframeStart(got[0].payload[...]), "forwarding starts at the keyframe")
        XCTAssertEqual(got.map { PayloadFormats.vp9.frameID($0.payload[...]) }, (105..<111).map { UInt16($0) })
    }

    func testASubscriberWithoutThePublishersCodecIsRefusedWithAClearError() throws {
        router = try MediaRouter()
        let pub = try RouterClient(audioSSRC: Self.audio, videoSSRC: Self.video, videoFormats: [PayloadFormats.vp9])
        let vp8Only = try RouterClient()
        clients = [pub, vp8Only]
        try pub.driver.setRemoteAnswer(try answer(pub, peer: "pub", .publish).get())
        XCTAssertThrowsError(try answer(vp8Only, peer: "sub", .subscribe).get()) {
            let e = $0 as? OTError
            XCTAssertEqual(e?.code, .invalidParameter)
            XCTAssertTrue(e?.message.contains("VP9") == true, "\(String(describing: e))")
        }
        XCTAssertEqual(router.peerCount, 1, "no connection is kept for the refused subscriber")
    }
}
