import OTBase
import OTWire
import Synchronization
import XCTest
@testable import OTTransport

/// How the UDP driver's IO thread wakes: what the engines ask of it from the IO thread itself (a new deadline, a
/// `wake()`) needs no write to its wake pipe and no extra wake-up, and its counters say what it did.
final class UDPDriverWakeTests: XCTestCase {
    /// Timers asked for from the IO thread (a deadline 1 ms ahead, or `wake()`, alternately) all fire, promptly, and
    /// none of them goes through the wake pipe: before, every deadline the IO thread set and every `wake()` it called
    /// wrote a byte to its own pipe, and the next poll returned for it (an extra wake-up for each).
    func testTheIOThreadWakesItselfWithoutThePipe() throws {
        let rounds = 40
        let fired = Mutex(0)
        let box = Mutex<UDPDriver?>(nil)
        let d = try UDPDriver { e in
            guard case .timer(let now) = e, let d = box.withLock({ $0 }) else { return }
            let n = fired.withLock { f -> Int in f += 1; return f }
            guard n < rounds else { return }
            XCTAssertTrue(d.isIOThread)
            if n % 2 == 0 { d.setDeadline(now + .milliseconds(1)) } else { d.wake() }
        }
        box.withLock { $0 = d }
        defer { d.stop(); box.withLock { $0 = nil } }
        _ = try d.bind(TransportAddress(ip: .v4(0x7F00_0001), port: 0))
        d.start()
        // The chain starts with a wake-up from this thread (`bind` asked for one too).
        d.wake()
        // A `wake()` the IO thread calls on itself must not leave it asleep until the next second-long poll timeout:
        // 20 of them finish well within the wait (they would need 20 s).
        XCTAssertTrue(LoopbackPeer.wait(seconds: 10) { fired.withLock { $0 } >= rounds }, "timers fired: \(fired.withLock { $0 })")
        let c = d.counters
        XCTAssertGreaterThanOrEqual(c.timers, rounds)
        // At most the two wake-ups from this thread; none of the IO thread's own 39.
        XCTAssertLessThanOrEqual(c.pipeWakeups, 2)
    }

    /// The counters count what the thread received and how often it polled.
    func testCountersCountDatagramsAndWakeUps() throws {
        let got = Mutex(0)
        let d = try UDPDriver { e in if case .datagram = e { got.withLock { $0 += 1 } } }
        defer { d.stop() }
        let local = try d.bind(TransportAddress(ip: .v4(0x7F00_0001), port: 0))
        d.start()
        let sender = try UDPDriver { _ in }
        let from = try sender.bind(TransportAddress(ip: .v4(0x7F00_0001), port: 0))
        for _ in 0..<30 { XCTAssertTrue(sender.send([1, 2, 3], from: from, to: local)) }
        XCTAssertTrue(LoopbackPeer.wait { got.withLock { $0 } == 30 })
        let c = d.counters
        XCTAssertEqual(c.datagrams, 30)
        XCTAssertGreaterThanOrEqual(c.polls, 1)
    }
}
