// ot-bench: measurements of libotsession's hot paths. One subcommand per area:
//   ot-bench codec [--quick] [--vp9]  codecs, payloads and SRTP against raw libvpx/libopus (--vp9: the VP9 video path only)
//   ot-bench pipeline [--quick] the publisher/subscriber media pipelines in one process
//   ot-bench router [--quick] [--janus] [--n 1,16]  the media router's forwarding cost with N subscribers (and Janus's)
//   ot-bench router --workers K          the same load through 1 and K router workers, per CPU second
//   ot-bench loss [--loss 5,10,20,30,burst] [--runs 3]  routed and relayed sessions under real packet loss (root)
//   ot-bench cc [--quick]       bandwidth estimation vs the loss-only rule on emulated bottlenecks
//   ot-bench connect [--rounds 40]  session connect time over ws:// and wss:// (the TLS handshake's cost)
// Build for release: swift run -c release ot-bench <subcommand>
import Glibc

let benchmarks: [(name: String, summary: String, run: ([String]) throws -> Void)] = [
    ("codec", "VP8 (or --vp9)/Opus raw codec vs whole media path, SRTP packets/s, allocations per packet", runCodecBenchmark),
    ("pipeline", "frames/s through the send and receive media pipelines vs raw libvpx", runPipelineBenchmark),
    ("router", "media router forwarding: packets/s and Mbit/s out per CPU second, N subscribers; --janus: vs Janus; --workers K: 1 vs K workers", runRouterBenchmark),
    ("meeting", "N clients each publishing and subscribing to all others: fps, order, latency, freezes per pair", runMeetingBenchmark),
    ("cycles", "connect/publish/subscribe/disconnect cycles: fds, threads and RSS against the warm-up level", runCyclesBenchmark),
    ("latency", "capture-to-render latency routed and relayed, subscribe-to-first-frame time", runLatencyBenchmark),
    ("loss", "sessions under nftables packet loss in network namespaces: first frame, frames rendered, freezes, concealment, repair", runLossBenchmark),
    ("connect", "session connect time, plain ws:// vs wss:// with ECDSA and RSA certificates: what TLS adds", runConnectBenchmark),
    ("cc", "send-side bandwidth estimation (GCC) vs loss-only on emulated bottlenecks: convergence, utilisation, queue delay", runCongestionBenchmark),
]

let args = Array(CommandLine.arguments.dropFirst())
guard let name = args.first, let bench = benchmarks.first(where: { $0.name == name }) else {
    print("usage: ot-bench <subcommand> [options]\n")
    for b in benchmarks { print("  \(b.name + String(repeating: " ", count: max(0, 10 - b.name.count))) \(b.summary)") }
    exit(args.isEmpty || args.first == "--help" ? 0 : 2)
}
do {
    try bench.run(Array(args.dropFirst()))
} catch {
    print("ot-bench \(name) failed: \(error)")
    exit(1)
}
