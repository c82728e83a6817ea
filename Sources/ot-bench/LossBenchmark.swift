import Foundation
import Glibc
import OTBase
import OTMedia
import OTServer
import OTSession

/// `ot-bench loss [--loss 5,10,20,30,burst] [--modes routed,relayed] [--runs 3] [--seconds 8]`: sessions under real
/// packet loss. Each run gets a fresh network namespace (only `lo`) whose nftables output chain drops UDP: at random
/// (`numgen random mod 100 < P`, so every datagram each way — media, RTCP, STUN, DTLS — is dropped with probability
/// P on each traversal; signaling is TCP and unaffected), or in bursts (`burst`: 10 consecutive datagrams out of every
/// 100, `numgen inc`, at a random phase). Inside it the bench runs itself (`OT_LOSS_NETNS` set): an embedded server with a media router on
/// 127.0.0.1, one client publishing the test pattern (640×480, 30 fps, as `ot-demo`) and a tone, another subscribing
/// for `--seconds` after `subscribe`. Per run: connected or not, subscribe → first frame, frames rendered of those
/// sent after `subscribe`, freezes (more than 500 ms without a new frame, after the first), audio concealment (the
/// share of played samples made up by packet-loss concealment or FEC), the repair overhead (bytes of retransmissions
/// over media bytes, all legs) and the repair counters. Root only.
func runLossBenchmark(_ args: [String]) throws {
    if LossNamespace.isInside { return try runLossSession(args) }
    guard getuid() == 0 else { throw BenchError("ot-bench loss needs root: it makes network namespaces with nftables rules") }
    let patterns = try option(args, "--loss", "5,10,20,30,burst").split(separator: ",").map { try LossPattern(String($0)) }
    let modes = option(args, "--modes", "routed,relayed").split(separator: ",").map(String.init)
    guard !modes.isEmpty, modes.allSatisfy({ $0 == "routed" || $0 == "relayed" }) else {
        throw BenchError("--modes wants routed, relayed or both (comma-separated)")
    }
    let runs = try intOption(args, "--runs", 3)
    let seconds = try intOption(args, "--seconds", 8)
    print("loss: 1 publisher (640x480 at 30 fps + tone), 1 subscriber, \(seconds) s after subscribe; \(runs) runs per mode and loss; "
          + "nftables drop on every UDP traversal")
    var table: [(mode: String, pattern: LossPattern, runs: [LossRunResult])] = []
    for pattern in patterns {
        for mode in modes {
            var results: [LossRunResult] = []
            for r in 1...runs {
                let result = try LossNamespace.run(pattern, arguments: ["loss", "--mode", mode, "--seconds", "\(seconds)"],
                                                   timeout: Double(seconds) + 90)
                print("\(mode) \(pattern.label) run \(r): \(result.line)")
                results.append(result)
            }
            table.append((mode, pattern, results))
        }
    }
    print("\n| mode | loss per traversal | runs connected | subscribe → first frame, ms (median) | frames rendered of sent | "
          + "freezes > 500 ms | audio concealed | repair overhead |\n|---|---|---|---|---|---|---|---|")
    for row in table {
        let connected = row.runs.filter(\.connected).count
        let ff = row.runs.compactMap(\.firstFrameMillis)
        let ffText = ff.isEmpty ? "none" : ff.map { whole($0) }.joined(separator: ", ") + " (\(whole(median(ff))))"
        let rendered = row.runs.map { "\($0.rendered)/\($0.sent)" }.joined(separator: ", ")
        let share = Double(row.runs.map(\.rendered).reduce(0, +)) / Double(max(1, row.runs.map(\.sent).reduce(0, +)))
        let freezes = row.runs.map { "\($0.freezes)" }.joined(separator: ", ")
        let concealed = row.runs.map { fmt($0.audioConcealed * 100) + "%" }.joined(separator: ", ")
        let overhead = row.runs.map { fmt($0.repairOverhead * 100) + "%" }.joined(separator: ", ")
        print("| \(row.mode) | \(row.pattern.label) | \(connected)/\(row.runs.count) | \(ffText) | \(rendered) (\(fmt(share * 100))%) | "
              + "\(freezes) | \(concealed) | \(overhead) |")
    }
}

/// How datagrams are dropped.
enum LossPattern {
    /// Each UDP datagram with this probability (percent), independently.
    case random(Int)
    /// 10 consecutive UDP datagrams out of every 100 (all flows together).
    case burst

    init(_ text: String) throws {
        if text == "burst" { self = .burst; return }
        guard let p = Int(text.hasSuffix("%") ? String(text.dropLast()) : text), (0...100).contains(p) else {
            throw BenchError("--loss wants percentages 0…100 or burst, not \(text)")
        }
        self = .random(p)
    }

    var label: String {
        switch self {
        case .random(let p): "\(p)%"
        case .burst: "burst 10/100"
        }
    }

    /// The nftables rule (output chain) that drops. A burst starts at a random phase of the 100-datagram cycle (the
    /// counter starts with the session, so a fixed phase would always hit its first datagrams).
    var rule: String {
        switch self {
        case .random(let p): return "meta l4proto udp numgen random mod 100 < \(p) counter drop"
        case .burst:
            let phase = Int.random(in: 0...89)
            return "meta l4proto udp numgen inc mod 100 \(phase)-\(phase + 9) counter drop"
        }
    }
}

/// A network namespace per run with the loss rule on its output chain; the bench runs itself inside it.
enum LossNamespace {
    static let environmentKey = "OT_LOSS_NETNS"
    static var isInside: Bool { ProcessInfo.processInfo.environment[environmentKey] != nil }
    nonisolated(unsafe) private static var counter = 0

    /// Runs this executable with `arguments` in a fresh namespace dropping as `pattern` says; returns the run's result
    /// (the child's `LOSSRUN {json}` line). The namespace is deleted afterwards.
    static func run(_ pattern: LossPattern, arguments: [String], timeout: Double) throws -> LossRunResult {
        counter += 1
        let name = "otloss\(getpid())r\(counter)"
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        try tool("/usr/sbin/ip", ["netns", "add", name])
        defer { _ = try? tool("/usr/sbin/ip", ["netns", "del", name]) }
        try tool("/usr/sbin/ip", ["-n", name, "link", "set", "lo", "up"])
        let rules = "table inet otloss {\n chain out {\n  type filter hook output priority 0; policy accept;\n  \(pattern.rule)\n }\n}\n"
        try tool("/usr/sbin/ip", ["netns", "exec", name, "/usr/sbin/nft", "-f", "-"], input: rules)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        p.arguments = ["netns", "exec", name, exe] + arguments
        p.environment = ProcessInfo.processInfo.environment.merging([environmentKey: name]) { $1 }
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let deadline = monotonicSeconds() + timeout
        let reader = out.fileHandleForReading
        let done = DispatchSemaphore(value: 0)
        let box = LockedData()
        DispatchQueue.global().async {
            box.set(reader.readDataToEndOfFile())
            done.signal()
        }
        if done.wait(timeout: .now() + max(1, deadline - monotonicSeconds())) == .timedOut {
            p.terminate()
            _ = done.wait(timeout: .now() + 10)
            throw BenchError("a \(pattern.label) run did not finish within \(Int(timeout)) s")
        }
        p.waitUntilExit()
        let data = box.get()
        let text = String(decoding: data, as: UTF8.self)
        guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("LOSSRUN ") }),
              let json = try JSONSerialization.jsonObject(with: Data(line.dropFirst(8).utf8)) as? [String: Any] else {
            throw BenchError("a \(pattern.label) run printed no result (status \(p.terminationStatus)):\n\(text.suffix(2000))")
        }
        return LossRunResult(json)
    }

    private final class LockedData: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        func set(_ d: Data) { lock.withLock { data = d } }
        func get() -> Data { lock.withLock { data } }
    }

    @discardableResult
    static func tool(_ path: String, _ args: [String], input: String? = nil) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let pipe = Pipe()
        if input != nil { p.standardInput = pipe }
        try p.run()
        if let input {
            pipe.fileHandleForWriting.write(Data(input.utf8))
            try pipe.fileHandleForWriting.close()
        }
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw BenchError("\(path) \(args.joined(separator: " ")) failed (status \(p.terminationStatus))") }
        return p.terminationStatus
    }
}

/// One run's figures, as the child reports them.
struct LossRunResult {
    var connected: Bool
    var firstFrameMillis: Double?
    /// Subscribe → `subscriberDidConnect` (ICE and DTLS done).
    var connectedMillis: Double?
    var rendered: Int
    var sent: Int
    var freezes: Int
    var longestGapMillis: Double
    var audioConcealed: Double
    var repairOverhead: Double
    var counters: [String: Int]
    /// Audio-fallback events the subscriber got ("warning", "disabled", ...), comma-separated.
    var fallback: String

    init(_ j: [String: Any]) {
        connected = j["connected"] as? Bool ?? false
        firstFrameMillis = j["firstFrameMillis"] as? Double
        connectedMillis = j["connectedMillis"] as? Double
        rendered = j["rendered"] as? Int ?? 0
        sent = j["sent"] as? Int ?? 0
        freezes = j["freezes"] as? Int ?? 0
        longestGapMillis = j["longestGapMillis"] as? Double ?? 0
        audioConcealed = j["audioConcealed"] as? Double ?? 0
        repairOverhead = j["repairOverhead"] as? Double ?? 0
        counters = j["counters"] as? [String: Int] ?? [:]
        fallback = j["fallback"] as? String ?? ""
    }

    var line: String {
        guard connected else { return "never connected" }
        let ff = firstFrameMillis.map { "\(whole($0)) ms" } ?? "none"
        let c = counters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "connected \(connectedMillis.map { "\(whole($0)) ms" } ?? "?"), first frame \(ff), rendered \(rendered)/\(sent), freezes \(freezes) (longest gap \(whole(longestGapMillis)) ms), "
            + "audio concealed \(fmt(audioConcealed * 100))%, repair overhead \(fmt(repairOverhead * 100))%"
            + (fallback.isEmpty ? "" : ", audio fallback: \(fallback)") + "; \(c)"
    }
}

/// Inside the namespace: one session, then one `LOSSRUN {json}` line.
private func runLossSession(_ args: [String]) throws {
    let relayed = option(args, "--mode", "routed") == "relayed"
    let seconds = Double(try intOption(args, "--seconds", 8))
    let server = try BenchServer()
    defer { server.stop() }
    let pair = try PublishedPair(server, relayed: relayed, name: "loss", width: 640, height: 480, fps: 30, kbps: 600)
    defer { pair.close() }
    let (a, b, publisher, stream) = (pair.a, pair.b, pair.publisher, pair.stream)

    let rec = StreamRecorder("subscriber")
    let sub = Subscriber(stream: stream, delegate: rec, settings: SubscriberSettings(playAudio: false))
    let framesBefore = publisher.stats.framesEncoded
    let t0 = monotonicSeconds()
    try b.subscribe(sub)
    usleep(UInt32(seconds * 1_000_000))
    let end = monotonicSeconds()
    let pub = publisher.stats
    let subStats = sub.stats
    let subReport = statsEntries(sub.rtcStatsReport())
    let pubReport = statsEntries(publisher.rtcStatsReport())

    var j: [String: Any] = ["connected": rec.connectedAt != nil, "sent": pub.framesEncoded - framesBefore, "rendered": rec.frames]
    let times = rec.renderTimes
    if let first = times.first { j["firstFrameMillis"] = (first - t0) * 1000 }
    if let c = rec.connectedAt { j["connectedMillis"] = (c - t0) * 1000 }
    var freezes = 0, longest = 0.0
    for (x, y) in zip(times, times.dropFirst() + [end]) where y - x > longest { longest = y - x }
    for (x, y) in zip(times, times.dropFirst() + [end]) where y - x > 0.5 { freezes += 1 }
    j["freezes"] = freezes
    j["fallback"] = rec.qualityEvents.joined(separator: ",")
    j["longestGapMillis"] = longest * 1000
    let audioIn = subReport.first { $0["type"] as? String == "inbound-rtp" && $0["kind"] as? String == "audio" }
    let concealed = audioIn?["concealedSamples"] as? Int ?? 0, total = audioIn?["totalSamplesReceived"] as? Int ?? 0
    j["audioConcealed"] = total > 0 ? Double(concealed) / Double(total) : 0
    let videoIn = subReport.first { $0["type"] as? String == "inbound-rtp" && $0["kind"] as? String == "video" }
    let videoOut = pubReport.first { $0["type"] as? String == "outbound-rtp" && $0["kind"] as? String == "video" }

    var counters: [String: Int] = [
        "subNacked": videoIn?["nackCount"] as? Int ?? 0, "subPLIs": videoIn?["pliCount"] as? Int ?? 0,
        "subFramesDropped": subStats.framesDropped, "subPacketsLost": subStats.videoPacketsLost,
        "pubPLIsReceived": pub.pliCount, "pubKeyframes": pub.keyFramesEncoded, 
        "pubRetransmissions": videoOut?["retransmittedPacketsSent"] as? Int ?? 0,
        // Audio: packets lost for good, discarded (late for their turn: a repair that came too late, or duplicates),
        // and runs of concealment.
        "subAudioLost": audioIn?["packetsLost"] as? Int ?? 0, "subAudioDiscarded": audioIn?["packetsDiscarded"] as? Int ?? 0,
        "subAudioConcealments": audioIn?["concealmentEvents"] as? Int ?? 0,
    ]
    var mediaBytes = pub.rtpBytesSent, repairBytes = pub.repairBytesSent
    if !relayed, let c = server.router.counters(streamId: stream.id) {
        let up = server.router.publisherStats(streamId: stream.id)
        let downs = server.router.subscriberStats(streamId: stream.id)
        counters["routerGateHeld"] = c.packetsHeldForKeyframe
        counters["routerPLIsSent"] = c.keyframeRequestsSent
        counters["routerPLIsFolded"] = c.keyframeRequestsAggregated
        counters["routerUpNacked"] = up?.nackedSequences ?? 0
        counters["routerUpRepaired"] = up?.nackRepaired ?? 0
        counters["routerUpGivenUp"] = up?.nackGivenUp ?? 0
        // The uplink's round trip as RTCP measured it (XR DLRR answers; absent: never measured).
        if let rtt = up?.roundTripTime { counters["routerUpRttMicros"] = Int(rtt.microseconds) }
        counters["routerDownRetransmissions"] = downs.map(\.retransmissionsSent).reduce(0, +)
        counters["routerDownMisses"] = downs.map(\.retransmissionMisses).reduce(0, +)
        counters["routerDownFEC"] = downs.map(\.fecPacketsSent).reduce(0, +)
        counters["routerGateReplayed"] = c.packetsReplayed
        // Malformed RTCP the router's legs skipped (whole packets of a compound, and blocks inside XR packets): 0 expected.
        counters["routerUpRtcpSkipped"] = up?.rtcpPacketsSkipped ?? 0
        counters["routerUpXRBlocksSkipped"] = up?.rtcpXRBlocksSkipped ?? 0
        counters["routerDownRtcpSkipped"] = downs.map(\.rtcpPacketsSkipped).reduce(0, +)
        counters["routerDownXRBlocksSkipped"] = downs.map(\.rtcpXRBlocksSkipped).reduce(0, +)
        mediaBytes += c.bytesOut
        repairBytes += downs.map { $0.retransmittedBytesSent + $0.fecBytesSent }.reduce(0, +)
    }
    j["repairOverhead"] = mediaBytes > 0 ? Double(repairBytes) / Double(mediaBytes) : 0
    j["counters"] = counters
    try b.unsubscribe(sub)
    try a.unpublish(publisher)
    let data = try JSONSerialization.data(withJSONObject: j, options: [.sortedKeys])
    FileHandle.standardOutput.write(Data(("LOSSRUN " + String(decoding: data, as: UTF8.self) + "\n").utf8))
}

/// The entries of a W3C stats report (JSON array of objects).
private func statsEntries(_ json: String) -> [[String: Any]] {
    (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]]) ?? []
}
