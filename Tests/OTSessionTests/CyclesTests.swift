import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import OTWire
import XCTest

/// 150 connect / publish / subscribe / unsubscribe / unpublish / disconnect cycles, routed and relayed, release
/// everything: each cycle's sessions, publisher and subscriber are freed, and file descriptors, threads, the
/// server's media peers and the heap blocks in use (counted exactly, see `LiveAllocations`) return to their level
/// after a warm-up, in every one of three rounds. (`ot-bench cycles` runs the same in a release build and reports RSS as well.)
final class CyclesTests: XCTestCase {
    /// Weak references to one cycle's objects.
    private final class CycleObjects: @unchecked Sendable {
        weak var a: Session?, b: Session?, publisher: Publisher?, subscriber: Subscriber?
        var alive: [String] {
            [("session A", a as AnyObject?), ("session B", b), ("publisher", publisher), ("subscriber", subscriber)].compactMap { $0.1 == nil ? nil : $0.0 }
        }
    }

    func testRoutedCyclesReleaseEverything() throws { try runCycles(relayed: false) }
    func testRelayedCyclesReleaseEverything() throws { try runCycles(relayed: true) }

    private func runCycles(relayed: Bool, count: Int = 150) throws {
        let kind = relayed ? "relayed" : "routed"
        let server = try TestServer(routed: !relayed)
        let sid = try server.session(relayed: relayed)

        func cycle(_ objects: CycleObjects) throws {
            let t = try server.publishTone(sid)
            objects.a = t.a; objects.b = t.b; objects.publisher = t.publisher
            let (subscriber, subRec, _) = try t.subscribeB(frames: 3)
            objects.subscriber = subscriber
            try t.b.unsubscribe(subscriber)
            XCTAssertFalse(subscriber.isConnected)
            try t.a.unpublish(t.publisher)
            t.pubRec.waitFor(.streamDestroyed(t.stream.id))
            try t.b.disconnect()
            try t.a.disconnect()
            t.aRec.waitFor(.disconnected)
            t.bRec.waitFor(.disconnected)
            // The app's own unsubscribe is not a subscriber event (B's messages are in one order: none came before B's end).
            XCTAssertEqual(subRec.events, [.connected])
        }
        /// Waits (up to 5 s) until the media peers are gone and fds, threads and the given objects are back down.
        func settle(fds: Int = .max, threads: Int = .max, _ objects: CycleObjects? = nil) {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                if (server.router?.peerCount ?? 0) == 0 && server.server.mediaPeerCount == 0 && openFileDescriptors() <= fds
                    && threadCount() <= threads && objects?.alive.isEmpty ?? true { return }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        /// The smallest of ten samples over half a second: work still winding down (a log line, a last timer) is
        /// not counted at either end.
        func quietLiveAllocations() -> LiveAllocations {
            var samples: [LiveAllocations] = []
            for _ in 0..<10 { samples.append(.sample()); Thread.sleep(forTimeInterval: 0.05) }
            return samples.min { $0.bytes < $1.bytes } ?? .sample()
        }

        // Warm-up: the runtime's lazily made threads, sockets, type metadata and per-thread state of OpenSSL.
        for _ in 0..<5 { try cycle(CycleObjects()) }
        settle()
        let fds = openFileDescriptors(), threads = threadCount()
        // The cycles in rounds, the heap in use sampled before and after each: a leak grows every round; what the
        // runtime keeps once (per-thread state of a thread started meanwhile, a table grown to a new capacity) grows
        // one round, more often under load. So the least any round grew is the leak's measure, and the first round
        // is the baseline the later ones are compared with in the same run.
        let rounds = 3, perRound = count / rounds
        var samples = [quietLiveAllocations()]
        for i in 1...rounds * perRound {
            let objects = CycleObjects()
            try cycle(objects)
            settle(objects)
            XCTAssertEqual(objects.alive, [], "objects of \(kind) cycle \(i) still alive after it ended")
            if i % perRound == 0 {
                settle(fds: fds + 2, threads: threads + 4)
                samples.append(quietLiveAllocations())
            }
        }
        XCTAssertLessThanOrEqual(openFileDescriptors(), fds + 2, "file descriptors leaked across \(count) \(kind) cycles")
        XCTAssertLessThanOrEqual(threadCount(), threads + 4, "threads leaked across \(count) \(kind) cycles")
        XCTAssertEqual(server.router?.peerCount ?? 0, 0, "the router dropped every peer connection")
        XCTAssertEqual(server.server.mediaPeerCount, 0, "the server forgot every media peer")

        // What one cycle allocates and must give back: two sessions, a publisher with its VP8 and Opus encoders, a
        // subscriber with its decoders, peer connections and their buffers: several MiB and thousands of blocks. What
        // may remain once is per-thread state of threads the runtime started meanwhile (TLS, OpenSSL's random
        // generators): 0-29 KiB in 0-52 blocks over 150 cycles when the machine is quiet. The bounds, on the round that
        // grew least, keep the sensitivity of the former whole-run bound (64 KiB over 150 cycles): 437 bytes a cycle,
        // and fewer new blocks than the round's cycles (a leak of one block per cycle fails every round).
        let grown = zip(samples, samples.dropFirst()).map { (bytes: $1.bytes - $0.bytes, blocks: $1.blocks - $0.blocks) }
        let least = (bytes: grown.map(\.bytes).min() ?? 0, blocks: grown.map(\.blocks).min() ?? 0)
        let figures = "\(kind): live heap after warm-up \(samples[0]), then after each \(perRound) cycles "
            + "\(samples.dropFirst().map { "\($0)" }.joined(separator: ", ")): grew \(grown.map { "\($0.bytes) bytes in \($0.blocks) blocks" }.joined(separator: ", "))"
        print("[figures] \(figures)")
        XCTAssertLessThanOrEqual(least.bytes, 64 * 1024 * perRound / 150, "heap in use grows every round: \(figures)")
        XCTAssertLessThan(least.blocks, perRound, "heap blocks in use grow every round: \(figures)")
    }
}
