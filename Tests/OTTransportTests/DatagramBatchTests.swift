#if canImport(Glibc)
import Glibc
#endif
import COTShims
import OTBase
@testable import OTTransport
import OTWire
import XCTest

/// `DatagramBatch`: datagrams queued for several destinations go out in one `sendmmsg` (runs of one size to one
/// destination as one UDP GSO buffer where the kernel has it) and arrive whole and in order per destination; a batch
/// receive returns them with their sources and drops truncated ones.
final class DatagramBatchTests: XCTestCase {
    private func udpSocket() throws -> (fd: Int32, address: TransportAddress) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let bound = UDPDriver.withSockaddr(TransportAddress(ip: .v4(0x7F00_0001), port: 0)) { sa, len in bind(fd, sa, len) }
        XCTAssertEqual(bound, 0)
        _ = otshim_set_nonblocking(fd)
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let address = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) == 0 ? UDPDriver.address(from: $0) : nil }
        }
        return (fd, try XCTUnwrap(address))
    }

    /// Receives everything waiting on `fd` (with a batch), waiting up to a second for `expected` datagrams.
    private func drain(_ fd: Int32, expected: Int) -> [(bytes: [UInt8], from: TransportAddress)] {
        let batch = DatagramBatch()
        var out: [(bytes: [UInt8], from: TransportAddress)] = []
        // One buffer for every datagram, as the IO thread uses it: a datagram kept here keeps its bytes.
        var bytes: [UInt8] = []
        for _ in 0..<100 where out.count < expected {
            let n = batch.receive(from: fd)
            for i in 0..<n { if let from = batch.datagram(i, into: &bytes) { out.append((bytes, from)) } }
            if n == 0 { usleep(10_000) }
        }
        return out
    }

    /// A received IPv6 source reads back as the address it was written from (its halves in network order).
    func testIPv6SourceAddressesReadBack() throws {
        let a = try XCTUnwrap(TransportAddress("[2001:db8::1:2]:5004"))
        let read = UDPDriver.withSockaddr(a) { sa, _ in UDPDriver.address(from: sa) }
        XCTAssertEqual(read, a)
        XCTAssertEqual(read?.ip.description, "2001:db8::1:2")
    }

    func testQueuedDatagramsArriveWholeAndInOrderPerDestination() throws {
        let sender = try udpSocket(), a = try udpSocket(), b = try udpSocket()
        defer { close(sender.fd); close(a.fd); close(b.fd) }
        let batch = DatagramBatch()
        // Interleaved like a router's fan-out: equal sizes (a GSO run each), a shorter last one for a, one longer for b.
        var expectA: [[UInt8]] = [], expectB: [[UInt8]] = []
        for i in 0..<20 {
            let pa = [UInt8](repeating: UInt8(i), count: i == 19 ? 300 : 1200)
            let pb = [UInt8](repeating: UInt8(100 + i), count: i == 10 ? 1400 : 1000)
            XCTAssertTrue(batch.queue(pa, fd: sender.fd, to: a.address))
            XCTAssertTrue(batch.queue(pb, fd: sender.fd, to: b.address))
            expectA.append(pa); expectB.append(pb)
        }
        XCTAssertFalse(batch.queue([UInt8](repeating: 0, count: 3000), fd: sender.fd, to: a.address), "too long for a slot")
        batch.flush()
        XCTAssertEqual(batch.count, 0)
        let gotA = drain(a.fd, expected: 20), gotB = drain(b.fd, expected: 20)
        XCTAssertEqual(gotA.map(\.bytes), expectA)
        XCTAssertEqual(gotB.map(\.bytes), expectB)
        XCTAssertTrue(gotA.allSatisfy { $0.from == sender.address })
    }

    func testAFullBatchIsSentBeforeMoreIsQueued() throws {
        let sender = try udpSocket(), a = try udpSocket()
        defer { close(sender.fd); close(a.fd) }
        let batch = DatagramBatch()
        for i in 0..<(DatagramBatch.capacity + 5) { XCTAssertTrue(batch.queue([UInt8(i & 0xFF), 1, 2], fd: sender.fd, to: a.address)) }
        XCTAssertEqual(batch.count, 5)
        batch.flush()
        let got = drain(a.fd, expected: DatagramBatch.capacity + 5)
        XCTAssertEqual(got.map { Int($0.bytes[0]) }, (0..<(DatagramBatch.capacity + 5)).map { $0 & 0xFF })
    }

    func testATruncatedDatagramIsDropped() throws {
        let sender = try udpSocket(), a = try udpSocket()
        defer { close(sender.fd); close(a.fd) }
        for size in [100, DatagramBatch.slot + 1, 200] {
            let bytes = [UInt8](repeating: 7, count: size)
            _ = bytes.withUnsafeBytes { buf in
                UDPDriver.withSockaddr(a.address) { sa, len in sendto(sender.fd, buf.baseAddress, buf.count, 0, sa, len) }
            }
        }
        usleep(50_000)
        let got = drain(a.fd, expected: 2)
        XCTAssertEqual(got.map(\.bytes.count), [100, 200])
    }
}
