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
    FileOutput.stderr("ot-demo: \(error)\n\n\(DemoOptions.usage)")
    exit(2)
}
if options.help {
    print(DemoOptions.usage, terminator: "")
    exit(0)
}

// Ctrl-C stops the run cleanly (recordings and summary are still written); a second one quits at once.
let stopRequested = DispatchSemaphore(value: 0)
signal(SIGINT, SIG_IGN)
let sigint = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
nonisolated(unsafe) var interrupts = 0
sigint.setEventHandler {
    interrupts += 1
    if interrupts > 1 { exit(130) }
    stopRequested.signal()
}
sigint.resume()

do {
    try Demo(options: options, stopRequested: stopRequested, out: say).run()
    exit(0)
} catch let f as DemoFailure {
    FileOutput.stderr("ot-demo: FAILED: \(f)\n")
    exit(1)
} catch {
    FileOutput.stderr("ot-demo: FAILED: \(error)\n")
    exit(1)
}
