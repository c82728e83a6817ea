import COTBenchFloor
import Foundation
import Glibc
import OTServer
import OTTransport
import OTWire

/// The floor baseline of `ot-bench router --floor`: the least any SRTP SFU does for the same load, written directly in C
/// (`COTBenchFloor`: `poll` + `recvmmsg`, `srtp_unprotect`, per subscriber a copy with its SSRC, sequence number and
/// payload type rewritten, `srtp_protect` with its key, `sendmmsg` with UDP GSO through `otshim_send_batch`; no RTCP, no
/// NACK history, no header-extension rewriting), run with the same clients right after our router's window.
///
/// It is keyed, not negotiated: the clients did ICE and DTLS with our router, so the floor takes over the router's socket
/// (its IO thread parked in a wait meanwhile, its connections open: no close_notify or BYE reaches the clients) and the SRTP keys the
/// clients negotiated with it (the publisher's send key, each subscriber's receive key), and continues each subscriber's
/// SSRC, sequence numbers, payload type and rollover counter where the router left them.
struct FloorForwarder {
    static let threadName = "ot-bench-floor"

    /// The router's socket: the descriptor of this process bound to `address` (the router keeps it open until it stops).
    private static func socket(boundTo address: TransportAddress) -> Int32? {
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        for name in fds {
            guard let fd = Int32(name) else { continue }
            var sa = sockaddr_in(), len = socklen_t(MemoryLayout<sockaddr_in>.size)
            let ok = withUnsafeMutablePointer(to: &sa) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) == 0 }
            }
            guard ok, sa.sin_family == sa_family_t(AF_INET), case .v4(let ip) = address.ip,
                  UInt32(bigEndian: sa.sin_addr.s_addr) == ip, UInt16(bigEndian: sa.sin_port) == address.port else { continue }
            var type: Int32 = 0, tlen = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0, type == Int32(SOCK_DGRAM.rawValue) { return fd }
        }
        return nil
    }

    /// Parks `router`'s IO thread (one worker), starts the floor on its socket for `pub` and `subs` (client i + 1 is
    /// `subs[i]`) and measures it over the same load as `measure` measured ours.
    static func run(replacing router: MediaRouter, clients: ForwardingClients, pub: PeerConnectionDriver, subs: [PeerConnectionDriver],
                        load: inout ForwardingLoad) throws -> ForwardingResult {
        guard router.endpoints.count == 1, let endpoint = router.endpoints.first else { throw BenchError("floor: needs a router of one worker") }
        guard let pubKeys = pub.withPeerConnection({ pc, _ in pc.transport?.dtls.keyingMaterial }) else {
            throw BenchError("floor: the publisher has no SRTP keys")
        }
        let pubKey = pubKeys.localKey + pubKeys.localSalt
        var keys: [UInt8] = []  // each subscriber's key and salt, one after the other
        var subscribers: [otbench_floor_subscriber] = []
        for (k, s) in subs.enumerated() {
            guard let km = s.withPeerConnection({ pc, _ in pc.transport?.dtls.keyingMaterial }),
                  let route = s.withPeerConnection({ pc, _ in pc.transport?.ice.selectedRoute }), case .v4(let ip) = route.local.ip,
                  let last = clients.lastPacket(k + 1) else { throw BenchError("floor: subscriber \(k + 1) has no keys, route or packet") }
            keys += km.remoteKey + km.remoteSalt
            let pubLast = UInt16(truncatingIfNeeded: load.packetsMade - 1)
            subscribers.append(otbench_floor_subscriber(ipv4: ip, port: route.local.port, ssrc: last.ssrc, seq_offset: last.seq &- pubLast,
                                                        payload_type: last.pt, roc: last.roc, key: nil, key_len: 0))
        }
        // The router's IO thread waits in work of ours (so it reads nothing) until the floor is done.
        let parked = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        endpoint.async { parked.signal(); resume.wait() }
        defer { resume.signal() }
        guard parked.wait(timeout: .now() + 10) == .success else { throw BenchError("floor: the router's IO thread did not park") }
        guard let fd = socket(boundTo: endpoint.address) else { throw BenchError("floor: the router's socket was not found") }
        var error: Int32 = 0
        let floor: OpaquePointer? = keys.withUnsafeBufferPointer { all in
            let each = pubKey.count
            for i in subscribers.indices { subscribers[i].key = all.baseAddress.map { $0 + i * each }; subscribers[i].key_len = each }
            return otbench_floor_start(fd, UInt32(pubKeys.profile.rawValue), ForwardingLoad.ssrc, UInt32(load.packetsMade >> 16),
                                       pubKey, pubKey.count, subscribers, UInt32(subscribers.count), threadName, &error)
        }
        guard let floor else { throw BenchError("floor: otbench_floor_start failed (\(error))") }
        defer { otbench_floor_stop(floor) }
        var before = otbench_floor_counters(), after = otbench_floor_counters()
        otbench_floor_read(floor, &before)
        var result = measure(clients, pub, n: subs.count, load: &load, cpu: { threadCPUSeconds(named: threadName) })
        otbench_floor_read(floor, &after)
        var io = UDPDriver.Counters()
        io.polls = Int(after.wakeups - before.wakeups)
        io.datagrams = Int(after.received - before.received)
        result.io = io
        return result
    }
}
