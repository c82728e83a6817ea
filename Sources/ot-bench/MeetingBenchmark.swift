import Foundation
import Glibc
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire

/// `ot-bench meeting [--publishers 4] [--seconds 60] [--resolution 640x480] [--fps 30] [--relayed]`: N clients in
/// one session, each publishing the test pattern and a tone and subscribing to every other client's stream.
/// Prints the aggregate rendered fps each second, then per subscriber-stream pair: frames rendered, frames out
/// of order, counter gaps, capture-to-render latency and freezes. Passes when every subscriber renders every
/// stream: each pair rendered frames, in order, and was still rendering in the last 2 s of the run.
func runMeetingBenchmark(_ args: [String]) throws {
    let n = try intOption(args, "--publishers", 4)
    let seconds = try intOption(args, "--seconds", 60)
    let fps = try intOption(args, "--fps", 30)
    let relayed = args.contains("--relayed")
    let res = option(args, "--resolution", "640x480").split(separator: "x").compactMap { Int($0) }
    guard res.count == 2, n >= 2 else { throw BenchError("--resolution wants WxH and --publishers at least 2") }
    let (width, height) = (res[0], res[1])
    print("meeting: \(n) clients, each publishing \(width)x\(height) at \(fps) fps + tone and subscribing to the \(n - 1) others, "
          + "\(relayed ? "relayed" : "routed"), \(seconds) s")
    let server = try BenchServer()
    defer { server.stop() }
    let sid = try server.session(relayed: relayed)

    var clients: [(session: Session, delegate: BenchSessionDelegate)] = []
    for _ in 0..<n { clients.append(try server.connect(sid)) }
    defer { for c in clients { try? c.session.disconnect() } }
    var publishers: [(Publisher, StreamRecorder)] = []
    var names: [String: String] = [:]  // stream id -> publisher name
    for (i, c) in clients.enumerated() {
        let rec = StreamRecorder("p\(i)")
        let p = try testPatternPublisher(rec, name: "p\(i)", width: width, height: height, fps: fps, kbps: 600)
        let stream = try publishAndWait(c.session, p, rec)
        names[stream.id] = "p\(i)"
        publishers.append((p, rec))
    }
    var pairs: [(label: String, subscriber: Subscriber, rec: StreamRecorder, client: Int, subscribedAt: Double)] = []
    for (i, c) in clients.enumerated() {
        guard waitUntil(15, { c.delegate.streams.count >= n - 1 }) else {
            throw BenchError("client \(i) saw \(c.delegate.streams.count) of \(n - 1) streams")
        }
        for stream in c.delegate.streams.values.sorted(by: { names[$0.id, default: ""] < names[$1.id, default: ""] }) {
            let label = "c\(i) <- \(names[stream.id, default: stream.id])"
            let rec = StreamRecorder(label)
            let sub = Subscriber(stream: stream, delegate: rec)
            let at = monotonicSeconds()
            try c.session.subscribe(sub)
            pairs.append((label, sub, rec, i, at))
        }
    }
    print("\(publishers.count) publishers, \(pairs.count) subscribers; router peers: \(server.router.peerCount)")

    let t0 = monotonicSeconds()
    var last = 0
    var perSecond: [Int] = []
    for s in 1...seconds {
        let due = t0 + Double(s)
        while monotonicSeconds() < due { usleep(UInt32(max(1000, (due - monotonicSeconds()) * 1e6))) }
        let total = pairs.reduce(0) { $0 + $1.rec.frames }
        perSecond.append(total - last)
        let rendering = pairs.filter { ($0.rec.lastFrameAt ?? 0) > monotonicSeconds() - 1 }.count
        print("t=\(pad("\(s)", 3)) s  aggregate \(pad("\(total - last)", 4)) fps  (\(rendering)/\(pairs.count) pairs rendered in the last second)")
        last = total
    }
    let end = monotonicSeconds()

    print("\n" + "pair".padding(toLength: 10, withPad: " ", startingAt: 0) + pad("frames", 8) + pad("fps", 7) + pad("in order", 10)
          + pad("gaps", 6) + pad("1st fr.", 9) + pad("p50 ms", 8) + pad("p95 ms", 8) + pad("p99 ms", 8) + pad("freezes", 9)
          + pad("frozen s", 10) + pad("lost pkts", 11))
    var failures: [String] = []
    var all = LatencyStats(capacity: 1_000_000)
    for p in pairs {
        let r = p.rec, st = p.subscriber.stats, lat = r.latency.summary
        let first = r.firstFrameAt.map { whole(($0 - p.subscribedAt) * 1000) + " ms" } ?? "-"
        print(p.label.padding(toLength: 10, withPad: " ", startingAt: 0) + pad("\(r.frames)", 8) + pad(fmt(Double(r.frames) / (end - t0)), 7)
              + pad("\(r.frames - r.outOfOrder - r.unstamped)", 10) + pad("\(r.missing)", 6) + pad(first, 9)
              + pad(lat.map { fmt($0.p50) } ?? "-", 8) + pad(lat.map { fmt($0.p95) } ?? "-", 8) + pad(lat.map { fmt($0.p99) } ?? "-", 8)
              + pad("\(st.freezeCount)", 9) + pad(fmt(st.totalFreezesDurationSeconds, 2), 10) + pad("\(st.videoPacketsLost)", 11))
        if let f = r.failure { failures.append("\(p.label): failed \(f)") }
        if r.frames == 0 { failures.append("\(p.label): no frame rendered") }
        else if (r.lastFrameAt ?? 0) < end - 2 { failures.append("\(p.label): stopped rendering \(fmt(end - (r.lastFrameAt ?? 0))) s before the end") }
        if r.outOfOrder > 0 { failures.append("\(p.label): \(r.outOfOrder) frames out of order") }
        if r.unstamped > 0 { failures.append("\(p.label): \(r.unstamped) frames without a readable stamp") }
    }
    for p in pairs { for l in p.rec.latencySamples { all.add(micros: l) } }
    let sorted = perSecond.sorted()
    print("\naggregate fps per second: min \(sorted.first ?? 0), median \(whole(median(perSecond.map(Double.init)))), max \(sorted.last ?? 0) "
          + "(ideal \(pairs.count * fps))")
    print("capture-to-render latency, all pairs: \(latencyLine(all))")
    print("publisher stats: " + publishers.map { p, r in
        let s = p.stats
        return "\(r.name) \(whole(s.videoBitrateBps / 1000)) kbit/s"
    }.joined(separator: ", "))
    if let c = server.router.counters(streamId: publishers[0].0.stream?.id ?? "") {
        print("router, p0's stream: packets in \(c.packetsIn), out \(c.packetsOut)")
    }
    for p in pairs { try? clients[p.client].session.unsubscribe(p.subscriber) }
    if failures.isEmpty {
        print("PASS: every subscriber rendered every stream (\(pairs.count) pairs) until the end")
    } else {
        print("FAIL:\n  " + failures.joined(separator: "\n  "))
        exit(1)
    }
}
