import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import OTWire
import XCTest

/// Repeated connect / publish / subscribe / unsubscribe / unpublish / disconnect cycles through the media
/// router release everything: the sessions, publisher and subscriber are freed, and file descriptors, threads,
/// the router's peer connections and the heap in use return to their level after a warm-up.
/// (`ot-bench cycles` runs the same for 100 cycles and also bounds RSS growth.)
final class CyclesTests: XCTestCase {
    /// Weak references to one cycle's objects.
    private final class CycleObjects: @unchecked Sendable {
        weak var a: Session?, b: Session?, publisher: Publisher?, subscriber: Subscriber?
        var alive: [String] {
            [("session A", a as AnyObject?), ("session B", b), ("publisher", publisher), ("subscriber", subscriber)].compactMap { $0.1 == nil ? nil : $0.0 }
        }
    }

    func testFifteenRoutedCyclesReturnToTheWarmUpLevel() throws {
        let server = try TestServer()
        let router = try MediaRouter()
        server.server.mediaRouting = router
        defer { router.stop() }
        let sid = try server.session(relayed: false)

        func cycle(_ objects: CycleObjects) throws {
            let (a, aRec) = try server.client(sid, name: "A")
            let (b, bRec) = try server.client(sid, name: "B")
            let pubRec = MediaRecorder("publisher")
            let publisher = try tonePublisher(pubRec)
            objects.a = a; objects.b = b; objects.publisher = publisher
            try a.publish(publisher)
            pubRec.wait("streamCreated") { $0.publisherStreamCreated }
            let stream = try XCTUnwrap(publisher.stream)
            bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }
            let subRec = MediaRecorder("subscriber")
            let subscriber = Subscriber(stream: stream, delegate: subRec)
            objects.subscriber = subscriber
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
        func settled(_ fds: Int, _ threads: Int, _ objects: CycleObjects? = nil) -> Bool {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                if router.peerCount == 0 && openFileDescriptors() <= fds && threadCount() <= threads && objects?.alive.isEmpty ?? true { return true }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return false
        }

        for _ in 0..<2 { try cycle(CycleObjects()) }  // warm-up: lazily made threads and sockets of the runtime
        _ = settled(Int.max, Int.max)
        Thread.sleep(forTimeInterval: 0.3)
        let fds = openFileDescriptors(), threads = threadCount()
        var heap: [Int] = []
        for i in 1...15 {
            let objects = CycleObjects()
            try cycle(objects)
            _ = settled(Int.max, Int.max, objects)
            XCTAssertEqual(objects.alive, [], "objects of cycle \(i) still alive after it ended")
            heap.append(heapInUse())
        }
        _ = settled(fds + 2, threads + 4)
        XCTAssertLessThanOrEqual(openFileDescriptors(), fds + 2, "file descriptors leaked across 15 routed cycles")
        XCTAssertLessThanOrEqual(threadCount(), threads + 4, "threads leaked across 15 routed cycles")
        XCTAssertEqual(router.peerCount, 0, "the router dropped every peer connection")
        XCTAssertEqual(server.server.mediaPeerCount, 0, "the server forgot every media peer")

        // Heap in use: the median of cycles 11-15 against that of cycles 1-5, ten cycles apart. Threads' malloc
        // caches and runtime caches still fill over these cycles (24-34 KiB per cycle in debug builds, given back
        // when Dispatch ends its idle threads); what one cycle's publisher holds (codecs, buffers) is about 4 MiB.
        let early = median(Array(heap[0..<5])) ?? 0, late = median(Array(heap[10..<15])) ?? 0
        let perCycle = Double(late - early) / 10 / 1024
        let boundKiB = 128.0
        let figures = "heap in use, KiB after each cycle: \(heap.map { "\($0 / 1024)" }.joined(separator: " ")); "
            + "median of cycles 1-5 \(early / 1024), of 11-15 \(late / 1024): \(String(format: "%.1f", perCycle)) KiB per cycle"
        print("[figures] \(figures)")
        XCTAssertLessThanOrEqual(perCycle, boundKiB, "heap in use grows over \(Int(boundKiB)) KiB per cycle: \(figures)")
    }
}
