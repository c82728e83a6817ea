import Foundation
import XCTest
@testable import OTMedia
import OTTransport
import OTWire

/// Interoperability with an independent WebRTC stack: aiortc (its RTP parser, RFC 7741 descriptor and
/// VP8 decoder) and pylibsrtp, run as a local python3 subprocess. Skipped when they are not installed.
final class AiortcInteropTests: XCTestCase {
    static let script = #"""
import json, sys
from pylibsrtp import Policy, Session
from aiortc.rtp import RtpPacket
from aiortc.codecs.vpx import VpxPayloadDescriptor, Vp8Decoder
from aiortc.jitterbuffer import JitterFrame

req = json.load(sys.stdin)
profile = getattr(Policy, req["profile"])
# The peer is the DTLS server: it receives with the client's key and sends with its own.
rx = Session(policy=Policy(key=bytes.fromhex(req["client_key"]), ssrc_type=Policy.SSRC_ANY_INBOUND, srtp_profile=profile))
tx = Session(policy=Policy(key=bytes.fromhex(req["server_key"]), ssrc_type=Policy.SSRC_ANY_OUTBOUND, srtp_profile=profile))
decoder = Vp8Decoder()
frames, current, out = [], b"", {"packets": []}
for h in req["packets"]:
    pkt = RtpPacket.parse(rx.unprotect(bytes.fromhex(h)))
    desc, data = VpxPayloadDescriptor.parse(pkt.payload)
    out["packets"].append({"seq": pkt.sequence_number, "marker": pkt.marker, "pid": desc.picture_id,
                           "start": desc.partition_start})
    current += data
    if pkt.marker:
        for f in decoder.decode(JitterFrame(current, pkt.timestamp)):
            frames.append([f.width, f.height])
        current = b""
out["frames"] = frames
reply = RtpPacket(payload_type=96, marker=1, sequence_number=777, timestamp=90000, ssrc=0xBEEF,
                  payload=bytes(VpxPayloadDescriptor(partition_start=1, partition_id=0, picture_id=4321)) + b"\x11\x22\x33")
out["reply"] = tx.protect(reply.serialize()).hex()
print(json.dumps(out))
"""#

    func runPython(_ input: Data) throws -> [String: Any] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", Self.script]
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        p.standardInput = stdin; p.standardOutput = stdout; p.standardError = stderr
        try p.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let message = String(decoding: err, as: UTF8.self)
        if p.terminationStatus != 0 && message.contains("ModuleNotFoundError") { throw XCTSkip("aiortc/pylibsrtp not installed") }
        guard p.terminationStatus == 0, let json = try JSONSerialization.jsonObject(with: out) as? [String: Any] else {
            XCTFail("python failed: \(message)")
            return [:]
        }
        return json
    }

    func testVP8OverSRTPInteroperatesWithAiortc() throws {
        for profile in SRTPProfile.allCases { try roundTrip(profile) }
    }

    func roundTrip(_ profile: SRTPProfile) throws {
        let material = (0..<profile.keyingMaterialLength).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        let client = try SRTPKeys(keyingMaterial: material, profile: profile, isDTLSClient: true)
        let srtp = try SRTPContext(profile: profile, keys: client)

        let enc = try VP8Encoder(config: VideoEncoderConfig(width: 320, height: 240, bitrateKbps: 800, frameDropThreshold: 0))
        var packetizer = VP8Packetizer(maxPayloadSize: 500, initialPictureId: 300)
        var seq: UInt16 = 65_534
        var wire: [String] = []
        for t in 0..<4 {
            try enc.encode(movingPicture(width: 320, height: 240, t: t)) { frame in
                try packetizer.packetize(frame.data) { payload, last in
                    var p = RTPPacket(marker: last, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(t * 3000),
                                      ssrc: 0xC0FFEE, payload: payload).serialized()
                    seq &+= 1
                    try srtp.protectRTP(&p)
                    wire.append(p.map { String(format: "%02x", $0) }.joined())
                }
            }
        }
        let hex = { (b: [UInt8]) in b.map { String(format: "%02x", $0) }.joined() }
        let name = profile == .aeadAes128Gcm ? "SRTP_PROFILE_AEAD_AES_128_GCM" : "SRTP_PROFILE_AES128_CM_SHA1_80"
        let request: [String: Any] = ["profile": name, "client_key": hex(client.local), "server_key": hex(client.remote), "packets": wire]
        let reply = try runPython(try JSONSerialization.data(withJSONObject: request))
        guard !reply.isEmpty else { return }

        let packets = try XCTUnwrap(reply["packets"] as? [[String: Any]])
        XCTAssertEqual(packets.count, wire.count)
        XCTAssertGreaterThan(wire.count, 4, "the keyframe spans several packets")
        XCTAssertEqual(packets.first?["seq"] as? Int, 65_534)
        let pictureIds = Set(packets.compactMap { $0["pid"] as? Int })
        XCTAssertEqual(pictureIds, [300, 301, 302, 303])
        XCTAssertEqual(packets.filter { ($0["start"] as? Int) == 1 }.count, 4, "one partition start per frame")
        let frames = try XCTUnwrap(reply["frames"] as? [[Int]])
        XCTAssertEqual(frames, Array(repeating: [320, 240], count: 4), "aiortc's decoder shows every frame")

        // And aiortc's SRTP + descriptor back to us.
        let replyHex = try XCTUnwrap(reply["reply"] as? String)
        var bytes: [UInt8] = stride(from: 0, to: replyHex.count, by: 2).compactMap {
            let s = replyHex.index(replyHex.startIndex, offsetBy: $0)
            return UInt8(replyHex[s..<replyHex.index(s, offsetBy: 2)], radix: 16)
        }
        try srtp.unprotectRTP(&bytes)
        let rtp = try RTPPacket(parsing: bytes)
        XCTAssertEqual(rtp.sequenceNumber, 777)
        let (d, data) = try VP8PayloadDescriptor.parse(rtp.payload)
        XCTAssertEqual(d.pictureId, 4321)
        XCTAssertTrue(d.startsFrame)
        XCTAssertEqual(Array(data), [0x11, 0x22, 0x33])
    }
}
