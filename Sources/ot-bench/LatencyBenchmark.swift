import Foundation
import Glibc
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire

/// `ot-bench latency [--seconds 20] [--subscribes 7] [--resolution 640x480] [--fps 30]`: in a routed and then a
/// relayed session, one client publishes the test pattern and another subscribes. First the time from
/// `subscribe` to the first rendered frame, over several subscribe/unsubscribe rounds (median), then
/// capture-to-render latency percentiles over `--seconds` of one subscription. Fails when a mode renders
/// no frame or a subscribe gets no first frame.
func runLatencyBenchmark(_ args: [String]) throws {
    let seconds = try intOption(args, "--seconds", 20)
    let rounds = try intOption(args, "--subscribes", 7)
    let fps = try intOption(args, "--fps", 30)
    let res = option(args, "--resolution", "640x480").split(separator: "x").compactMap { Int($0) }
    guard res.count == 2 else { throw BenchError("--resolution wants WxH") }
    print("latency: 1 publisher (\(res[0])x\(res[1]) at \(fps) fps + tone), 1 subscriber; \(rounds) subscribes, then \(seconds) s, per mode")
    var rows: [String] = []
    var failures: [String] = []
    for relayed in [false, true] {
        let mode = relayed ? "relayed" : "routed"
        let server = try BenchServer()
        defer { server.stop() }
        let pair = try PublishedPair(server, relayed: relayed, name: "cam", width: res[0], height: res[1], fps: fps, kbps: 800)
        defer { pair.close() }
        let (a, b, publisher, stream) = (pair.a, pair.b, pair.publisher, pair.stream)

        var firstFrames: [Double] = []
        for _ in 0..<rounds {
            let rec = StreamRecorder("subscriber")
            let sub = Subscriber(stream: stream, delegate: rec)
            let t = monotonicSeconds()
            try b.subscribe(sub)
            if waitUntil(15, { rec.firstFrameAt != nil || rec.failure != nil }), let first = rec.firstFrameAt {
                firstFrames.append((first - t) * 1000)
            } else {
                failures.append("\(mode): a subscribe rendered no frame in 15 s")
            }
            try b.unsubscribe(sub)
        }
        let rec = StreamRecorder("subscriber")
        let sub = Subscriber(stream: stream, delegate: rec)
        try b.subscribe(sub)
        waitUntil(15) { rec.frames > 0 }
        usleep(1_000_000)  // past the first keyframe's burst
        let skip = rec.latencySamples.count
        usleep(UInt32(seconds) * 1_000_000)
        var lat = LatencyStats(capacity: 1_000_000)
        for l in rec.latencySamples.dropFirst(skip) { lat.add(micros: l) }
        let st = sub.stats
        try b.unsubscribe(sub)
        let ff = firstFrames.sorted()
        print("\(mode): subscribe -> first frame, ms: " + ff.map { whole($0) }.joined(separator: " ")
              + "  (median \(whole(median(ff))))")
        print("\(mode): capture -> render over \(seconds) s: \(latencyLine(lat)); frames \(rec.frames), out of order \(rec.outOfOrder), "
              + "counter gaps \(rec.missing), freezes \(st.freezeCount), lost packets \(st.videoPacketsLost)")
        if let s = lat.summary {
            rows.append("| \(mode) | \(whole(median(ff))) ms (\(ff.count) subscribes, \(whole(ff.first ?? 0))–\(whole(ff.last ?? 0))) "
                        + "| \(fmt(s.p50)) | \(fmt(s.p95)) | \(fmt(s.p99)) | \(fmt(s.max)) | \(s.count) |")
        } else {
            failures.append("\(mode): no stamped frame rendered")
        }
        if rec.outOfOrder > 0 { failures.append("\(mode): \(rec.outOfOrder) frames out of order") }
        try a.unpublish(publisher)
    }
    print("\n| mode | subscribe → first frame, median (range) | p50 ms | p95 ms | p99 ms | max ms | frames |\n|---|---|---|---|---|---|---|")
    rows.forEach { print($0) }
    if failures.isEmpty { print("PASS") } else {
        print("FAIL: " + failures.joined(separator: "; "))
        exit(1)
    }
}
