import OTBase
@testable import OTTransport
import XCTest

/// The listener's admission policy, deterministically: caps, fair-share eviction of pending sockets, and
/// established sockets kept.
final class ConnectionAdmissionTests: XCTestCase {
    func testPerAddressCapRefusesOnlyThatAddress() {
        var a = ConnectionAdmission(maxConnections: 100, maxPerAddress: 3)
        for id in 1...3 {
            XCTAssertEqual(a.decide(address: "10.0.0.1"), .admit)
            a.insert(id, address: "10.0.0.1")
        }
        XCTAssertEqual(a.decide(address: "10.0.0.1"), .refuse(.addressFull))
        XCTAssertEqual(a.decide(address: "10.0.0.2"), .admit)
        a.remove(2)
        XCTAssertEqual(a.decide(address: "10.0.0.1"), .admit)
        XCTAssertEqual(a.count(from: "10.0.0.1"), 2)
    }

    func testAtTheCapTheFloodingAddressLosesItsOldestPendingSocket() {
        var a = ConnectionAdmission(maxConnections: 6, maxPerAddress: 0)
        // A flood from two addresses (4 and 2 sockets) fills the server.
        for id in 1...4 { a.insert(id, address: "attacker-1") }
        for id in 5...6 { a.insert(id, address: "attacker-2") }
        // A newcomer from elsewhere gets in by evicting the oldest pending socket of the biggest holder.
        XCTAssertEqual(a.decide(address: "user"), .admitEvicting(1))
        a.remove(1); a.insert(7, address: "user")
        XCTAssertEqual(a.decide(address: "attacker-1"), .admitEvicting(2), "the flooder evicts its own sockets")
        a.remove(2); a.insert(8, address: "attacker-1")
        // The user's one socket is never the victim while others hold more.
        for next in 9...40 {
            guard case .admitEvicting(let v) = a.decide(address: "attacker-\(next % 2 + 1)") else { return XCTFail() }
            XCTAssertNotEqual(v, 7)
            a.remove(v); a.insert(next, address: "attacker-\(next % 2 + 1)")
        }
        XCTAssertEqual(a.count, 6)
        XCTAssertEqual(a.count(from: "user"), 1)
    }

    func testEstablishedSocketsAreNeverEvicted() {
        var a = ConnectionAdmission(maxConnections: 3, maxPerAddress: 0)
        for id in 1...3 { a.insert(id, address: "x"); a.establish(id) }
        XCTAssertEqual(a.decide(address: "y"), .refuse(.full), "only established sockets: the newcomer is refused")
        XCTAssertNil(a.victim())
        a.remove(3)
        a.insert(4, address: "x")
        XCTAssertEqual(a.decide(address: "y"), .admitEvicting(4))
        XCTAssertTrue(a.isEstablished(1))
        XCTAssertFalse(a.isEstablished(4))
    }

    func testBookkeepingStaysProportionalUnderChurn() {
        var a = ConnectionAdmission(maxConnections: 50, maxPerAddress: 0)
        var open: [Int] = []
        for id in 1...20_000 {
            switch a.decide(address: "a") {
            case .admitEvicting(let v): a.remove(v); open.removeAll { $0 == v }
            case .admit: break
            case .refuse: XCTFail("refused"); return
            }
            a.insert(id, address: "a"); open.append(id)
            if id % 3 == 0 { a.establish(open[open.count / 2]) }
            if id % 7 == 0, let first = open.first { a.remove(first); open.removeFirst() }
        }
        XCTAssertEqual(a.count, open.count)
        XCTAssertLessThanOrEqual(a.count, 50)
    }

    func testDefaultGlobalCapFollowsTheDescriptorLimit() {
        let n = TCPServerLimits.defaultMaxConnections()
        XCTAssertGreaterThanOrEqual(n, 16)
        XCTAssertLessThanOrEqual(n, 10_000)
        var limits = TCPServerLimits()
        XCTAssertEqual(limits.effectiveMaxConnections, n)
        limits.maxConnections = 5
        XCTAssertEqual(limits.effectiveMaxConnections, 5)
    }
}
