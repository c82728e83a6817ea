import Foundation
import OTBase
import OTTransport
import OTWire

/// A `PeerConnectionDriver` (own sockets and IO thread) whose events are handed, in order, to the owner's
/// serial `queue`, so the publisher's and subscriber's media state stays confined to that queue.
final class MediaLink: @unchecked Sendable {
    private let driver: PeerConnectionDriver

    /// Binds one socket per local IPv4 address (loopback included) and starts the IO thread.
    init(config: PeerConnectionConfig, queue: DispatchQueue, onEvent: @escaping @Sendable ([PeerConnectionEvent]) -> Void) throws {
        var bind = PeerConnectionDriver.hostBindAddresses(includeLoopback: true)
        if bind.isEmpty { bind = [TransportAddress(ip: .v4(0x7F00_0001), port: 0)] }
        driver = try PeerConnectionDriver(config: config, bind: bind) { e in queue.async { onEvent([e]) } }
    }

    deinit { driver.close() }

    /// Our offer (SDP text).
    func createOffer() throws -> String { try driver.createOffer() }
    /// Our answer to the peer's offer; connecting starts.
    func createAnswer(offer: String) throws -> String { try driver.createAnswer(toOffer: offer) }
    /// The peer's answer to our offer; connecting starts.
    func setRemoteAnswer(_ sdp: String) throws { try driver.setRemoteAnswer(sdp) }
    /// What both sides agreed, after the descriptions are exchanged.
    var negotiated: SDPNegotiated? { driver.negotiated }

    /// A trickled candidate from signaling (`""` ends the candidates); malformed ones are ignored.
    func addRemoteCandidate(_ line: String) {
        if line.isEmpty { driver.withPeerConnection { pc, now in pc.endOfRemoteCandidates(now: now) }; return }
        guard let c = try? SDPCandidate(parsing: line) else { Log.warn("media", "ignored a bad remote candidate"); return }
        driver.addRemoteCandidate(c)
    }

    /// Protects and sends an RTP packet (the buffer holds the protected bytes afterwards).
    func sendRTP(_ packet: inout [UInt8]) { driver.sendRTP(&packet) }

    /// Asks the peer for a keyframe of its SSRC.
    func requestKeyframe(ssrc: UInt32) { driver.requestKeyframe(ssrc: ssrc) }

    /// Sends BYE, closes DTLS, stops the IO thread and closes the sockets. Idempotent.
    func close() { driver.close() }
}
