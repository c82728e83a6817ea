// ot-demo: an embedded (or external) session server, one client publishing the test pattern and a tone, one
// subscribing; a live status line, then a PNG snapshot, IVF and WAV recordings and a summary. See `ot-demo --help`.
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import OTBase

/// Writes a line to stdout at once (unbuffered: stdout may be a pipe).
func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { buf in _ = write(1, buf.baseAddress, buf.count) }
}

let options: DemoOptions
do {
    options = try DemoOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileOutput.stderr("ot-demo: \(error)\n\(DemoOptions.synopsis)\n(ot-demo --help explains the flags)\n")
    exit(2)
}
if options.help {
    print(DemoOptions.usage, terminator: "")
    exit(0)
}

// Ctrl-C stops the run cleanly (recordings and summary are still written); a second one quits at once.
let interrupt = InterruptHandler()
interrupt.install()

do {
    try Demo(options: options, stopRequested: interrupt.stopRequested, out: say).run()
    exit(0)
} catch let f as DemoFailure {
    FileOutput.stderr("ot-demo: FAILED: \(f)\n")
    exit(1)
} catch {
    FileOutput.stderr("ot-demo: FAILED: \(error)\n")
    exit(1)
}

/// SIGINT: the first one signals `stopRequested`, a second one exits with code 130.
final class InterruptHandler: @unchecked Sendable {
    let stopRequested = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var count = 0
    private var source: (any DispatchSourceSignal)?

    nonisolated func install() {
        signal(SIGINT, SIG_IGN)
        let s = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        s.setEventHandler { [self] in
            let n = lock.withLock { count += 1; return count }
            if n > 1 { exit(130) }
            stopRequested.signal()
        }
        s.resume()
        source = s
    }
}
