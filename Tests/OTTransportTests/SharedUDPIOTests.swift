#if canImport(Glibc)
import Glibc
#endif
import Foundation
import OTBase
import OTWire
@testable import OTTransport
import Synchronization
import XCTest

/// Client connections share one process-wide IO thread (`SharedUDPIO`), and closing them gives their sockets back.
final class SharedUDPIOTests: XCTestCase {
    static func entries(_ dir: String) -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] }
    /// The process's threads, from the kernel.
    static var threadCount: Int { entries("/proc/self/task").count }
    /// What the process's open file descriptors refer to, from the kernel (`socket:[inode]`, paths, pipes).
    static var openFDs: [String] {
        entries("/proc/self/fd").compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
    }
    /// The process's open sockets (other descriptors, e.g. files libraries open lazily, are not ours to count).
    static var fdCount: Int { openFDs.filter { $0.hasPrefix("socket:") }.count }
    /// How many of the process's threads carry `name`.
    static func threads(named name: String) -> Int {
        entries("/proc/self/task").filter {
            (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == name
        }.count
    }

    struct Pair {
        let a: PeerConnectionDriver, b: PeerConnectionDriver
        let logA: EventLog, logB: EventLog
        let ssrcA: UInt32, ssrcB: UInt32
    }

    /// Two connected drivers; `a`'s socket is bound at `bindA`.
    func makePair(_ k: Int, bindA: TransportAddress = TransportAddress("127.0.0.1:0")!) throws -> Pair {
        let ssrcA = UInt32(0xA000 + k), ssrcB = UInt32(0xB000 + k)
        let logA = EventLog(), logB = EventLog()
        let a = try PeerConnectionDriver(config: PeerConnectionConfig(audio: false, video: true,
                                                                      videoTrack: SDPLocalTrack(ssrc: ssrcA, streamID: "a\(k)", trackID: "v", cname: "a\(k)")),
                                         bind: [bindA], handler: logA.handler)
        let b = try PeerConnectionDriver(config: PeerConnectionConfig(audio: false, video: true,
                                                                      videoTrack: SDPLocalTrack(ssrc: ssrcB, streamID: "b\(k)", trackID: "v", cname: "b\(k)")),
                                         handler: logB.handler)
        try a.setRemoteAnswer(try b.createAnswer(toOffer: try a.createOffer()))
        return Pair(a: a, b: b, logA: logA, logB: logB, ssrcA: ssrcA, ssrcB: ssrcB)
    }

    func rtp(ssrc: UInt32, seq: Int) -> [UInt8] {
        // The payload names the sender and the packet, so delivery is checked by content.
        var payload = [UInt8](repeating: UInt8(seq & 0xFF), count: 120)
        withUnsafeBytes(of: ssrc.bigEndian) { for i in 0..<4 { payload[i] = $0[i] } }
        return testRTP(ssrc: ssrc, seq: UInt16(seq), ts: UInt32(seq) * 3000, payload: payload)
    }

    func testManyConnectionsShareOneIOThreadAndCloseReleasesSockets() throws {
        let threadsBefore = Self.threadCount
        _ = try SharedUDPIO.shared()  // the first use may start the shared thread; its wake pipe stays open
        let fdsBefore = Self.fdCount
        let n = 8, packets = 40
        var pairs: [Pair] = []
        for k in 0..<n { pairs.append(try makePair(k)) }
        // 2 connections × 1 loopback socket per pair.
        XCTAssertEqual(Self.fdCount, fdsBefore + 2 * n)
        XCTAssertEqual(Set(pairs.flatMap { $0.a.localAddresses + $0.b.localAddresses }).count, 2 * n)
        var maxThreads = Self.threadCount
        XCTAssertTrue(LoopbackPeer.wait(seconds: 20) {
            maxThreads = max(maxThreads, Self.threadCount)
            return pairs.allSatisfy { $0.logA.connected && $0.logB.connected }
        }, "not all \(n) pairs connected")
        // All pairs send both ways, interleaved, while the IO thread receives for all of them.
        for seq in 0..<packets {
            for p in pairs {
                var fromA = rtp(ssrc: p.ssrcA, seq: seq), fromB = rtp(ssrc: p.ssrcB, seq: seq)
                XCTAssertTrue(p.a.sendRTP(&fromA))
                XCTAssertTrue(p.b.sendRTP(&fromB))
            }
            maxThreads = max(maxThreads, Self.threadCount)
        }
        XCTAssertTrue(LoopbackPeer.wait {
            maxThreads = max(maxThreads, Self.threadCount)
            return pairs.allSatisfy { $0.logB.rtp(ssrc: $0.ssrcA).count == packets && $0.logA.rtp(ssrc: $0.ssrcB).count == packets }
        }, "media did not arrive on every connection")
        for p in pairs {
            // Each side got exactly its peer's packets, intact, and nothing of the other pairs.
            XCTAssertEqual(p.logB.rtp(ssrc: p.ssrcA).sorted { testRTPFields($0)?.seq ?? 0 < testRTPFields($1)?.seq ?? 0 },
                           (0..<packets).map { rtp(ssrc: p.ssrcA, seq: $0) })
            XCTAssertEqual(p.logA.rtp(ssrc: p.ssrcB).sorted { testRTPFields($0)?.seq ?? 0 < testRTPFields($1)?.seq ?? 0 },
                           (0..<packets).map { rtp(ssrc: p.ssrcB, seq: $0) })
            XCTAssertEqual(p.logB.events.withLock { $0.filter { if case .rtp = $0 { true } else { false } }.count }, packets)
        }
        print("SharedUDPIO: \(n) pairs, threads \(threadsBefore) before, max \(maxThreads) during; sockets \(fdsBefore) before, \(Self.fdCount) open")
        XCTAssertLessThanOrEqual(maxThreads, threadsBefore + 1, "\(2 * n) connections must not add more than the one shared IO thread")
        XCTAssertEqual(Self.threads(named: SharedUDPIO.threadName), 1)

        for p in pairs { p.a.close(); p.b.close() }
        XCTAssertTrue(LoopbackPeer.wait { Self.fdCount <= fdsBefore }, "sockets still open: \(Self.fdCount) fds, \(fdsBefore) before")
        pairs = []

        // The shared thread still serves new connections.
        let again = try makePair(n)
        XCTAssertTrue(LoopbackPeer.wait { again.logA.connected && again.logB.connected })
        var p = rtp(ssrc: again.ssrcA, seq: 7)
        XCTAssertTrue(again.a.sendRTP(&p))
        XCTAssertTrue(LoopbackPeer.wait { again.logB.rtp(ssrc: again.ssrcA) == [rtp(ssrc: again.ssrcA, seq: 7)] })
        XCTAssertLessThanOrEqual(Self.threadCount, threadsBefore + 1)
        XCTAssertEqual(Self.threads(named: SharedUDPIO.threadName), 1)
        again.a.close(); again.b.close()
        XCTAssertTrue(LoopbackPeer.wait { Self.fdCount <= fdsBefore })
    }

    func testDroppedConnectionReleasesItsSockets() throws {
        _ = try SharedUDPIO.shared()
        let fdsBefore = Self.fdCount
        var d: PeerConnectionDriver? = try PeerConnectionDriver(
            config: PeerConnectionConfig(), bind: [TransportAddress("127.0.0.1:0")!, TransportAddress("127.0.0.1:0")!]) { _ in }
        XCTAssertEqual(d?.localAddresses.count, 2)
        XCTAssertEqual(Self.fdCount, fdsBefore + 2)
        d = nil  // never closed
        XCTAssertTrue(LoopbackPeer.wait { Self.fdCount <= fdsBefore }, "\(Self.fdCount) sockets, \(fdsBefore) before: \(Self.openFDs)")
    }

    /// A connection closed and dropped later (its `deinit` runs after `close()`) gives back only what it still holds: a
    /// newer connection whose socket got the port it had keeps that socket. (Both released it: the second release, from
    /// the old connection's `deinit`, closed the newer connection's socket, and its media stopped.)
    func testAClosedConnectionDroppedLaterLeavesTheSocketThatReusedItsPort() throws {
        var old: PeerConnectionDriver? = try PeerConnectionDriver(config: PeerConnectionConfig()) { _ in }
        let address = try XCTUnwrap(old?.localAddresses.first)
        old?.close()
        // The port is free once the IO thread has closed the old socket.
        var reused: Pair?
        XCTAssertTrue(LoopbackPeer.wait { reused = try? makePair(0, bindA: address); return reused != nil }, "\(address) not free again")
        let p = try XCTUnwrap(reused)
        XCTAssertEqual(p.a.localAddresses, [address])
        XCTAssertTrue(LoopbackPeer.wait { p.logA.connected && p.logB.connected })
        old = nil
        for seq in 0..<5 {
            var fromA = rtp(ssrc: p.ssrcA, seq: seq), fromB = rtp(ssrc: p.ssrcB, seq: seq)
            XCTAssertTrue(p.a.sendRTP(&fromA))
            XCTAssertTrue(p.b.sendRTP(&fromB))
        }
        XCTAssertTrue(LoopbackPeer.wait { p.logB.rtp(ssrc: p.ssrcA).count == 5 && p.logA.rtp(ssrc: p.ssrcB).count == 5 },
                      "media both ways on the socket at \(address): \(p.logB.rtp(ssrc: p.ssrcA).count) and \(p.logA.rtp(ssrc: p.ssrcB).count) of 5")
        p.a.close(); p.b.close()
    }

    func testFailedBindReleasesTheSocketsAlreadyBound() throws {
        _ = try SharedUDPIO.shared()
        let fdsBefore = Self.fdCount
        // 192.0.2.1 (TEST-NET-1) is no address of this machine: its bind fails after the loopback one succeeded.
        XCTAssertThrowsError(try PeerConnectionDriver(config: PeerConnectionConfig(),
                                                      bind: [TransportAddress("127.0.0.1:0")!, TransportAddress("192.0.2.1:0")!]) { _ in })
        XCTAssertTrue(LoopbackPeer.wait { Self.fdCount <= fdsBefore }, "\(Self.fdCount) sockets, \(fdsBefore) before")
    }

    func testUnbindClosesOneSocketAndTheThreadKeepsServing() throws {
        let got = Mutex<[(bytes: [UInt8], local: TransportAddress)]>([])
        let udp = try UDPDriver { e in if case .datagram(let b, _, let local, _) = e { got.withLock { $0.append((b, local)) } } }
        udp.start()
        defer { udp.stop() }
        let fdsBefore = Self.fdCount
        let first = try udp.bind(TransportAddress("127.0.0.1:0")!)
        let second = try udp.bind(TransportAddress("127.0.0.1:0")!)
        XCTAssertEqual(Self.fdCount, fdsBefore + 2)
        XCTAssertTrue(udp.unbind(first))
        XCTAssertFalse(udp.unbind(first), "already unbound")
        XCTAssertFalse(udp.send([1], from: first, to: second), "no socket at an unbound address")
        XCTAssertTrue(LoopbackPeer.wait { Self.fdCount == fdsBefore + 1 }, "the unbound socket stays open")
        // The remaining socket still sends and receives on the same thread.
        XCTAssertTrue(udp.send([2, 3], from: second, to: second))
        XCTAssertTrue(LoopbackPeer.wait { got.withLock { $0.count == 1 } })
        XCTAssertEqual(got.withLock { $0.first?.bytes }, [2, 3])
        XCTAssertEqual(got.withLock { $0.first?.local }, second)
    }

    func testUnbindClosesATCPConnection() throws {
        // A TCP listener on loopback for the driver to connect to.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        defer { close(listener) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &sin) { p in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                guard bind(listener, $0, len) == 0, listen(listener, 4) == 0, getsockname(listener, $0, &len) == 0 else { throw XCTSkip("no TCP listener") }
            }
        }
        let server = TransportAddress(ip: .v4(0x7F00_0001), port: UInt16(bigEndian: sin.sin_port))
        let closedEvents = Mutex(0)
        let udp = try UDPDriver { e in if case .closed = e { closedEvents.withLock { $0 += 1 } } }
        udp.start()
        defer { udp.stop() }
        let fdsBefore = Self.fdCount
        let local = try udp.connectTCP(to: server)
        XCTAssertEqual(Self.fdCount, fdsBefore + 1)
        let conn = accept(listener, nil, nil)
        XCTAssertGreaterThanOrEqual(conn, 0)
        defer { close(conn) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buf = [UInt8](repeating: 0, count: 16)
        XCTAssertTrue(udp.send([1, 2, 3], from: local, to: server))
        XCTAssertEqual(recv(conn, &buf, buf.count, 0), 3)
        XCTAssertEqual(Array(buf[0..<3]), [1, 2, 3])
        XCTAssertTrue(udp.unbind(local))
        XCTAssertFalse(udp.send([4], from: local, to: server), "no connection at an unbound address")
        XCTAssertTrue(LoopbackPeer.wait { Self.fdCount == fdsBefore + 1 }, "the unbound connection stays open")  // + the accepted end
        XCTAssertEqual(recv(conn, &buf, buf.count, 0), 0, "the listener's side sees the end of the stream")
        XCTAssertEqual(closedEvents.withLock { $0 }, 0, "an unbound connection is closed by its owner, not reported")
    }
}
