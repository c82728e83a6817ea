import Foundation
import Glibc
import OTBase
import OTServer
import OTTransport
import OTWire
import Synchronization

/// The sum of `value(task directory)` over the threads of process `pid` ("self" for this one) whose name passes `thread`.
private func sumOverThreads(pid: String, where thread: (String) -> Bool, _ value: (String) -> Double) -> Double {
    var total = 0.0
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return 0 }
    for t in tasks {
        guard let comm = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/comm", encoding: .utf8),
              thread(comm.trimmingCharacters(in: .whitespacesAndNewlines)) else { continue }
        total += value("/proc/\(pid)/task/\(t)")
    }
    return total
}

/// CPU seconds (user + system) of the threads of process `pid` ("self" for this one) whose name passes
/// `thread`, from /proc/<pid>/task/*/stat.
func threadCPUSeconds(pid: String = "self", where thread: (String) -> Bool) -> Double {
    sumOverThreads(pid: pid, where: thread) { statCPUSeconds("\($0)/stat") }
}

/// CPU seconds (user + system) of this process's threads named `name`.
func threadCPUSeconds(named name: String) -> Double { threadCPUSeconds { $0 == name } }

/// Seconds this process's threads named `name` spent runnable but waiting for a CPU (the second field of
/// /proc/self/task/*/schedstat): how much the machine's load held them back.
private func threadWaitSeconds(named name: String) -> Double {
    sumOverThreads(pid: "self", where: { $0 == name }) { dir in
        guard let s = try? String(contentsOfFile: "\(dir)/schedstat", encoding: .utf8) else { return 0 }
        let fields = s.split(separator: " ")
        return fields.count > 1 ? (Double(fields[1]) ?? 0) / 1e9 : 0
    }
}

/// Datagrams the kernel dropped (receive buffer full) at the UDP sockets bound to `ports`, from /proc/net/udp and udp6
/// (the last column of a socket's line).
private func udpDrops(ports: [UInt16]) -> Int {
    var total = 0
    for file in ["/proc/net/udp", "/proc/net/udp6"] {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 2, let colon = fields[1].lastIndex(of: ":"),
                  let port = UInt16(fields[1][fields[1].index(after: colon)...], radix: 16), ports.contains(port) else { continue }
            total += Int(fields[fields.count - 1]) ?? 0
        }
    }
    return total
}

/// How much the machine's load held our router back over a run: its IO threads' seconds runnable without a CPU, and the
/// datagrams its sockets dropped meanwhile (when it is held back longer than its receive buffer lasts).
struct RouterStarvation {
    var waited: Double
    var drops: Int
    var description: String { "router IO threads waited \(fmt(waited, 2)) s for a CPU, its sockets dropped \(drops) datagrams" }

    /// The figures over `body`, for `router`'s sockets.
    static func during<R>(_ router: MediaRouter, _ body: () throws -> R) rethrows -> (R, RouterStarvation) {
        let ports = router.endpoints.map(\.address.port)
        let wait0 = threadWaitSeconds(named: "otsession-media"), drops0 = udpDrops(ports: ports)
        let r = try body()
        return (r, RouterStarvation(waited: threadWaitSeconds(named: "otsession-media") - wait0, drops: udpDrops(ports: ports) - drops0))
    }
}

/// CPU seconds (user + system, all threads, live ones only) of process `pid`, from /proc/<pid>/stat.
func processCPUSeconds(pid: pid_t) -> Double { statCPUSeconds("/proc/\(pid)/stat") }

/// utime + stime of a /proc stat file, in seconds (0 when it cannot be read).
private func statCPUSeconds(_ path: String) -> Double {
    guard let stat = try? String(contentsOfFile: path, encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return 0 }
    return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The load both SFUs get: 2000 RTP packets/s of 1100-byte VP8-shaped payloads (about 18 Mbit/s) from one
/// publisher for `seconds`. Payloads start with a VP8 payload descriptor (S=1, partition 0) and a payload
/// header whose P bit marks a keyframe (the first packet) or an interframe (the rest). Header extensions as a
/// browser sends them: MID (id 1, negotiated), transport-wide sequence number (id 2, negotiated; the publisher's
/// connection stamps it) and abs-send-time under an id the publisher did not negotiate (5).
struct ForwardingLoad {
    static let ssrc: UInt32 = 0x5EED
    static let payloadBytes = 1100
    static let extensions = try! RTPHeaderExtensions([RTPHeaderExtensionElement(id: 1, value: Array("1".utf8)[...]),
                                                      RTPHeaderExtensionElement(id: 2, value: [0, 0]),
                                                      RTPHeaderExtensionElement(id: 5, value: [1, 2, 3])])
    var rate: Int
    var seconds: Double
    var payloadType: UInt8 = 96
    /// Packets made so far; the next one's sequence number is this modulo 2^16 (the first is 0).
    private(set) var packetsMade = 0

    init(seconds: Double, rate: Int = 2000) { self.seconds = seconds; self.rate = rate }

    mutating func packet(keyframe: Bool) -> [UInt8] {
        var payload = [UInt8](repeating: 0x5A, count: Self.payloadBytes)
        payload[0] = 0x10
        payload[1] = keyframe ? 0x00 : 0x01
        let seq = UInt16(truncatingIfNeeded: packetsMade)
        packetsMade += 1
        return RTPPacket(marker: true, payloadType: payloadType, sequenceNumber: seq, timestamp: UInt32(seq) * 90, ssrc: Self.ssrc,
                         extensions: Self.extensions, payload: payload[...]).serialized()
    }

    /// Sends the paced interframes; returns the number sent and the wall time taken.
    mutating func run(_ publisher: PeerConnectionDriver) -> (sent: Int, wall: Double) {
        let t0 = monotonicSeconds()
        var sent = 0
        while monotonicSeconds() - t0 < seconds {
            let due = Int((monotonicSeconds() - t0) * Double(rate))
            while sent < due {
                var p = packet(keyframe: false)
                _ = publisher.sendRTP(&p)
                sent += 1
            }
            usleep(2000)
        }
        return (sent, monotonicSeconds() - t0)
    }
}

/// The clients of one run, the same for both SFUs: a publisher (index 0) and subscribers 1...n, each a
/// `PeerConnectionDriver` on 127.0.0.1 (video only, AEAD_AES_128_GCM), counting connections and RTP
/// packets (and their bytes) delivered to each subscriber.
final class ForwardingClients: Sendable {
    /// The newest RTP packet a client received: its SSRC, sequence number and payload type, and how often the sequence
    /// numbers wrapped before it (its SRTP rollover counter).
    struct LastPacket: Sendable { var ssrc: UInt32, seq: UInt16, pt: UInt8, roc: UInt32 }
    private let state = Mutex<(connected: Set<Int>, packets: [Int: Int], bytes: Int, last: [Int: LastPacket])>(([], [:], 0, [:]))

    /// Client `i` (0 is the publisher), bound at `address` (port 0).
    func make(_ i: Int, publishing: Bool, address: String = "127.0.0.1") throws -> PeerConnectionDriver {
        var config = PeerConnectionConfig(audio: false, video: true,
                                          videoTrack: publishing ? SDPLocalTrack(ssrc: ForwardingLoad.ssrc, streamID: "b", trackID: "v", cname: "b") : nil)
        config.srtpProfiles = [.aeadAes128Gcm]
        guard let bind = TransportAddress("\(address):0") else { throw BenchError("bad address \(address)") }
        return try PeerConnectionDriver(config: config, bind: [bind]) { [self] e in
            switch e {
            case .connected: state.withLock { _ = $0.connected.insert(i) }
            case .rtp(let p):
                state.withLock { s in
                    s.packets[i, default: 0] += 1
                    s.bytes += p.bytes.count
                    let seq = p.packet.sequenceNumber, old = s.last[i]
                    if let old, Int16(bitPattern: seq &- old.seq) <= 0 { return }  // reordered or repeated
                    let wrapped = old.map { seq < $0.seq } ?? false
                    s.last[i] = LastPacket(ssrc: p.packet.ssrc, seq: seq, pt: p.packet.payloadType, roc: (old?.roc ?? 0) + (wrapped ? 1 : 0))
                }
            default: break
            }
        }
    }

    /// Waits until clients 0...n are connected (bounded); returns whether they are.
    func waitConnected(_ n: Int, seconds: Double = 20) -> Bool {
        waitUntil(seconds) { state.withLock { s in (0...n).allSatisfy { s.connected.contains($0) } } }
    }

    /// Waits until the clients `ids` are connected (bounded); returns whether they are.
    func waitConnected(ids: [Int], seconds: Double = 30) -> Bool {
        waitUntil(seconds) { state.withLock { s in ids.allSatisfy { s.connected.contains($0) } } }
    }

    /// The newest RTP packet client `i` received.
    func lastPacket(_ i: Int) -> LastPacket? { state.withLock { $0.last[i] } }

    /// Packets delivered to each of clients `ids` so far, and all their bytes.
    func delivered(ids: [Int]) -> (packets: [Int], bytes: Int) {
        state.withLock { s in (ids.map { s.packets[$0] ?? 0 }, s.bytes) }
    }

    /// Packets delivered to each of subscribers 1...n so far, and all their bytes.
    func delivered(_ n: Int) -> (packets: [Int], bytes: Int) {
        state.withLock { s in ((1...n).map { s.packets[$0] ?? 0 }, s.bytes) }
    }
}

/// One SFU's figures for one N over the measured window.
struct ForwardingResult {
    var n: Int
    var sent: Int
    var wall: Double
    /// Packets delivered to each subscriber in the window (plus the drain after it).
    var perSubscriber: [Int]
    var bytes: Int
    /// CPU seconds of what the SFU's row counts (see the caller), and for Janus also of its forwarding threads.
    var cpu: Double
    var threadsCPU: Double?
    /// Ours only: how much the machine's load held the router back, and what its IO threads did in the window.
    var starvation: RouterStarvation?
    var io: UDPDriver.Counters?

    var delivered: Int { perSubscriber.reduce(0, +) }
    func perCPUSecond(_ cpu: Double) -> String { cpu > 0 ? whole(Double(delivered) / cpu) : "-" }
}

/// Sends a keyframe, lets it settle, then runs `load` and reads delivered packets and CPU over the window
/// (and a 200 ms drain after it).
func measure(_ clients: ForwardingClients, _ pub: PeerConnectionDriver, n: Int, load: inout ForwardingLoad,
                     cpu: () -> Double, threadsCPU: (() -> Double)? = nil) -> ForwardingResult {
    var k = load.packet(keyframe: true)
    _ = pub.sendRTP(&k)
    usleep(200_000)
    let before = clients.delivered(n)
    let cpu0 = cpu(), threads0 = threadsCPU?()
    let (sent, wall) = load.run(pub)
    usleep(200_000)
    let cpu1 = cpu(), threads1 = threadsCPU?()
    let after = clients.delivered(n)
    return ForwardingResult(n: n, sent: sent, wall: wall, perSubscriber: zip(after.packets, before.packets).map { $0 - $1 },
                            bytes: after.bytes - before.bytes, cpu: cpu1 - cpu0,
                            threadsCPU: threads0.flatMap { t0 in threads1.map { $0 - t0 } })
}

/// What one run of `ot-bench router` sends and how our router runs.
struct RouterRun {
    var seconds: Double
    /// The publisher's packets per second (`--rate`).
    var rate = 2000
}

/// The IO threads' counters of `router` summed over its workers.
private func ioCounters(_ router: MediaRouter) -> UDPDriver.Counters {
    var sum = UDPDriver.Counters()
    for c in router.endpoints.map(\.ioCounters) {
        sum.polls += c.polls; sum.datagrams += c.datagrams; sum.pipeWakeups += c.pipeWakeups; sum.timers += c.timers
    }
    return sum
}

/// `after` minus `before`, counter by counter.
private func difference(_ after: UDPDriver.Counters, _ before: UDPDriver.Counters) -> UDPDriver.Counters {
    var d = after
    d.polls -= before.polls; d.datagrams -= before.datagrams; d.pipeWakeups -= before.pipeWakeups; d.timers -= before.timers
    return d
}

/// Runs `body` (a measured window) and records in its result how the router was held back and what its IO threads did.
private func measuringRouter(_ router: MediaRouter, _ body: () throws -> ForwardingResult) rethrows -> ForwardingResult {
    let io0 = ioCounters(router)
    var (result, starvation) = try RouterStarvation.during(router, body)
    result.starvation = starvation
    result.io = difference(ioCounters(router), io0)
    return result
}

/// Our `MediaRouter` (ICE-lite, one UDP socket) in this process; its cost is its IO thread's CPU time. With `floor`, then
/// the floor forwarder (`FloorForwarder`) on the router's socket with the same clients; its cost is its thread's CPU time.
private func measureOurs(n: Int, _ run: RouterRun, floor: Bool) throws -> (ours: ForwardingResult, floor: ForwardingResult?) {
    let router = try MediaRouter()
    defer { router.stop() }
    let clients = ForwardingClients()
    func offer(_ d: PeerConnectionDriver, peer: String, _ dir: MediaDirection) throws {
        let answer = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: "bench", connectionId: peer, peerId: peer, streamId: "s", direction: dir,
                                             sdp: try d.createOffer())) { r in answer.withLock { $0 = r } }
        guard waitUntil(10, { answer.withLock { $0 != nil } }), let r = answer.withLock({ $0 }) else { throw BenchError("router: no answer") }
        try d.setRemoteAnswer(try r.get())
    }
    let pub = try clients.make(0, publishing: true)
    try offer(pub, peer: "pub", .publish)
    var subs: [PeerConnectionDriver] = []
    defer { pub.close(); for s in subs { s.close() } }
    for i in 1...n {
        let s = try clients.make(i, publishing: false)
        try offer(s, peer: "sub\(i)", .subscribe)
        subs.append(s)
    }
    guard clients.waitConnected(n) else { throw BenchError("router: not every client connected") }
    var load = ForwardingLoad(seconds: run.seconds, rate: run.rate)
    let ours = measuringRouter(router) { measure(clients, pub, n: n, load: &load, cpu: { threadCPUSeconds(named: "otsession-media") }) }
    guard floor else { return (ours, nil) }
    return (ours, try FloorForwarder.run(replacing: router, clients: clients, pub: pub, subs: subs, load: &load))
}

/// Janus's VideoRoom: one room, the publisher joins with our offer, each subscriber answers Janus's offer.
/// Its cost is the whole janus process's CPU time; `threadsCPU` is its per-handle ICE loop threads ("hloop …"),
/// which receive, unprotect, relay through the plugin, protect and send.
private func measureJanus(_ janus: JanusGateway, n: Int, _ run: RouterRun) throws -> ForwardingResult {
    let session = try JanusSession(janus.api)
    defer { session.destroy() }
    let clients = ForwardingClients()
    let room = JSONValue.int(Int64(4200 + n))
    let pubHandle = try session.attachVideoRoom()
    _ = try session.syncMessage(pubHandle, ["request": "create", "room": room, "publishers": 1, "videocodec": "vp8",
                                            "bitrate": 0, "fir_freq": 0, "notify_joining": false])
    let pub = try clients.make(0, publishing: true, address: BenchNamespace.clientAddress)
    var subs: [PeerConnectionDriver] = []
    defer { pub.close(); for s in subs { s.close() } }
    let joined = try session.asyncMessage(pubHandle, ["request": "joinandconfigure", "room": room, "ptype": "publisher", "display": "pub"],
                                          jsep: ["type": "offer", "sdp": .string(try pub.createOffer()), "trickle": false])
    guard let answer = joined.jsep?["sdp"]?.stringValue, let feed = joined.data["id"] else {
        throw BenchError("janus: publisher join without an answer: \(String(decoding: joined.data.serialized(), as: UTF8.self))")
    }
    try pub.setRemoteAnswer(answer)
    // Janus lists the feed for subscribers once the publisher's PeerConnection is up.
    _ = try session.waitEvent { $0["janus"]?.stringValue == "webrtcup" && $0["sender"] == .int(pubHandle) }
    for i in 1...n {
        let handle = try session.attachVideoRoom()
        let attached = try session.asyncMessage(handle, ["request": "join", "room": room, "ptype": "subscriber", "streams": [["feed": feed]]])
        guard let offer = attached.jsep?["sdp"]?.stringValue else {
            throw BenchError("janus: subscriber join without an offer: \(String(decoding: attached.data.serialized(), as: UTF8.self))")
        }
        let s = try clients.make(i, publishing: false, address: BenchNamespace.clientAddress)
        subs.append(s)
        let sdp = try s.createAnswer(toOffer: offer)
        _ = try session.asyncMessage(handle, ["request": "start"], jsep: ["type": "answer", "sdp": .string(sdp), "trickle": false])
    }
    guard clients.waitConnected(n) else { throw BenchError("janus: not every client connected (log: \(janus.logTail()))") }
    var load = ForwardingLoad(seconds: run.seconds, rate: run.rate)
    if let pt = pub.negotiated?.media.first(where: { $0.kind == "video" })?.codec.payloadType { load.payloadType = pt }
    let pid = janus.pid
    return measure(clients, pub, n: n, load: &load, cpu: { processCPUSeconds(pid: pid) },
                   threadsCPU: { threadCPUSeconds(pid: "\(pid)") { $0.hasPrefix("hloop") } })
}

/// Janus at one N, its rows printed, or why it failed: a client that did not connect, or (under load, where its
/// per-subscriber threads contend for the cores) a subscriber that received less than 90 %.
private func measureJanusRow(_ janus: JanusGateway, n: Int, _ run: RouterRun) -> Result<ForwardingResult, BenchError> {
    do {
        let j = try measureJanus(janus, n: n, run)
        printRow(j, "janus")
        if let t = j.threadsCPU {
            print(pad("", 4) + pad("", 7) + "  (janus hloop threads only: \(fmt(t, 2)) s CPU, \(j.perCPUSecond(t)) pkt per CPU-s)")
        }
        try checkEverySubscriber(j, "janus")
        return .success(j)
    } catch {
        return .failure(error as? BenchError ?? BenchError("\(error)"))
    }
}

/// What the router does per packet and subscriber for the header extensions, alone and beside the copy it replaced:
/// `RTPExtensionRewriter.rewrite` of one load packet into a reused buffer (a subscriber that negotiated MID and
/// transport-wide sequence numbers, as ours do) against appending the packet to a reused buffer. Nanoseconds
/// per packet, best of 5 rounds of 200,000.
private func extensionRewriteCost() -> (rewrite: Double, copy: Double) {
    var load = ForwardingLoad(seconds: 0)
    let packet = load.packet(keyframe: false)
    let rewriter = RTPExtensionRewriter(source: RTPHeaderExtensionIds(transportSequenceNumber: 2, mid: 1),
                                        target: RTPHeaderExtensionIds(transportSequenceNumber: 2, mid: 1), mid: "0")
    var out: [UInt8] = []
    out.reserveCapacity(1500)
    var sink = 0
    func best(_ body: () -> Void) -> Double {
        var t = Double.infinity
        for _ in 0..<5 {
            let t0 = monotonicSeconds()
            for _ in 0..<200_000 { body() }
            t = min(t, (monotonicSeconds() - t0) / 200_000 * 1e9)
        }
        return t
    }
    let rewrite = best { rewriter.rewrite(packet, into: &out, now: Instant(micros: Int64(sink))); sink &+= Int(out[3]) }
    let copy = best { out.removeAll(keepingCapacity: true); out.append(contentsOf: packet); sink &+= Int(out[3]) }
    if sink == 42 { print("") }  // keeps the loops' results alive
    return (rewrite, copy)
}

/// The integer after `flag` in `args` (nil when the flag is absent), within `range`.
private func intOption(_ args: [String], _ flag: String, _ range: ClosedRange<Int>) throws -> Int? {
    guard let i = args.firstIndex(of: flag) else { return nil }
    guard i + 1 < args.count, let v = Int(args[i + 1]), range.contains(v) else {
        throw BenchError("\(flag) needs a number, \(range.lowerBound) to \(range.upperBound)")
    }
    return v
}

/// `ot-bench router [--quick] [--janus] [--floor] [--workers K] [--n N,...] [--rate P]`: the forwarding cost of one
/// publisher to N subscribers, each client a full `PeerConnectionDriver` on 127.0.0.1. Ours: a `MediaRouter` in this
/// process; its cost is the CPU time of its IO thread ("otsession-media"), the clients' threads are not counted. With
/// `--floor` (and always with `--janus`), the same clients and load then go through the floor forwarder
/// (`FloorForwarder`: the least an SRTP SFU does, in C, on our router's socket and keys); its cost is its thread's CPU
/// time. With `--janus` (root, Debian package `janus`), the whole run moves into a private network namespace
/// (`BenchNamespace`) and, for each N, the same load also goes through Janus's VideoRoom plugin in its own process. The
/// summary then compares packets delivered per CPU second. `--n` measures only the subscriber counts listed (to profile
/// one); `--rate` sets the publisher's packets per second (2000; e.g. 50 for an audio-like stream).
func runRouterBenchmark(_ args: [String]) throws {
    let quick = args.contains("--quick")
    var run = RouterRun(seconds: quick ? 1.0 : 4.0)
    if let rate = try intOption(args, "--rate", 10...20000) { run.rate = rate }
    if let k = try intOption(args, "--workers", 1...16) { return try runWorkersBenchmark(k, run) }
    var counts = quick ? [1, 4] : [1, 4, 8, 16]
    if let i = args.firstIndex(of: "--n") {
        let listed = i + 1 < args.count ? args[i + 1].split(separator: ",").map { Int($0) } : []
        guard !listed.isEmpty, listed.allSatisfy({ $0.map { (1...64).contains($0) } ?? false }) else {
            throw BenchError("--n needs subscriber counts, 1 to 64, e.g. 1,16")
        }
        counts = listed.compactMap { $0 }
    }
    let withJanus = args.contains("--janus"), withFloor = withJanus || args.contains("--floor")
    if withJanus && !BenchNamespace.isInside {
        // Both SFUs are measured inside the namespace Janus needs, under the same conditions.
        exit(try BenchNamespace.runInside(["router", "--janus"] + args.filter { $0 != "--janus" }))
    }
    let janus = withJanus ? try JanusGateway() : nil
    defer { janus?.stop() }
    print("router forwarding: 1 publisher, N subscribers, \(run.rate) packets/s of \(ForwardingLoad.payloadBytes)-byte payloads in, "
          + "\(fmt(run.seconds)) s per N"
          + (withFloor ? "; then the floor forwarder (C: SRTP and sendmmsg only) on our socket, same clients" : "")
          + (janus != nil ? "; ours and Janus \(janusVersion()) VideoRoom, same clients" : ""))
    let ext = extensionRewriteCost()
    print("per packet and subscriber: header-extension rewrite into a reused buffer \(fmt(ext.rewrite)) ns, plain copy \(fmt(ext.copy)) ns")
    print(pad("N", 4) + pad("SFU", 7) + pad("sent pkt/s", 12) + pad("delivered pkt/s", 17) + pad("min/max per sub", 17)
          + pad("Mbit/s", 8) + pad("CPU", 9) + pad("pkt per CPU-s", 15) + pad("Mbit per CPU-s", 16) + pad("CPU µs/pkt", 11))
    /// Per N: ours, the floor's, and Janus's figures or why Janus failed at that N.
    var rows: [(ours: ForwardingResult, floor: ForwardingResult?, janus: Result<ForwardingResult, BenchError>?)] = []
    for n in counts {
        let (ours, floor) = try measureOurs(n: n, run, floor: withFloor)
        printRow(ours, "ours")
        printStarvation(ours)
        try checkEverySubscriber(ours, "ours")
        if let floor {
            printRow(floor, "floor")
            if let io = floor.io, io.polls > 0 {
                print(pad("", 11) + "  (floor: \(io.polls) wake-ups, \(fmt(Double(io.datagrams) / Double(io.polls), 2)) datagrams and "
                      + "\(fmt(floor.cpu * 1e6 / Double(io.polls), 1)) µs CPU per wake-up)")
            }
            try checkEverySubscriber(floor, "floor")
        }
        // A Janus failure at one N (under load its subscribers can miss packets) is reported in its row; the other N go on.
        let theirs = janus.map { measureJanusRow($0, n: n, run) }
        if case .failure(let e)? = theirs { print(pad("\(n)", 4) + pad("janus", 7) + "  failed: \(e)") }
        rows.append((ours, floor, theirs))
    }
    guard withFloor else { return }
    let perCPU = { (r: ForwardingResult) in Double(r.delivered) / max(r.cpu, 1e-9) }
    print("\nours vs the floor" + (janus != nil ? " and Janus" : "") + ", packets delivered per CPU-second "
          + "(ours: router IO thread; floor: its thread" + (janus != nil ? "; Janus: whole process / hloop threads)" : ")"))
    print(pad("N", 4) + pad("ours", 10) + pad("floor", 10) + pad("ours/floor", 12)
          + (janus != nil ? pad("Janus proc", 12) + pad("ours/Janus", 12) + pad("floor/Janus", 13) + pad("Janus hloop", 13) + pad("ours/hloop", 12) : ""))
    for (o, f, result) in rows {
        let op = perCPU(o), fp = f.map(perCPU)
        var line = pad("\(o.n)", 4) + pad(whole(op), 10) + pad(fp.map { whole($0) } ?? "-", 10) + pad(fp.map { fmt(op / $0, 2) } ?? "-", 12)
        switch result {
        case .success(let j)?:
            let jp = perCPU(j), jt = j.threadsCPU.map { Double(j.delivered) / max($0, 1e-9) }
            line += pad(whole(jp), 12) + pad(fmt(op / jp, 2), 12) + pad(fp.map { fmt($0 / jp, 2) } ?? "-", 13)
                + pad(jt.map { whole($0) } ?? "-", 13) + pad(jt.map { fmt(op / $0, 2) } ?? "-", 12)
        case .failure(let e)?: line += "  Janus failed: \(e)"
        case nil: break
        }
        print(line)
    }
}

/// One `MediaRouter` with `workers` workers; `sessions` sessions, each one publisher and `subscribers` subscribers, the
/// sessions' ids chosen so they spread evenly over the workers. Every publisher sends `ForwardingLoad`'s rate. The
/// router's cost is the CPU time of all its IO threads ("otsession-media").
private func measureWorkers(workers: Int, sessions: Int, subscribers: Int, _ run: RouterRun) throws -> ForwardingResult {
    let router = try MediaRouter(workers: workers)
    defer { router.stop() }
    let clients = ForwardingClients()
    var sessionIds: [String] = []
    var candidate = 0
    while sessionIds.count < sessions {
        let id = "bench-\(candidate)"
        candidate += 1
        if router.workerIndex(sessionId: id) == sessionIds.count % workers { sessionIds.append(id) }
    }
    func offer(_ d: PeerConnectionDriver, session: String, peer: String, _ dir: MediaDirection) throws {
        let answer = Mutex<Result<String, OTError>?>(nil)
        router.handleOffer(MediaOfferRequest(sessionId: session, connectionId: peer, peerId: peer, streamId: "s-\(session)", direction: dir,
                                             sdp: try d.createOffer())) { r in answer.withLock { $0 = r } }
        guard waitUntil(10, { answer.withLock { $0 != nil } }), let r = answer.withLock({ $0 }) else { throw BenchError("router: no answer") }
        try d.setRemoteAnswer(try r.get())
    }
    var pubs: [PeerConnectionDriver] = [], subs: [PeerConnectionDriver] = [], subIds: [Int] = []
    defer { for d in pubs + subs { d.close() } }
    for (k, sid) in sessionIds.enumerated() {
        let base = k * (subscribers + 1)
        let pub = try clients.make(base, publishing: true)
        try offer(pub, session: sid, peer: "pub\(k)", .publish)
        pubs.append(pub)
        for i in 1...subscribers {
            let s = try clients.make(base + i, publishing: false)
            try offer(s, session: sid, peer: "sub\(k)-\(i)", .subscribe)
            subs.append(s)
            subIds.append(base + i)
        }
    }
    guard clients.waitConnected(ids: Array(0..<(sessions * (subscribers + 1)))) else { throw BenchError("router: not every client connected") }
    let seconds = run.seconds
    var loads = pubs.map { _ in ForwardingLoad(seconds: seconds, rate: run.rate) }
    for (i, pub) in pubs.enumerated() {
        var k = loads[i].packet(keyframe: true)
        _ = pub.sendRTP(&k)
    }
    usleep(300_000)
    return measuringRouter(router) { () -> ForwardingResult in
        let before = clients.delivered(ids: subIds)
        let cpu0 = threadCPUSeconds(named: "otsession-media")
        // The publishers' paced loads, interleaved in this thread.
        let rate = loads[0].rate
        let t0 = monotonicSeconds()
        var sent = 0
        while monotonicSeconds() - t0 < seconds {
            let due = Int((monotonicSeconds() - t0) * Double(rate))
            while sent < due {
                for (i, pub) in pubs.enumerated() {
                    var p = loads[i].packet(keyframe: false)
                    _ = pub.sendRTP(&p)
                }
                sent += 1
            }
            usleep(2000)
        }
        let wall = monotonicSeconds() - t0
        usleep(200_000)
        let cpu1 = threadCPUSeconds(named: "otsession-media")
        let after = clients.delivered(ids: subIds)
        return ForwardingResult(n: sessions * subscribers, sent: sent, wall: wall, perSubscriber: zip(after.packets, before.packets).map { $0 - $1 },
                                bytes: after.bytes - before.bytes, cpu: cpu1 - cpu0, threadsCPU: nil)
    }
}

/// `ot-bench router --workers K`: the same load (2K sessions of one publisher and 4 subscribers each) through a router
/// with one worker, then with K; packets delivered per CPU second of the router's IO threads, and the ratio.
private func runWorkersBenchmark(_ k: Int, _ run: RouterRun) throws {
    let sessions = 2 * k, subscribers = 4
    print("router workers: \(sessions) sessions of 1 publisher and \(subscribers) subscribers, \(run.rate) packets/s per publisher, "
          + "\(fmt(run.seconds)) s; router CPU is all its IO threads'")
    print(pad("workers", 9) + pad("sent pkt/s", 12) + pad("delivered pkt/s", 17) + pad("min/max per sub", 17) + pad("CPU", 9)
          + pad("pkt per CPU-s", 15) + pad("CPU µs/pkt", 11))
    var perCPU: [Int: Double] = [:]
    for w in [1, k] {
        let r = try measureWorkers(workers: w, sessions: sessions, subscribers: subscribers, run)
        let minSub = r.perSubscriber.min() ?? 0, maxSub = r.perSubscriber.max() ?? 0
        let share = { (x: Int) in fmt(Double(x) / Double(max(r.sent, 1)) * 100) }
        print(pad("\(w)", 9) + pad(whole(Double(r.sent * sessions) / r.wall), 12) + pad(whole(Double(r.delivered) / r.wall), 17)
              + pad("\(share(minSub))/\(share(maxSub)) %", 17) + pad(fmt(r.cpu, 2) + " s", 9) + pad(r.perCPUSecond(r.cpu), 15)
              + pad(r.delivered > 0 ? fmt(r.cpu * 1e6 / Double(r.delivered), 2) : "-", 11))
        printStarvation(r)
        try checkEverySubscriber(r, "ours, \(w) workers")
        perCPU[w] = Double(r.delivered) / max(r.cpu, 1e-9)
    }
    if let one = perCPU[1], let many = perCPU[k] {
        print("delivered per CPU-second, \(k) workers / 1 worker: \(fmt(many / one, 2))")
    }
}

/// Figures are only worth reporting when the SFU forwarded to every subscriber: each must have received at
/// least 90 % of what the publisher sent in the window.
private func checkEverySubscriber(_ r: ForwardingResult, _ name: String) throws {
    guard let worst = r.perSubscriber.min(), Double(worst) >= 0.9 * Double(r.sent) else {
        throw BenchError("\(name), N = \(r.n): a subscriber received \(r.perSubscriber.min() ?? 0) of \(r.sent) packets"
                         + (r.starvation.map { " (\($0.description))" } ?? ""))
    }
}

/// The lines under one of our rows: how much the machine's load held the router back, and its IO threads' wake-ups
/// (`poll` calls, each a wake-up unless datagrams were already waiting), datagrams received and CPU per wake-up, timer
/// events and wake-ups through the wake pipe.
private func printStarvation(_ r: ForwardingResult) {
    if let s = r.starvation { print(pad("", 11) + "  (\(s.description))") }
    guard let io = r.io, io.polls > 0 else { return }
    print(pad("", 11) + "  (router IO: \(io.polls) wake-ups, \(fmt(Double(io.datagrams) / Double(io.polls), 2)) datagrams and "
          + "\(fmt(r.cpu * 1e6 / Double(io.polls), 1)) µs CPU per wake-up; \(io.timers) timer events, \(io.pipeWakeups) wake-ups through the wake pipe)")
}

private func printRow(_ r: ForwardingResult, _ name: String) {
    let minSub = r.perSubscriber.min() ?? 0, maxSub = r.perSubscriber.max() ?? 0
    let share = { (x: Int) in fmt(Double(x) / Double(max(r.sent, 1)) * 100) }
    print(pad("\(r.n)", 4) + pad(name, 7) + pad(whole(Double(r.sent) / r.wall), 12) + pad(whole(Double(r.delivered) / r.wall), 17)
          + pad("\(share(minSub))/\(share(maxSub)) %", 17) + pad(fmt(Double(r.bytes) * 8 / 1e6 / r.wall), 8) + pad(fmt(r.cpu, 2) + " s", 9)
          + pad(r.perCPUSecond(r.cpu), 15) + pad(r.cpu > 0 ? fmt(Double(r.bytes) * 8 / 1e6 / r.cpu) : "-", 16)
          + pad(r.delivered > 0 ? fmt(r.cpu * 1e6 / Double(r.delivered), 2) : "-", 11))
}

/// "1.1.2" from `dpkg-query`, or "?".
private func janusVersion() -> String {
    let p = Process(), out = Pipe()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/dpkg-query")
    p.arguments = ["-W", "-f", "${Version}", "janus"]
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    guard (try? p.run()) != nil else { return "?" }
    p.waitUntilExit()
    return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
}
