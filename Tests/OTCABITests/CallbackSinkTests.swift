@testable import OTCABI
import COTABI
import Dispatch
import Glibc
import Synchronization
import XCTest

/// One session's C callbacks (its own, its publisher's, its subscribers') in one order on a library thread or on the
/// caller of `ot_poll`; closing one owner waits for its callback in flight and skips the rest.
final class CallbackSinkTests: XCTestCase {
    func testCallbacksOfSeveralOwnersRunInOneOrderOffTheCallersThread() {
        let sink = CallbackSink.thread("order")
        let owners = [CallbackOwner(), CallbackOwner(), CallbackOwner()]
        let seen = Mutex<[Int]>([])
        let inside = Atomic<Int>(0), overlaps = Atomic<Int>(0), onCaller = Atomic<Int>(0)
        let caller = pthread_self()
        let done = expectation(description: "all ran")
        for i in 0..<300 {
            sink.post(owners[i % 3]) {
                if inside.add(1, ordering: .acquiringAndReleasing).newValue > 1 { overlaps.add(1, ordering: .relaxed) }
                if pthread_equal(pthread_self(), caller) != 0 { onCaller.add(1, ordering: .relaxed) }
                seen.withLock { $0.append(i) }
                inside.subtract(1, ordering: .acquiringAndReleasing)
                if i == 299 { done.fulfill() }
            }
        }
        wait(for: [done], timeout: 5)
        XCTAssertEqual(seen.withLock { $0 }, Array(0..<300))
        XCTAssertEqual(overlaps.load(ordering: .relaxed), 0, "one at a time")
        XCTAssertEqual(onCaller.load(ordering: .relaxed), 0, "on a library thread")
    }

    func testCloseWaitsForTheCallbackInFlightAndSkipsTheRestOfThatOwnerOnly() {
        let sink = CallbackSink.thread("close")
        let closing = CallbackOwner(), other = CallbackOwner()
        let started = DispatchSemaphore(value: 0)
        let finished = Atomic<Bool>(false)
        let ranAfterClose = Atomic<Int>(0), othersRan = Atomic<Int>(0)
        sink.post(closing) {
            started.signal()
            usleep(100_000)
            finished.store(true, ordering: .releasing)
        }
        for _ in 0..<10 {
            sink.post(closing) { ranAfterClose.add(1, ordering: .relaxed) }
            sink.post(other) { othersRan.add(1, ordering: .relaxed) }
        }
        started.wait()
        closing.close()
        XCTAssertTrue(finished.load(ordering: .acquiring), "close() returned while a callback was running")
        sink.post(closing) { ranAfterClose.add(1, ordering: .relaxed) }
        sink.drain()
        XCTAssertEqual(ranAfterClose.load(ordering: .relaxed), 0, "callbacks ran after close()")
        XCTAssertEqual(othersRan.load(ordering: .relaxed), 10, "another owner's callbacks still run")
    }

    func testCloseFromInsideOwnCallbackDoesNotDeadlock() {
        let sink = CallbackSink.thread("self-close")
        let owner = CallbackOwner()
        let closed = expectation(description: "closed from inside")
        let later = Atomic<Int>(0)
        sink.post(owner) { owner.close(); closed.fulfill() }
        sink.post(owner) { later.add(1, ordering: .relaxed) }
        wait(for: [closed], timeout: 5)
        sink.drain()
        XCTAssertEqual(later.load(ordering: .relaxed), 0)
    }

    func testPollModeRunsOnTheCallersThreadAndSignalsItsFileDescriptor() {
        let owner = CallbackOwner()
        var fd: Int32 = -1
        XCTAssertEqual(ot_poll_get_fd(&fd), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let me = pthread_self()
        let seen = Mutex<[Int]>([])
        var ran: UInt = 99
        XCTAssertEqual(ot_poll(0, &ran), 0)
        XCTAssertEqual(ran, 0, "nothing waiting: returns at once")
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&p, 1, 0), 0, "not readable while nothing waits")
        for i in 0..<5 {
            CallbackSink.poll("test").post(owner) {
                XCTAssertTrue(pthread_equal(pthread_self(), me) != 0)
                seen.withLock { $0.append(i) }
                // The API's poll is refused from inside a poll callback.
                XCTAssertEqual(ot_poll(0, nil), ot_status(OT_ERR_ILLEGAL_STATE.rawValue))
            }
        }
        XCTAssertEqual(poll(&p, 1, 0), 1, "readable while callbacks wait")
        XCTAssertTrue(seen.withLock { $0.isEmpty }, "nothing runs until polled")
        XCTAssertEqual(ot_poll(0, &ran), 0)
        XCTAssertEqual(ran, 5)
        XCTAssertEqual(seen.withLock { $0 }, Array(0..<5))
        XCTAssertEqual(poll(&p, 1, 0), 0, "drained")
        // A wait: a callback posted from another thread wakes the poller.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) {
            CallbackSink.poll("test").post(owner) { seen.withLock { $0.append(5) } }
        }
        XCTAssertEqual(ot_poll(5000, &ran), 0)
        XCTAssertEqual(ran, 1)
        owner.close()
        CallbackSink.poll("test").post(owner) { seen.withLock { $0.append(6) } }
        XCTAssertEqual(ot_poll(0, &ran), 0)
        XCTAssertEqual(seen.withLock { $0 }, Array(0..<6), "a closed owner's callbacks are skipped")
        XCTAssertEqual(ot_poll(-2, nil), ot_status(OT_ERR_INVALID_PARAM.rawValue))
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
