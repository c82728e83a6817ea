import Foundation
import OTBase
@testable import OTTransport
import XCTest

/// Connection setup on loopback, ours against aiortc, in one run: offer created -> ICE + DTLS connected,
/// audio-only, host candidates on 127.0.0.1, no STUN servers. Prints medians and their ratio
/// (docs/benchmarks-transport.md); asserts only that every connection succeeded.
final class SetupTimeBenchmarkTests: XCTestCase {
    func testSetupTimeOursVersusAiortcPair() throws {
        let runs = 5
        var ours: [Double] = []
        for _ in 0..<runs {
            let a = try LoopbackPeer(), b = try LoopbackPeer()
            let start = try LoopbackTransportTests.startPair(a, b)
            XCTAssertTrue(LoopbackPeer.wait { a.has(isDTLSConnected) && b.has(isDTLSConnected) })
            ours.append(Double((MonotonicClock.now() - start).microseconds) / 1000)
            a.driver.stop(); b.driver.stop()
        }
        var theirs: [Double] = []
        for _ in 0..<runs {
            let proc = Process()
            proc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            proc.arguments = ["python3", AiortcInteropTests.script.path, "pair"]
            let out = Pipe()
            proc.standardOutput = out
            proc.standardError = Pipe()
            try proc.run()
            let reader = AiortcInteropTests.LineReader(out.fileHandleForReading)
            let ms = reader.json(where: "event", is: "pair")?["ms"] as? Double
            proc.waitUntilExit()
            let value = try XCTUnwrap(ms, "aiortc pair did not connect")
            theirs.append(value)
        }
        func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
        print(String(format: "SETUP_BENCH runs=%d ours_median_ms=%.1f aiortc_pair_median_ms=%.1f ratio_ours_over_aiortc=%.2f ours=%@ aiortc=%@",
                     runs, median(ours), median(theirs), median(ours) / median(theirs),
                     ours.map { String(format: "%.1f", $0) }.joined(separator: ","), theirs.map { String(format: "%.1f", $0) }.joined(separator: ",")))
    }
}
