import COTHeapUsage
import Foundation
import Glibc
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire

/// One connect / publish / subscribe / receive a few frames / unsubscribe / unpublish / disconnect cycle of two
/// clients A (publishing 320x240 at 15 fps + tone) and B (subscribing); throws when a step does not complete.
/// Weak references to a cycle's objects: every one should be gone once the cycle has ended.
final class CycleObjects: @unchecked Sendable {
    weak var a: Session?, b: Session?, publisher: Publisher?, subscriber: Subscriber?
    var alive: [String] {
        [("session A", a as AnyObject?), ("session B", b), ("publisher", publisher), ("subscriber", subscriber)].compactMap { $0.1 == nil ? nil : $0.0 }
    }
}

/// How much of the cycle runs (`--phase`), to tell which part holds memory: both clients connect and disconnect;
/// A also publishes and unpublishes; or the whole cycle with B subscribing.
enum CyclePhase: String { case connect, publish, subscribe }

func publishSubscribeCycle(_ server: BenchServer, _ sid: String, frames: Int = 3, phase: CyclePhase = .subscribe,
                           objects: CycleObjects? = nil) throws {
    let (a, aDelegate) = try server.connect(sid)
    let (b, bDelegate) = try server.connect(sid)
    objects?.a = a; objects?.b = b
    func disconnect() throws {
        try b.disconnect()
        try a.disconnect()
        guard waitUntil(15, { aDelegate.disconnected && bDelegate.disconnected }) else { throw BenchError("no sessionDidDisconnect") }
    }
    if phase == .connect { return try disconnect() }
    let pubRec = StreamRecorder("publisher")
    let publisher = try testPatternPublisher(pubRec, name: "cam", width: 320, height: 240, fps: 15, kbps: 300)
    let stream = try publishAndWait(a, publisher, pubRec)
    guard waitUntil(15, { bDelegate.streams[stream.id] != nil }) else { throw BenchError("B did not see the stream") }
    objects?.publisher = publisher
    if phase == .publish {
        try a.unpublish(publisher)
        guard waitUntil(15, { pubRec.streamDestroyed }) else { throw BenchError("no streamDestroyed after unpublish") }
        return try disconnect()
    }
    let subRec = StreamRecorder("subscriber")
    let subscriber = Subscriber(stream: stream, delegate: subRec)
    objects?.subscriber = subscriber
    try b.subscribe(subscriber)
    guard waitUntil(15, { subRec.frames >= frames || subRec.failure != nil }), subRec.failure == nil else {
        throw BenchError("subscriber rendered \(subRec.frames) frames (\(subRec.failure.map { "\($0)" } ?? "timed out"))")
    }
    // The subscription is over when unsubscribe returns (no subscriber message follows).
    try b.unsubscribe(subscriber)
    try a.unpublish(publisher)
    guard waitUntil(15, { pubRec.streamDestroyed }) else { throw BenchError("no streamDestroyed after unpublish") }
    try disconnect()
}

/// `ot-bench cycles [--count 100] [--relayed] [--phase connect|publish|subscribe] [--idle 6] [--trim]`: repeated publish/subscribe
/// cycles; open fds, threads, RSS, malloc's heap in use and the exact live allocations after a warm-up and at the end. Passes when every
/// cycle's objects are freed, fds and threads return to their warm-up level (fds ± 2, threads ± 4: lazily made runtime threads), and
/// the live allocations (less libdispatch's cached continuations) grow by at most 64 KiB and by fewer blocks than there were cycles, as
/// in `CyclesTests`. RSS is reported, not judged: it follows what glibc's arenas keep free after the codecs' peaks.
func runCyclesBenchmark(_ args: [String]) throws {
    let count = try intOption(args, "--count", 100)
    let relayed = args.contains("--relayed")
    guard let phase = CyclePhase(rawValue: option(args, "--phase", "subscribe")) else { throw BenchError("--phase wants connect, publish or subscribe") }
    let warmup = 10  // allocator arenas and runtime threads are made over the first cycles
    // Two samples at each end. Busy: right after the cycles, with Dispatch's worker threads still alive (RSS is
    // compared there: threads that end and come back take and give back their stacks and arenas' pages). Idle: after
    // `--idle` seconds, when Dispatch has ended its idle workers and what a thread held (its malloc cache, runtime
    // caches) went with it (the heap in use is compared there).
    let idleSeconds = try intOption(args, "--idle", 6)
    // --trim: malloc_trim(0) before the idle samples, to tell memory malloc keeps free from memory in use.
    let trim = args.contains("--trim")
    let liveBytesBound = 64 * 1024
    let steps = ["connect": "connect/disconnect", "publish": "connect/publish/unpublish/disconnect",
                 "subscribe": "connect/publish/subscribe/3 frames/unsubscribe/unpublish/disconnect"][phase.rawValue] ?? ""
    print("cycles: \(warmup) warm-up + \(count) \(steps) cycles, \(relayed ? "relayed" : "routed")"
          + (trim ? "; malloc_trim(0) before the idle samples" : ""))
    let server = try BenchServer()
    defer { server.stop() }
    let sid = try server.session(relayed: relayed)
    func settle(to base: ProcessResources?) -> (busy: ProcessResources, idle: ProcessResources) {
        // Released resources go away asynchronously (IO threads join, the router drops peers): wait for them.
        waitUntil(5) {
            let r = ProcessResources.sample()
            return server.router.peerCount == 0 && server.server.mediaPeerCount == 0
                && (base.map { r.fds <= $0.fds && r.threads <= $0.threads } ?? true)
        }
        usleep(200_000)
        let busy = ProcessResources.sample()
        usleep(UInt32(idleSeconds) * 1_000_000)
        if trim { _ = ot_heap_trim() }
        return (busy, ProcessResources.sample())
    }
    let start = ProcessResources.sample()
    print("start:                    \(start)")
    for _ in 0..<warmup { try publishSubscribeCycle(server, sid, phase: phase) }
    let (base, baseIdle) = settle(to: nil)
    print("after \(warmup) warm-up cycles:  \(base)")
    print("  then \(idleSeconds) s idle:          \(baseIdle)")
    let t0 = monotonicSeconds()
    var samples: [(Int, ProcessResources)] = []
    var survivors: [String] = []
    for i in 1...count {
        // Each cycle's objects are checked once it has ended (and the weak references dropped with it).
        let o = CycleObjects()
        try publishSubscribeCycle(server, sid, phase: phase, objects: o)
        waitUntil(5) { o.alive.isEmpty }
        survivors += o.alive
        if i % max(1, count / 10) == 0 {
            let r = ProcessResources.sample()
            samples.append((i, r))
            print("after \(pad("\(i)", 4)) cycles:         \(r)  (\(fmt((monotonicSeconds() - t0) / Double(i), 2)) s/cycle)")
        }
    }
    let (end, endIdle) = settle(to: base)
    let growth = end.rssBytes - base.rssBytes
    print("end (settled):            \(end)")
    print("  then \(idleSeconds) s idle:          \(endIdle)")
    let tracked = [CyclePhase.connect: 2, .publish: 3, .subscribe: 4][phase] ?? 4
    print("objects still alive after their cycle: \(survivors.count) of \(tracked * count)"
          + (survivors.isEmpty ? "" : " (\(Dictionary(grouping: survivors, by: { $0 }).map { "\($0.key) \($0.value.count)" }.sorted().joined(separator: ", ")))"))
    print("router peers \(server.router.peerCount), server media peers \(server.server.mediaPeerCount)")
    let heapGrowth = Double(endIdle.heapInUse - baseIdle.heapInUse) / 1024
    print("heap in use growth over \(count) cycles (idle samples): \(whole(heapGrowth)) KiB = \(fmt(heapGrowth / Double(count))) KiB per cycle")
    let liveGrowth = endIdle.liveBytes - baseIdle.liveBytes, liveBlocksGrowth = endIdle.liveBlocks - baseIdle.liveBlocks
    print("live allocations growth over \(count) cycles (idle samples, less Dispatch's continuations): \(whole(Double(liveGrowth) / 1024)) KiB "
          + "in \(liveBlocksGrowth) blocks = \(liveGrowth / count) bytes per cycle (bound \(liveBytesBound / 1024) KiB and fewer blocks than cycles)")
    let idleRSS = Double(endIdle.rssBytes - baseIdle.rssBytes) / 1024
    print("RSS growth between the idle samples: \(whole(idleRSS)) KiB = \(fmt(idleRSS / Double(count))) KiB per cycle")
    print("RSS growth over \(count) cycles: \(whole(Double(growth) / 1024)) KiB = \(fmt(Double(growth) / 1024 / Double(count))) KiB per cycle")
    if samples.count >= 4 {
        // The slope over the second half, where allocator pools have filled: growth that keeps going.
        let half = samples[samples.count / 2], lastSample = samples[samples.count - 1]
        let slope = Double(lastSample.1.rssBytes - half.1.rssBytes) / Double(lastSample.0 - half.0)
        let heapSlope = Double(lastSample.1.heapInUse - half.1.heapInUse) / Double(lastSample.0 - half.0)
        let liveSlope = Double(lastSample.1.liveBytes - half.1.liveBytes) / Double(lastSample.0 - half.0)
        print("slope over cycles \(half.0)–\(lastSample.0): RSS \(fmt(slope / 1024)) KiB per cycle, heap in use \(fmt(heapSlope / 1024)) KiB per cycle, "
              + "live allocations \(fmt(liveSlope / 1024)) KiB per cycle")
    }
    var failures: [String] = []
    if end.fds > base.fds + 2 { failures.append("fds \(base.fds) -> \(end.fds)") }
    if end.threads > base.threads + 4 { failures.append("threads \(base.threads) -> \(end.threads)") }
    if !survivors.isEmpty { failures.append("\(survivors.count) objects outlived their cycle") }
    if liveGrowth > liveBytesBound || liveBlocksGrowth >= count {
        failures.append("live allocations grew \(liveGrowth) bytes in \(liveBlocksGrowth) blocks")
    }
    if server.router.peerCount != 0 || server.server.mediaPeerCount != 0 { failures.append("media peers left on the server") }
    if failures.isEmpty {
        print("PASS: objects freed, fds and threads back to the warm-up level, live allocations within bound")
    } else {
        print("FAIL: " + failures.joined(separator: "; "))
        exit(1)
    }
}
