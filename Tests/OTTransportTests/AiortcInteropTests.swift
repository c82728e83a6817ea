import Foundation
import OTBase
import OTWire
@testable import OTTransport
import Synchronization
import XCTest

/// Our transport against an aiortc peer (PyPI `aiortc`) on 127.0.0.1: SDP over the script's stdin/stdout,
/// ICE, DTLS-SRTP, and SRTP packets both ways. Run with: swift test --filter AiortcInteropTests
final class AiortcInteropTests: XCTestCase {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/aiortc_peer.py")

    /// Reads JSON lines from the child's stdout on a background queue.
    final class LineReader: @unchecked Sendable {
        let lines = Mutex<[String]>([])
        private var partial = ""
        init(_ handle: FileHandle) {
            handle.readabilityHandler = { [self] h in
                let data = h.availableData
                if data.isEmpty { h.readabilityHandler = nil; return }
                partial += String(decoding: data, as: UTF8.self)
                while let nl = partial.firstIndex(of: "\n") {
                    let line = String(partial[..<nl])
                    partial = String(partial[partial.index(after: nl)...])
                    lines.withLock { $0.append(line) }
                }
            }
        }
        func json(where key: String, is value: String, timeout: Double = 20) -> [String: Any]? {
            var found: [String: Any]?
            _ = LoopbackPeer.wait(seconds: timeout) {
                for l in lines.withLock({ $0 }) {
                    if let obj = try? JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any], obj[key] as? String == value {
                        found = obj
                        return true
                    }
                }
                return false
            }
            return found
        }
    }

    func testICEAndDTLSSRTPWithAiortcBothWays() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/env") else { throw XCTSkip("no /usr/bin/env") }
        let proc = Process()
        proc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        proc.arguments = ["python3", Self.script.path, "3"]
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        proc.standardInput = stdin; proc.standardOutput = stdout; proc.standardError = stderr
        try proc.run()
        defer { if proc.isRunning { proc.terminate() }; proc.waitUntilExit() }
        let reader = LineReader(stdout.fileHandleForReading)

        guard let offerMsg = reader.json(where: "type", is: "offer"), let offerText = offerMsg["sdp"] as? String else {
            let err = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            return XCTFail("no offer from aiortc (is `pip install aiortc` done?): \(err)")
        }
        let start = MonotonicClock.now()
        let offer = try SessionDescription.parse(offerText)

        // Our side: answerer, ICE controlled, DTLS client (a=setup:active).
        let peer = try LoopbackPeer()
        defer { peer.driver.stop() }
        let cert = try DTLSCertificate()
        var rng = SystemRandomNumberGenerator()
        let cred = ICEConfig.randomCredentials(using: &rng)
        let ice = ICEAgent(config: ICEConfig(role: .controlled, localUfrag: cred.ufrag, localPwd: cred.pwd, tieBreaker: .random(in: 0 ... .max), seed: 7))
        var local = SDPLocalParameters(iceUfrag: cred.ufrag, icePwd: cred.pwd, fingerprint: cert.fingerprint)
        local.candidates = [try XCTUnwrap(ice.addLocalCandidate(peer.address))]
        local.endOfCandidates = true
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
        let tx = try XCTUnwrap(InteropSRTP(keys, outbound: true)), rx = try XCTUnwrap(InteropSRTP(keys, outbound: false))

        // Send 100 Opus packets (20 ms silence frames) over SRTP, paced at 20 ms.
        for i in 0..<100 {
            var w = ByteWriter()
            w.u8(0x80); w.u8(opus.payloadType | (i == 0 ? 0x80 : 0)); w.u16(UInt16(1000 + i)); w.u32(UInt32(i * 960)); w.u32(ourSSRC)
            w.append([0xF8, 0xFF, 0xFE])
            let protected = try XCTUnwrap(tx.protect(w.bytes))
            peer.withTransport { _ = $0?.sendMedia(protected) }
            peer.driver.wake()
            usleep(20_000)
        }
        let connected = reader.json(where: "event", is: "connected")
        let stats = try XCTUnwrap(reader.json(where: "event", is: "stats", timeout: 20))

        // What aiortc sent us decrypts with the exported keys and carries its SSRC and Opus payload type.
        var rtpOK = 0, rtcpOK = 0, bad = 0
        for e in peer.events.withLock({ $0 }) {
            guard case .srtp(let bytes, let isRTCP) = e else { continue }
            guard let plain = rx.unprotect(bytes, rtcp: isRTCP) else { bad += 1; continue }
            if isRTCP { rtcpOK += 1; continue }
            if plain.count > 12, plain[1] & 0x7F == opus.payloadType,
               UInt32(plain[8]) << 24 | UInt32(plain[9]) << 16 | UInt32(plain[10]) << 8 | UInt32(plain[11]) == remoteSSRC { rtpOK += 1 }
        }
        XCTAssertGreaterThan(rtpOK, 50, "aiortc's Opus SRTP packets we could unprotect")
        XCTAssertEqual(bad, 0)
        XCTAssertGreaterThan(stats["packetsReceived"] as? Int ?? 0, 50, "our SRTP packets aiortc accepted")
        XCTAssertGreaterThan(stats["framesDecoded"] as? Int ?? 0, 10, "aiortc decoded our Opus frames")
        let theirMs = connected?["ms"] as? Double ?? -1
        print("INTEROP_SETUP ours(offer received->DTLS connected) ms: \(Double(ourSetup.microseconds) / 1000); aiortc(offer created->connected) ms: \(theirMs); profile: \(keys.profile); rtp in: \(rtpOK), rtcp in: \(rtcpOK), aiortc received: \(stats["packetsReceived"] ?? 0)")
    }
}
