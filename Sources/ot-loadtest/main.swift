// ot-loadtest: bounded loopback signaling load. N clients across S sessions each send signals to
// their whole session at a fixed rate for D seconds; every receiver checks that every signal of
// every sender arrives exactly once and in order, and records the delivery latency.
import Foundation
import OTBase
import OTServer
import OTSession
import OTWire

let usage = """
usage: ot-loadtest [--clients 200] [--sessions 20] [--seconds 30] [--rate 5] [--size 64]
    --rate: signals per second per client (to its whole session, the sender included).
    --size: bytes of padding per signal.

"""

struct Options {
    var clients = 200, sessions = 20, seconds = 30.0, rate = 5.0, size = 64
}

var opts = Options()
var argv = Array(CommandLine.arguments.dropFirst())
while !argv.isEmpty {
    let f = argv.removeFirst()
    guard !argv.isEmpty || f == "-h" || f == "--help" else { FileOutput.stderr(usage); exit(2) }
    switch f {
    case "--clients": opts.clients = Int(argv.removeFirst()) ?? opts.clients
    case "--sessions": opts.sessions = Int(argv.removeFirst()) ?? opts.sessions
    case "--seconds": opts.seconds = Double(argv.removeFirst()) ?? opts.seconds
    case "--rate": opts.rate = Double(argv.removeFirst()) ?? opts.rate
    case "--size": opts.size = Int(argv.removeFirst()) ?? opts.size
    default: FileOutput.stderr(usage); exit(2)
    }
}

/// One client's receive side: per-sender sequence check and latencies.
final class Receiver: SessionDelegate, @unchecked Sendable {
    let lock = NSLock()
    var lastSeq: [String: Int] = [:]
    var received: [String: Int] = [:]
    var latenciesMicros: [Int64] = []
    var violations = 0
    var connected = DispatchSemaphore(value: 0)
    var failed: OTError?

    func sessionDidConnect(_ session: Session) { connected.signal() }
    func session(_ session: Session, didFailWithError error: OTError) { lock.withLock { failed = error }; connected.signal() }
    func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {
        let now = MonotonicClock.now().micros
        let parts = data.split(separator: ":", maxSplits: 3)
        guard type == "load", parts.count >= 3, let seq = Int(parts[1]), let sent = Int64(parts[2]) else {
            lock.withLock { violations += 1 }; return
        }
        let sender = String(parts[0])
        lock.withLock {
            if seq != (lastSeq[sender] ?? -1) + 1 { violations += 1 }
            lastSeq[sender] = seq
            received[sender, default: 0] += 1
            latenciesMicros.append(now - sent)
        }
    }
}

let project = Project.generate()
var limits = ServerLimits()
limits.signalsPerSecond = max(200, opts.rate * 4)
limits.signalBurst = limits.signalsPerSecond * 2
let server = SessionServer(.init(projects: [project], limits: limits))
do { try server.start() } catch { FileOutput.stderr("cannot start server: \(error)\n"); exit(1) }

var sessionIds: [String] = []
for _ in 0..<opts.sessions { sessionIds.append(try server.createSession(apiKey: project.apiKey)) }

var clients: [(Session, Receiver, Int)] = []
let connectStart = MonotonicClock.now()
for i in 0..<opts.clients {
    let sIndex = i % opts.sessions
    let r = Receiver()
    let s = Session(apiKey: project.apiKey, sessionId: sessionIds[sIndex], delegate: r,
                    settings: SessionSettings(serverURL: server.signalingURL, connectionEventsSuppressed: true))
    try s.connect(token: server.token(sessionId: sessionIds[sIndex]))
    clients.append((s, r, sIndex))
}
for (_, r, _) in clients {
    if r.connected.wait(timeout: .now() + 30) == .timedOut || r.failed != nil {
        FileOutput.stderr("a client failed to connect: \(String(describing: r.failed))\n"); exit(1)
    }
}
let connectSeconds = (MonotonicClock.now() - connectStart).seconds
print("connected \(opts.clients) clients in \(opts.sessions) sessions in \(String(format: "%.2f", connectSeconds)) s")

// Send: each client at `rate`, phases spread over the interval.
let padding = String(repeating: "p", count: opts.size)
let interval = 1.0 / opts.rate
let start = MonotonicClock.now()
var next = (0..<opts.clients).map { Double($0) / Double(opts.clients) * interval }
var sent = [Int](repeating: 0, count: opts.clients)
var sendErrors = 0
let ids = clients.map { $0.0.connection?.id ?? "" }
while true {
    let t = (MonotonicClock.now() - start).seconds
    if t >= opts.seconds { break }
    var soonest = opts.seconds
    for i in 0..<opts.clients {
        while next[i] <= t {
            let data = "\(ids[i]):\(sent[i]):\(MonotonicClock.now().micros):\(padding)"
            do { try clients[i].0.signal(type: "load", data: data); sent[i] += 1 } catch { sendErrors += 1 }
            next[i] += interval
        }
        soonest = min(soonest, next[i])
    }
    let wait = soonest - (MonotonicClock.now() - start).seconds
    if wait > 0 { usleep(UInt32(min(wait, 0.05) * 1_000_000)) }
}
let sendSeconds = (MonotonicClock.now() - start).seconds

// Drain: wait until every receiver has every signal of its session (bounded).
@MainActor func expected(_ sIndex: Int) -> [String: Int] {
    var e: [String: Int] = [:]
    for (i, c) in clients.enumerated() where c.2 == sIndex { e[ids[i]] = sent[i] }
    return e
}
let expectations = (0..<opts.sessions).map(expected)
let drainDeadline = MonotonicClock.now() + .seconds(30)
var complete = false
while MonotonicClock.now() < drainDeadline {
    complete = clients.allSatisfy { c in c.1.lock.withLock { c.1.received == expectations[c.2] } }
    if complete { break }
    usleep(50_000)
}
let totalSeconds = (MonotonicClock.now() - start).seconds

var all: [Int64] = []
var violations = 0, missing = 0, extra = 0
for c in clients {
    c.1.lock.withLock {
        all.append(contentsOf: c.1.latenciesMicros)
        violations += c.1.violations
        for (sender, n) in expectations[c.2] {
            let got = c.1.received[sender] ?? 0
            if got < n { missing += n - got } else if got > n { extra += got - n }
        }
    }
}
all.sort()
@MainActor func pct(_ p: Double) -> Double { all.isEmpty ? 0 : Double(all[min(all.count - 1, Int(Double(all.count) * p))]) / 1000 }
let totalSent = sent.reduce(0, +)
print("sent \(totalSent) signals in \(String(format: "%.1f", sendSeconds)) s (\(String(format: "%.0f", Double(totalSent) / sendSeconds)) signals/s sent), send errors \(sendErrors)")
print("delivered \(all.count) (\(String(format: "%.0f", Double(all.count) / sendSeconds)) deliveries/s); missing \(missing), duplicates/extra \(extra), order violations \(violations); drained in \(String(format: "%.1f", totalSeconds)) s")
print(String(format: "delivery latency ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f", pct(0.5), pct(0.9), pct(0.99), pct(0.999), pct(1.0)))
let ok = complete && violations == 0 && missing == 0 && extra == 0 && sendErrors == 0
print(ok ? "PASS: every signal delivered exactly once, in order per sender" : "FAIL")
for c in clients { try? c.0.disconnect() }
usleep(200_000)
server.stop()
exit(ok ? 0 : 1)
