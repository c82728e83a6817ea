import Foundation
@testable import OTSession
import OTWire
import Synchronization
import XCTest

/// `SessionMedia` routes media signaling by peer id; candidates that arrive before the publisher registered its
/// answering end (it answers on its own queue) are kept and delivered when it does.
final class SessionMediaTests: XCTestCase {
    final class Peer: MediaSignalingPeer {
        let got = Mutex<[ServerMessage]>([])
        func mediaSignal(_ message: ServerMessage) { got.withLock { $0.append(message) } }
    }

    func testCandidatesBeforeTheAnswererRegistersAreDelivered() {
        let media = SessionMedia()
        let offers = Mutex(0)
        media.setOfferHandler { _ in offers.withLock { $0 += 1 } }
        media.received(.mediaOffer(peerId: "p1", streamId: "s", direction: .subscribe, sdp: "v=0", from: "c1"))
        media.received(.mediaCandidate(peerId: "p1", candidate: "candidate:2 1 udp 1 198.51.100.6 4000 typ srflx"))
        media.received(.mediaCandidate(peerId: "p1", candidate: ""))
        media.received(.mediaCandidate(peerId: "unknown", candidate: "candidate:9 1 udp 1 192.0.2.9 9 typ host"))
        media.queue.sync {}
        XCTAssertEqual(offers.withLock { $0 }, 1)
        let peer = Peer()
        media.register(peerId: "p1", peer, answering: true)
        XCTAssertEqual(peer.got.withLock { $0 }, [.mediaCandidate(peerId: "p1", candidate: "candidate:2 1 udp 1 198.51.100.6 4000 typ srflx"),
                                                 .mediaCandidate(peerId: "p1", candidate: "")])
        // Later ones go straight to it; nothing is kept twice.
        media.received(.mediaCandidate(peerId: "p1", candidate: "candidate:3 1 udp 1 198.51.100.7 4000 typ srflx"))
        media.queue.sync {}
        XCTAssertEqual(peer.got.withLock { $0.count }, 3)
        let other = Peer()
        media.register(peerId: "unknown", other, answering: true)
        XCTAssertTrue(other.got.withLock { $0.isEmpty }, "only candidates of offers handed to the publisher are kept")
    }
}
