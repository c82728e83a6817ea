import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import XCTest

/// Repeated connect / publish / subscribe / unsubscribe / unpublish / disconnect cycles through the media
/// router release everything: file descriptors, threads and the router's peer connections return to their
/// level after a warm-up. (`ot-bench cycles` runs the same for 100 cycles and also bounds RSS growth.)
final class CyclesTests: XCTestCase {
    func testFifteenRoutedCyclesReturnToTheWarmUpLevel() throws {
        let server = try TestServer()
        let router = try MediaRouter()
        server.server.mediaRouting = router
        defer { router.stop() }
        let sid = try server.session(relayed: false)

        func cycle() throws {
            let (a, aRec) = try server.client(sid, name: "A")
            let (b, bRec) = try server.client(sid, name: "B")
            let pubRec = MediaRecorder("publisher")
            let publisher = try tonePublisher(pubRec)
            try a.publish(publisher)
            pubRec.wait("streamCreated") { $0.publisherStreamCreated }
            let stream = try XCTUnwrap(publisher.stream)
            bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
            let subRec = MediaRecorder("subscriber")
            let subscriber = Subscriber(stream: stream, delegate: subRec)
            try b.subscribe(subscriber)
            subRec.waitForFrames(3)
            try b.unsubscribe(subscriber)
            subRec.waitFor(.disconnected)
            try a.unpublish(publisher)
            pubRec.waitFor(.streamDestroyed(stream.id))
            try b.disconnect()
            try a.disconnect()
            aRec.waitFor(.disconnected)
            bRec.waitFor(.disconnected)
        }
        func settled(_ fds: Int, _ threads: Int) -> Bool {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                if router.peerCount == 0 && openFileDescriptors() <= fds && threadCount() <= threads { return true }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return false
        }

        for _ in 0..<2 { try cycle() }  // warm-up: lazily made threads and sockets of the runtime
        _ = settled(Int.max, Int.max)
        Thread.sleep(forTimeInterval: 0.3)
        let fds = openFileDescriptors(), threads = threadCount()
        for _ in 0..<15 { try cycle() }
        _ = settled(fds + 2, threads + 4)
        XCTAssertLessThanOrEqual(openFileDescriptors(), fds + 2, "file descriptors leaked across 15 routed cycles")
        XCTAssertLessThanOrEqual(threadCount(), threads + 4, "threads leaked across 15 routed cycles")
        XCTAssertEqual(router.peerCount, 0, "the router dropped every peer connection")
        XCTAssertEqual(server.server.mediaPeerCount, 0, "the server forgot every media peer")
    }
}
