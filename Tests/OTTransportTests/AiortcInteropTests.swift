import Foundation
import OTBase
import OTTestSupport
import OTWire
@testable import OTTransport
import Synchronization
import XCTest

/// Our transport against an aiortc peer (PyPI `aiortc`) on 127.0.0.1: SDP over the script's stdin/stdout,
/// ICE, DTLS-SRTP, and SRTP packets both ways. Run with: swift test --filter AiortcInteropTests
final class AiortcInteropTests: XCTestCase {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/aiortc_peer.py")

    struct Exchange { var rtpOK = 0, rtcpOK = 0, bad = 0; var stats: [String: Any] = [:]; var connectedMs = -1.0 }

    /// Sends 100 Opus SRTP packets (20 ms silence frames, paced at 20 ms), then unprotects what aiortc sent.
    func exchangeSRTP(_ peer: LoopbackPeer, _ keys: SRTPKeyingMaterial, payloadType: UInt8, ourSSRC: UInt32,
                      remoteSSRC: UInt32?, _ reader: JSONLines) throws -> Exchange {
        let srtp = try SRTPContext(profile: keys.profile, keys: keys.srtpKeys)
        for i in 0..<100 {
            var w = ByteWriter()
            w.u8(0x80); w.u8(payloadType | (i == 0 ? 0x80 : 0)); w.u16(UInt16(1000 + i)); w.u32(UInt32(i * 960)); w.u32(ourSSRC)
            w.append([0xF8, 0xFF, 0xFE])
            var protected = w.bytes
            try srtp.protectRTP(&protected)
            peer.withTransport { _ = $0?.sendMedia(protected) }
            peer.driver.wake()
            usleep(20_000)
        }
        var x = Exchange()
        x.connectedMs = reader.json(where: "event", is: "connected")?["ms"] as? Double ?? -1
        x.stats = try XCTUnwrap(reader.json(where: "event", is: "stats", timeout: 20))
        for e in peer.events.withLock({ $0 }) {
            guard case .srtp(let bytes, let isRTCP) = e else { continue }
            var plain = bytes
            do { if isRTCP { try srtp.unprotectRTCP(&plain) } else { try srtp.unprotectRTP(&plain) } } catch { x.bad += 1; continue }
            if isRTCP { x.rtcpOK += 1; continue }
            guard plain.count > 12 else { continue }
            let ssrc = UInt32(plain[8]) << 24 | UInt32(plain[9]) << 16 | UInt32(plain[10]) << 8 | UInt32(plain[11])
            if plain[1] & 0x7F == payloadType, remoteSSRC.map({ $0 == ssrc }) ?? true { x.rtpOK += 1 }
        }
        return x
    }

    /// Our side of a call: a loopback socket, a certificate, an ICE agent in `role` with fresh credentials, and the
    /// local SDP parameters with the socket's host candidate.
    static func ourSide(role: ICERole, seed: UInt64) throws -> (LoopbackPeer, DTLSCertificate, ICEAgent, SDPLocalParameters) {
        let peer = try LoopbackPeer()
        let cert = try DTLSCertificate()
        var rng = SystemRandomNumberGenerator()
        let cred = ICEConfig.randomCredentials(using: &rng)
        let ice = ICEAgent(config: ICEConfig(role: role, localUfrag: cred.ufrag, localPwd: cred.pwd, tieBreaker: .random(in: 0 ... .max), seed: seed))
        var local = SDPLocalParameters(iceUfrag: cred.ufrag, icePwd: cred.pwd, fingerprint: cert.fingerprint)
        local.candidates = [try XCTUnwrap(ice.addLocalCandidate(peer.address))]
        local.endOfCandidates = true
        return (peer, cert, ice, local)
    }

    static func startAiortc(_ args: [String]) throws -> (Process, Pipe, JSONLines, Pipe) {
        let child = try PythonChild(script, args)
        return (child.process, child.stdin, child.output, child.stderr)
    }

    /// We offer (audio sendrecv + video VP8/RTX), aiortc answers: ICE controlling here, DTLS server here.
    func testOurOfferAcceptedByAiortcWithDTLSServerRole() throws {
        let (proc, stdin, reader, stderr) = try Self.startAiortc(["answer", "3"])
        defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }
        let (peer, cert, ice, localParameters) = try Self.ourSide(role: .controlling, seed: 9)
        defer { peer.driver.stop() }
        var local = localParameters
        let ourSSRC: UInt32 = 0x4242_0002
        local.audioTrack = SDPLocalTrack(ssrc: ourSSRC, streamID: "ot", trackID: "ot-audio", cname: "libotsession")
        local.videoTrack = SDPLocalTrack(ssrc: 0x4242_0003, rtxSSRC: 0x4242_0004, streamID: "ot", trackID: "ot-video", cname: "libotsession")
        let offer = SDPNegotiation.offer(local)
        XCTAssertNotNil(reader.json(where: "event", is: "ready", timeout: 60), "aiortc did not start")
        let start = MonotonicClock.now()
        stdin.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["type": "offer", "sdp": offer.serialized()]) + Data("\n".utf8))
        guard let answerMsg = reader.json(where: "type", is: "answer", timeout: 60), let answerText = answerMsg["sdp"] as? String else {
            return XCTFail("no answer from aiortc: \(PythonChild.stopAndReadStderr(proc, stderr))")
        }
        let neg = try SDPNegotiation.accept(answer: try SessionDescription.parse(answerText), offer: offer)
        XCTAssertFalse(neg.localIsDTLSClient, "aiortc answers a=setup:active")
        XCTAssertEqual(neg.media.map(\.kind), ["audio", "video"])
        XCTAssertEqual(neg.media.last?.codec.name, "VP8")
        let opus = try XCTUnwrap(neg.media.first?.codec)
        ice.setRemoteCredentials(ufrag: neg.remoteIceUfrag, pwd: neg.remoteIcePwd)
        neg.remoteCandidates.forEach(ice.addRemoteCandidate)
        let dtls = try DTLSEndpoint(role: .server, certificate: cert, remoteFingerprint: neg.remoteFingerprint)
        peer.install(MediaTransport(ice: ice, dtls: dtls))
        XCTAssertTrue(LoopbackPeer.wait(seconds: 20) { peer.has(isDTLSConnected) }, "events: \(peer.events.withLock { $0 })")
        let setup = MonotonicClock.now() - start
        let keys = try XCTUnwrap(peer.withTransport { $0?.dtls.keyingMaterial })
        let x = try exchangeSRTP(peer, keys, payloadType: opus.payloadType, ourSSRC: ourSSRC, remoteSSRC: neg.media.first?.remoteSSRCs.first, reader)
        XCTAssertGreaterThan(x.rtpOK, 50, "aiortc's Opus SRTP packets we could unprotect")
        XCTAssertEqual(x.bad, 0)
        XCTAssertGreaterThan(x.stats["packetsReceived"] as? Int ?? 0, 50, "our SRTP packets aiortc accepted")
        XCTAssertGreaterThan(x.stats["framesDecoded"] as? Int ?? 0, 10, "aiortc decoded our Opus frames")
        print("INTEROP_SETUP_OFFERER ours(offer sent->DTLS connected) ms: \(Double(setup.microseconds) / 1000); aiortc(offer received->connected) ms: \(x.connectedMs); profile: \(keys.profile)")
    }

    func testICEAndDTLSSRTPWithAiortcBothWays() throws {
        let (proc, stdin, reader, stderr) = try Self.startAiortc(["3"])
        defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }

        guard let offerMsg = reader.json(where: "type", is: "offer", timeout: 60), let offerText = offerMsg["sdp"] as? String else {
            let err = PythonChild.stopAndReadStderr(proc, stderr)
            return XCTFail("no offer from aiortc (is `pip install aiortc` done?): \(err)")
        }
        let start = MonotonicClock.now()
        let offer = try SessionDescription.parse(offerText)

        // Our side: answerer, ICE controlled, DTLS client (a=setup:active).
        let (peer, cert, ice, localParameters) = try Self.ourSide(role: .controlled, seed: 7)
        defer { peer.driver.stop() }
        var local = localParameters
        local.video = false
        let ourSSRC: UInt32 = 0x4242_0001
        local.audioTrack = SDPLocalTrack(ssrc: ourSSRC, streamID: "ot-stream", trackID: "ot-audio", cname: "libotsession")
        let (answer, neg) = try SDPNegotiation.answer(to: offer, local: local)
        let opus = try XCTUnwrap(neg.media.first?.codec)
        XCTAssertEqual(opus.name.lowercased(), "opus")
        let remoteSSRC = try XCTUnwrap(neg.media.first?.remoteSSRCs.first)
        ice.setRemoteCredentials(ufrag: neg.remoteIceUfrag, pwd: neg.remoteIcePwd)
        neg.remoteCandidates.forEach(ice.addRemoteCandidate)
        XCTAssertTrue(neg.localIsDTLSClient)
        let dtls = try DTLSEndpoint(role: .client, certificate: cert, remoteFingerprint: neg.remoteFingerprint)
        peer.install(MediaTransport(ice: ice, dtls: dtls))
        let answerLine = try JSONSerialization.data(withJSONObject: ["type": "answer", "sdp": answer.serialized()])
        stdin.fileHandleForWriting.write(answerLine + Data("\n".utf8))

        XCTAssertTrue(LoopbackPeer.wait(seconds: 20) { peer.has(isDTLSConnected) }, "events: \(peer.events.withLock { $0 })")
        let ourSetup = MonotonicClock.now() - start
        let keys = try XCTUnwrap(peer.withTransport { $0?.dtls.keyingMaterial })

        let x = try exchangeSRTP(peer, keys, payloadType: opus.payloadType, ourSSRC: ourSSRC, remoteSSRC: remoteSSRC, reader)
        let (rtpOK, rtcpOK, bad, stats, connected) = (x.rtpOK, x.rtcpOK, x.bad, x.stats, x.connectedMs)
        XCTAssertGreaterThan(rtpOK, 50, "aiortc's Opus SRTP packets we could unprotect")
        XCTAssertEqual(bad, 0)
        XCTAssertGreaterThan(stats["packetsReceived"] as? Int ?? 0, 50, "our SRTP packets aiortc accepted")
        XCTAssertGreaterThan(stats["framesDecoded"] as? Int ?? 0, 10, "aiortc decoded our Opus frames")
        print("INTEROP_SETUP ours(offer received->DTLS connected) ms: \(Double(ourSetup.microseconds) / 1000); aiortc(offer created->connected) ms: \(connected); profile: \(keys.profile); rtp in: \(rtpOK), rtcp in: \(rtcpOK), aiortc received: \(stats["packetsReceived"] ?? 0)")
    }
}
