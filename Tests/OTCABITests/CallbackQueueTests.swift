@testable import OTCABI
import Dispatch
import Synchronization
import XCTest

final class CallbackQueueTests: XCTestCase {
    func testCallbacksRunInOrderOffTheCallersThread() {
        let q = CallbackQueue(label: "order")
        let seen = Mutex<[Int]>([])
        let done = expectation(description: "all ran")
        for i in 0..<100 {
            q.post {
                XCTAssertTrue(q.isCurrent)
                seen.withLock { $0.append(i) }
                if i == 99 { done.fulfill() }
            }
        }
        XCTAssertFalse(q.isCurrent)
        wait(for: [done], timeout: 5)
        XCTAssertEqual(seen.withLock { $0 }, Array(0..<100))
    }

    func testCloseWaitsForTheCallbackInFlightAndNoneRunsAfter() {
        let q = CallbackQueue(label: "close")
        let started = DispatchSemaphore(value: 0)
        let finished = Atomic<Bool>(false)
        let ranAfterClose = Atomic<Int>(0)
        q.post {
            started.signal()
            usleep(100_000)
            finished.store(true, ordering: .releasing)
        }
        for _ in 0..<10 { q.post { ranAfterClose.add(1, ordering: .relaxed) } }
        started.wait()
        q.close()
        XCTAssertTrue(finished.load(ordering: .acquiring), "close() returned while a callback was running")
        q.post { ranAfterClose.add(1, ordering: .relaxed) }
        q.drain()
        XCTAssertEqual(ranAfterClose.load(ordering: .relaxed), 0, "callbacks ran after close()")
    }

    func testCloseFromInsideOwnCallbackDoesNotDeadlock() {
        let q = CallbackQueue(label: "self-close")
        let closed = expectation(description: "closed from inside")
        let later = Atomic<Int>(0)
        q.post { q.close(); closed.fulfill() }
        q.post { later.add(1, ordering: .relaxed) }
        wait(for: [closed], timeout: 5)
        q.drain()
        XCTAssertEqual(later.load(ordering: .relaxed), 0)
    }
}

final class HandleRegistryTests: XCTestCase {
    final class A: Sendable {}
    final class B: Sendable {}

    func testHandlesAreTypedAndNeverReused() {
        let r = HandleRegistry()
        let a = A()
        let h1 = r.insert(a)
        XCTAssertTrue(r.lookup(h1, as: A.self) === a)
        XCTAssertNil(r.lookup(h1, as: B.self), "a handle of another type is refused")
        XCTAssertTrue(r.remove(h1, as: A.self) === a)
        XCTAssertNil(r.remove(h1, as: A.self), "a second delete finds nothing")
        XCTAssertNil(r.lookup(h1, as: A.self))
        let h2 = r.insert(A())
        XCTAssertNotEqual(h1, h2, "a deleted handle's number is never given to a new object")
        XCTAssertNil(r.lookup(0, as: A.self))
        XCTAssertEqual(r.count, 1)
    }
}
