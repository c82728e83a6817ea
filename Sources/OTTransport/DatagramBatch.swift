#if canImport(Glibc)
import Glibc
#endif
import COTShims
import OTWire

/// Preallocated storage for up to `capacity` datagrams, moved with one `recvmmsg` or `sendmmsg` (`COTShims`), so the
/// IO thread's batches allocate nothing. Used on one thread only (the `UDPDriver`'s IO thread).
final class DatagramBatch {
    static let capacity = Int(OTSHIM_BATCH_MAX)
    /// Bytes per datagram slot: longer datagrams are dropped on receive, and sent alone.
    static let slot = 2048

    private let buffer: UnsafeMutablePointer<UInt8>
    private let lens: UnsafeMutablePointer<Int>
    private let addrs: UnsafeMutablePointer<sockaddr_storage>
    private let addrlens: UnsafeMutablePointer<socklen_t>
    /// Datagrams in the batch (received, or queued to send).
    private(set) var count = 0
    /// The socket the queued datagrams go out of.
    private var fd: Int32 = -1
    /// UDP GSO is tried until the kernel refuses it.
    private var gso: Int32 = 1

    init() {
        buffer = .allocate(capacity: Self.capacity * Self.slot)
        lens = .allocate(capacity: Self.capacity)
        addrs = .allocate(capacity: Self.capacity)
        addrlens = .allocate(capacity: Self.capacity)
    }

    deinit {
        buffer.deallocate(); lens.deallocate(); addrs.deallocate(); addrlens.deallocate()
    }

    // MARK: receiving

    /// Receives what `fd` has waiting, up to `capacity` datagrams; returns how many (0: none, or an error).
    func receive(from fd: Int32) -> Int {
        count = max(0, Int(otshim_recv_batch(fd, buffer, Self.slot, UInt32(Self.capacity), lens, addrs)))
        return count
    }

    /// Received datagram `i`: its bytes written into `bytes` (whose storage is reused when nothing else holds it, so a
    /// steady stream allocates nothing) and its source; nil, with `bytes` untouched, when it was truncated or its address
    /// is not IP.
    func datagram(_ i: Int, into bytes: inout [UInt8]) -> TransportAddress? {
        guard i < count, lens[i] >= 0 else { return nil }
        let from = withUnsafePointer(to: &addrs[i]) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { UDPDriver.address(from: $0) } }
        guard let from else { return nil }
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: UnsafeBufferPointer(start: buffer + i * Self.slot, count: lens[i]))
        return from
    }

    // MARK: sending

    /// Queues a datagram from socket `fd`; false when it cannot be queued (too long: send it alone). A full batch, or
    /// one for another socket, is sent first.
    func queue(_ bytes: [UInt8], fd: Int32, to destination: TransportAddress) -> Bool {
        guard bytes.count <= Self.slot, !bytes.isEmpty else { return false }
        if count == Self.capacity || (count > 0 && fd != self.fd) { flush() }
        self.fd = fd
        let i = count
        bytes.withUnsafeBufferPointer { (buffer + i * Self.slot).update(from: $0.baseAddress!, count: $0.count) }
        lens[i] = bytes.count
        UDPDriver.withSockaddr(destination) { sa, len in
            UnsafeMutableRawPointer(addrs + i).copyMemory(from: UnsafeRawPointer(sa), byteCount: Int(len))
            addrlens[i] = len
        }
        count += 1
        return true
    }

    /// Sends the queued datagrams (one `sendmmsg`; runs to one destination as UDP GSO where the kernel has it).
    func flush() {
        guard count > 0 else { return }
        _ = otshim_send_batch(fd, buffer, Self.slot, UInt32(count), lens, addrs, addrlens, &gso)
        count = 0
    }
}
