import Foundation
import OTBase
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// A small version of `ot-loadtest`: 20 clients in 2 sessions signal for 2 s; every receiver must
/// get every signal of its session exactly once and in order per sender.
final class SignalingLoadTests: XCTestCase {
    final class Receiver: SessionDelegate, @unchecked Sendable {
        let lock = NSLock()
        var perSender: [String: [Int]] = [:]
        func session(_ session: Session, receivedSignalType type: String, from connection: ConnectionInfo?, data: String) {
            guard let from = connection?.id, let n = Int(data) else { return }
            lock.withLock { perSender[from, default: []].append(n) }
        }
        var snapshot: [String: [Int]] { lock.withLock { perSender } }
    }

    func testEverySignalDeliveredOnceInOrder() throws {
        let ts = try TestServer()
        let sids = [try ts.session(), try ts.session()]
        var clients: [(Session, Receiver, Int)] = []
        for i in 0..<20 {
            let r = Receiver()
            let s = Session(apiKey: ts.project.apiKey, sessionId: sids[i % 2], delegate: r,
                            settings: SessionSettings(serverURL: ts.server.signalingURL, connectionEventsSuppressed: true))
            let rec = Recorder()
            s.delegate = rec
            try s.connect(token: ts.server.token(sessionId: sids[i % 2]))
            rec.waitFor(.connected)
            s.delegate = r
            clients.append((s, r, i % 2))
        }
        var sent = [Int](repeating: 0, count: clients.count)
        let end = Date().addingTimeInterval(2)
        while Date() < end {
            for (i, c) in clients.enumerated() {
                try c.0.signal(type: "load", data: String(sent[i]))
                sent[i] += 1
            }
            usleep(20_000)
        }
        // Expected: for each receiver, 0..<sent[j] from every sender j of its session.
        func complete() -> Bool {
            clients.allSatisfy { c in
                let got = c.1.snapshot
                return clients.enumerated().allSatisfy { j, s in s.2 != c.2 || got[s.0.connection?.id ?? ""]?.count == sent[j] }
            }
        }
        let deadline = Date().addingTimeInterval(20)
        while !complete() && Date() < deadline { usleep(20_000) }
        for c in clients {
            let got = c.1.snapshot
            for (j, s) in clients.enumerated() where s.2 == c.2 {
                XCTAssertEqual(got[s.0.connection?.id ?? ""], Array(0..<sent[j]), "signals of sender \(j)")
            }
            XCTAssertEqual(got.count, 10, "only the own session's senders")
        }
        XCTAssertGreaterThan(sent.reduce(0, +), 20)
        for c in clients { try c.0.disconnect() }
    }
}
