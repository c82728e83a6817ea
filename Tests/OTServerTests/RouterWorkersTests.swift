import Dispatch
import OTBase
@testable import OTServer
import OTTransport
import OTWire
import Synchronization
import XCTest

/// A router with several workers: each session is pinned to one worker's socket and thread, answers name that
/// worker's port, and media flows in every session; closing and stats cover all workers.
final class RouterWorkersTests: RouterTestCase {
    private func negotiate(_ client: RouterClient, sid: String, peer: String, stream: String, _ dir: MediaDirection) throws -> String {
        let result = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: sid, connectionId: "c-\(peer)", peerId: peer, streamId: stream, direction: dir,
                                             sdp: try client.driver.createOffer())) { r in result.withLock { $0 = r } }
        XCTAssertTrue(waitFor { result.withLock { $0 != nil } })
        let answer = try XCTUnwrap(result.withLock { $0 }).get()
        try client.driver.setRemoteAnswer(answer)
        return answer
    }

    /// A worker count out of range, or fixed ports that would run past 65535, are refused instead of wrapping to a
    /// random port.
    func testWorkerCountAndFixedPortsAreChecked() {
        for n in [0, -1, MediaRouter.maxWorkers + 1] {
            XCTAssertThrowsError(try MediaRouter(workers: n), "\(n) workers")
        }
        let high = TransportAddress(ip: .v4(0x7F00_0001), port: 65535)
        XCTAssertThrowsError(try MediaRouter(bind: high, workers: 2)) { e in
            XCTAssertTrue("\(e)".contains("65535"), "\(e)")
        }
    }

    func testSessionsArePinnedToWorkersWhoseAnswersNameTheirOwnPort() throws {
        router = try MediaRouter(workers: 2)
        XCTAssertEqual(Set(router.endpoints.map(\.address.port)).count, 2, "a socket per worker")
        // Two sessions on different workers.
        var sessions: [String] = []
        var i = 0
        while sessions.count < 2 {
            let sid = "session-\(i)"
            i += 1
            if router.placement(sessionId: sid).worker == sessions.count { sessions.append(sid) }
        }
        for (w, sid) in sessions.enumerated() {
            let pub = try RouterClient(audioSSRC: 0xA0 + UInt32(w), videoSSRC: nil), sub = try RouterClient()
            clients += [pub, sub]
            let port = router.placement(sessionId: sid).port
            XCTAssertEqual(port, router.endpoints[w].address.port)
            for (c, peer, dir) in [(pub, "pub\(w)", MediaDirection.publish), (sub, "sub\(w)", .subscribe)] {
                let answer = try negotiate(c, sid: sid, peer: peer, stream: "st\(w)", dir)
                XCTAssertTrue(answer.contains(" \(port) typ host"), "the candidate names worker \(w)'s port \(port)")
            }
            XCTAssertTrue(waitFor { pub.connected && sub.connected })
            for seq in UInt16(0)..<10 {
                var p = RTPPacket(payloadType: 111, sequenceNumber: seq, timestamp: UInt32(seq) * 960, ssrc: 0xA0 + UInt32(w), payload: [0xF8]).serialized()
                XCTAssertTrue(pub.driver.sendRTP(&p))
            }
            XCTAssertTrue(waitFor { sub.received(ssrc: 0xA0 + UInt32(w)).count == 10 }, "session \(w) forwards")
        }
        XCTAssertEqual(router.peerCount, 4)
        XCTAssertEqual(router.streamCount, 2)
        XCTAssertEqual(router.endpoints.map(\.connectionCount), [2, 2])
        XCTAssertEqual(router.counters(streamId: "st1")?.packetsIn, 10)
        // The stats say where each session is placed.
        let stats = try XCTUnwrap(JSONValue.parse(router.statsJSON(apiKey: nil))["sessions"])
        for (w, sid) in sessions.enumerated() {
            XCTAssertEqual(stats[sid]?["mediaWorker"], .int(Int64(w)), "\(stats)")
            XCTAssertEqual(stats[sid]?["mediaPort"], .int(Int64(router.endpoints[w].address.port)))
        }
        router.connectionGone(connectionId: "c-sub0")
        router.close(peerId: "pub1")
        XCTAssertEqual(router.peerCount, 2)
        XCTAssertEqual(router.counters(streamId: "st0")?.subscribers, 0)
        XCTAssertEqual(router.endpoints.map(\.connectionCount), [1, 1])
    }

    /// A worker's endpoint stopped directly (its public `stop()`) ends that worker's IO thread; the router still stops,
    /// running the worker's remaining work on the caller's thread, instead of waiting for a thread that has exited.
    func testTheRouterStopsAfterAWorkersEndpointWasStoppedDirectly() throws {
        let r = try MediaRouter(workers: 2)
        r.endpoints[0].stop()
        let done = XCTestExpectation(description: "MediaRouter.stop returned")
        DispatchQueue.global().async { r.stop(); done.fulfill() }
        XCTAssertEqual(XCTWaiter().wait(for: [done], timeout: 20), .completed, "MediaRouter.stop hung")
    }
}
