import Foundation
import OTBase
import OTTransport
import OTWire

/// One `PeerConnection` on its own UDP sockets and IO thread, usable from any thread.
///
/// Every call on the connection runs under one lock; what it sends goes out at once and its events are
/// handed, in order, to `onEvent` on the owner's serial `queue`. `close()` sends BYE, stops the IO thread
/// and closes the sockets.
final class MediaLink: @unchecked Sendable {
    private let lock = NSLock()
    private let pc: PeerConnection
    private var driver: UDPDriver?
    private let queue: DispatchQueue
    private let onEvent: @Sendable ([PeerConnectionEvent]) -> Void
    private var closed = false

    /// Binds one socket per local IPv4 address (loopback included) and starts the IO thread.
    init(config: PeerConnectionConfig, queue: DispatchQueue, onEvent: @escaping @Sendable ([PeerConnectionEvent]) -> Void) throws {
        self.queue = queue
        self.onEvent = onEvent
        pc = try PeerConnection(config: config, now: MonotonicClock.now())
        let box = WeakLink()
        let d = try UDPDriver { ev in box.link?.driverEvent(ev) }
        var ips = UDPDriver.hostAddresses(includeIPv6: false, includeLoopback: true)
        if ips.isEmpty, let lo = IPAddress("127.0.0.1") { ips = [lo] }
        for ip in ips {
            guard let a = try? d.bind(TransportAddress(ip: ip, port: 0)) else { continue }
            pc.addLocalCandidate(a)
        }
        driver = d
        box.link = self
        d.start()
    }

    deinit { driver?.stop() }

    /// Our offer (SDP text).
    func createOffer() throws -> String { try locked { try pc.createOffer() } }
    /// Our answer to the peer's offer; connecting starts.
    func createAnswer(offer: String) throws -> String { try locked { try pc.createAnswer(toOffer: offer, now: MonotonicClock.now()) } }
    /// The peer's answer to our offer; connecting starts.
    func setRemoteAnswer(_ sdp: String) throws { try locked { try pc.setRemoteAnswer(sdp, now: MonotonicClock.now()) } }
    /// What both sides agreed, after the descriptions are exchanged.
    var negotiated: SDPNegotiated? { lock.withLock { pc.negotiated } }
    var stats: PeerConnectionStats { lock.withLock { pc.stats } }

    /// A trickled candidate from signaling (`""` ends the candidates); malformed ones are ignored.
    func addRemoteCandidate(_ line: String) {
        locked {
            if line.isEmpty { pc.endOfRemoteCandidates(now: MonotonicClock.now()); return }
            guard let c = try? SDPCandidate(parsing: line) else { Log.warn("media", "ignored a bad remote candidate"); return }
            pc.addRemoteCandidate(c, now: MonotonicClock.now())
        }
    }

    /// Protects and sends an RTP packet (the buffer holds the protected bytes afterwards).
    func sendRTP(_ packet: inout [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        pc.sendRTP(&packet, now: MonotonicClock.now())
        flush()
    }

    /// Sends an RTCP compound packet.
    func sendRTCP(_ packet: [UInt8]) { locked { _ = pc.sendRTCP(packet) } }

    /// Asks the peer for a keyframe of its SSRC.
    func requestKeyframe(ssrc: UInt32) { locked { pc.requestKeyframe(ssrc: ssrc, now: MonotonicClock.now()) } }

    /// The RTP session's NACK counters for a remote SSRC.
    func nackCounters(ssrc: UInt32) -> (recovered: Int, givenUp: Int, outstanding: Int)? {
        lock.withLock { pc.rtpSession.nackCounters(ssrc: ssrc) }
    }

    /// Sends BYE, closes DTLS, stops the IO thread and closes the sockets. Idempotent.
    func close() {
        let d: UDPDriver? = lock.withLock {
            guard !closed else { return nil }
            closed = true
            pc.close(now: MonotonicClock.now())
            flush()
            defer { driver = nil }
            return driver
        }
        d?.stop()
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        let r = try body()
        if !closed { flush() }
        return r
    }

    /// With the lock held: sends what the connection queued, hands its events on, re-arms the timer.
    private func flush() {
        guard let driver else { return }
        while let t = pc.pollTransmit() { _ = driver.send(t.bytes, from: t.source, to: t.destination) }
        var batch: [PeerConnectionEvent] = []
        while let e = pc.pollEvent() { batch.append(e) }
        if !batch.isEmpty {
            let onEvent = onEvent, events = batch
            queue.async { onEvent(events) }
        }
        driver.setDeadline(pc.pollTimeout())
    }

    private func driverEvent(_ ev: UDPDriver.Event) {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        switch ev {
        case .datagram(let bytes, let from, let local, let now): pc.handleReceive(bytes, from: from, local: local, now: now)
        case .timer(let now): pc.handleTimeout(now: now)
        }
        flush()
    }
}

/// Breaks the cycle link → driver → handler → link.
private final class WeakLink: @unchecked Sendable {
    weak var link: MediaLink?
}
