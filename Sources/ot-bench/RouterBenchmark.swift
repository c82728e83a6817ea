import Foundation
import Glibc
import OTBase
import OTServer
import OTTransport
import OTWire
import Synchronization

/// CPU seconds (user + system) of this process's threads named `name`, from /proc/self/task/*/stat.
func threadCPUSeconds(named name: String) -> Double {
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    var total = 0.0
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return 0 }
    for t in tasks {
        guard let comm = try? String(contentsOfFile: "/proc/self/task/\(t)/comm", encoding: .utf8),
              comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
              let stat = try? String(contentsOfFile: "/proc/self/task/\(t)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { continue }
        total += (u + s) / ticks
    }
    return total
}

/// `ot-bench router [--quick]`: the media router's forwarding cost. One publisher and N subscribers, each a
/// full `PeerConnectionDriver` on 127.0.0.1, connected through a `MediaRouter` (ICE-lite, one UDP socket)
/// in this process. The publisher sends 1100-byte VP8-shaped RTP packets at a fixed rate; the router
/// unprotects, copies per subscriber, protects and sends. Its cost is the CPU time of its IO thread
/// ("otsession-media"), read from /proc; clients run on their own threads and are not counted.
func runRouterBenchmark(_ args: [String]) throws {
    let quick = args.contains("--quick")
    // --twcc: packets carry the transport-wide sequence number as publishers send them, so the router also records
    // arrivals and sends feedback upstream, renumbers per subscriber, and takes subscribers' feedback.
    let twcc = args.contains("--twcc")
    let seconds = quick ? 1.0 : 4.0
    let rate = 2000  // packets/s from the publisher (about 18 Mbit/s)
    print("router forwarding: 1 publisher, N subscribers, \(rate) packets/s of 1100-byte payloads in, \(fmt(seconds)) s per N"
          + (twcc ? ", transport-wide sequence numbers and feedback" : ""))
    print(pad("N", 4) + pad("in pkt/s", 10) + pad("out pkt/s", 11) + pad("out Mbit/s", 12) + pad("router CPU", 12)
          + pad("out pkt per CPU-s", 19) + pad("out Mbit per CPU-s", 20) + pad("recv'd/sent", 13))
    for n in quick ? [1, 4] : [1, 4, 8, 16] {
        let router = try MediaRouter()
        defer { router.stop() }
        let video: UInt32 = 0x5EED
        let events = Mutex<[Int: Int]>([:])
        func client(_ i: Int, track: Bool) throws -> PeerConnectionDriver {
            try PeerConnectionDriver(config: PeerConnectionConfig(audio: false, video: true,
                                                                  videoTrack: track ? SDPLocalTrack(ssrc: video, streamID: "b", trackID: "v", cname: "b") : nil)) { e in
                switch e {
                case .connected: events.withLock { $0[-1 - i, default: 0] += 1 }
                case .rtp: events.withLock { $0[i, default: 0] += 1 }
                default: break
                }
            }
        }
        func offer(_ d: PeerConnectionDriver, peer: String, _ dir: MediaDirection) throws {
            let answer = Mutex<Result<String, OTError>?>(nil)
            router.handleOffer(MediaOfferRequest(sessionId: "bench", connectionId: peer, peerId: peer, streamId: "s", direction: dir,
                                                 sdp: try d.createOffer())) { r in answer.withLock { $0 = r } }
            while answer.withLock({ $0 == nil }) { usleep(1000) }
            try d.setRemoteAnswer(try answer.withLock { $0 }!.get())
        }
        let pub = try client(0, track: true)
        try offer(pub, peer: "pub", .publish)
        var subs: [PeerConnectionDriver] = []
        for i in 1...n {
            let s = try client(i, track: false)
            try offer(s, peer: "sub\(i)", .subscribe)
            subs.append(s)
        }
        let deadline = monotonicSeconds() + 20
        while events.withLock({ e in (0...n).contains { e[-1 - $0] == nil } }) && monotonicSeconds() < deadline { usleep(2000) }
        // Every subscriber waits for a keyframe first: send one.
        var seq: UInt16 = 0
        func packet(keyframe: Bool) -> [UInt8] {
            var payload = [UInt8](repeating: 0x5A, count: 1100)
            payload[0] = 0x10
            payload[1] = keyframe ? 0x00 : 0x01
            defer { seq &+= 1 }
            let ext = twcc ? (try? RTPHeaderExtensions([RTPHeaderExtensionElement(id: SDPNegotiation.transportCCExtensionId, value: [0, 0][...])])) : nil
            return RTPPacket(marker: true, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(seq) * 90, ssrc: video,
                             extensions: ext ?? RTPHeaderExtensions(), payload: payload[...]).serialized()
        }
        var k = packet(keyframe: true)
        pub.sendRTP(&k)
        usleep(200_000)

        let before = router.counters(streamId: "s") ?? RoutedStreamCounters()
        let cpu0 = threadCPUSeconds(named: "otsession-media")
        let t0 = monotonicSeconds()
        var sent = 0
        while monotonicSeconds() - t0 < seconds {
            let due = Int((monotonicSeconds() - t0) * Double(rate))
            while sent < due {
                var p = packet(keyframe: false)
                pub.sendRTP(&p)
                sent += 1
            }
            usleep(2000)
        }
        let wall = monotonicSeconds() - t0
        usleep(200_000)  // let the router drain what was sent
        let cpu = threadCPUSeconds(named: "otsession-media") - cpu0
        let after = router.counters(streamId: "s") ?? RoutedStreamCounters()
        let outPackets = Double(after.packetsOut - before.packetsOut), outBytes = Double(after.bytesOut - before.bytesOut)
        let received = events.withLock { e in (1...n).reduce(0) { $0 + (e[$1] ?? 0) } }
        print(pad("\(n)", 4) + pad(fmt(Double(after.packetsIn - before.packetsIn) / wall, 0), 10) + pad(fmt(outPackets / wall, 0), 11)
              + pad(fmt(outBytes * 8 / 1e6 / wall), 12) + pad(fmt(cpu, 2) + " s", 12)
              + pad(cpu > 0 ? fmt(outPackets / cpu, 0) : "-", 19) + pad(cpu > 0 ? fmt(outBytes * 8 / 1e6 / cpu) : "-", 20)
              + pad(fmt(Double(received) / max(outPackets + Double(n), 1) * 100) + " %", 13))
        pub.close()
        for s in subs { s.close() }
    }
}
