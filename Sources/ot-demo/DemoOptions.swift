import OTServer
import OTSession

/// The demo's command line.
struct DemoOptions {
    var duration = 10.0
    /// Whether `--duration` was given (`--web` otherwise runs until Ctrl-C).
    var durationGiven = false
    /// Keep the session open for a browser: print a URL of the server's demo page that joins it.
    var web = false
    var width = 640
    var height = 480
    var fps = 30
    var videoCodec: VideoCodecType = .vp8
    var relayed = false
    /// Whether `--routed` or `--relayed` was given (else an existing `--session` keeps its own mode).
    var modeGiven = false
    var outDir = "out"
    /// An external server (`http://host:port` or `ws://host:port/v2/signaling`) instead of the embedded one.
    var serverURL: String?
    var project: Project?
    /// An existing session on the external server (else one is created through its REST API).
    var sessionId: String?
    /// Real devices instead of the test pattern, the tone and discarded playout: each given means the device, its
    /// `name` nil the default one (the first camera, the system's default source or sink).
    var camera: DeviceChoice?
    var microphone: DeviceChoice?
    var speaker: DeviceChoice?
    var help = false

    /// A device flag's optional value.
    struct DeviceChoice: Equatable {
        var name: String?
    }

    /// The first lines of `usage`, printed with a command-line error.
    static var synopsis: String { usage.split(separator: "\n", omittingEmptySubsequences: false).prefix(3).joined(separator: "\n") }

    static let usage = """
    usage: ot-demo [--duration SECONDS] [--resolution WxH] [--fps N] [--codec VP8|VP9] [--routed | --relayed] [--out DIR] [--web]
                   [--server URL --project KEY:SECRET [--session ID]]
                   [--camera [DEVICE]] [--microphone [SOURCE]] [--speaker [SINK]] [--help]

    Publishes the built-in test pattern and a 440 Hz tone from one client and subscribes to it from a
    second one, printing a status line each second; then writes DIR/snapshot.png, DIR/received.ivf (VP8 or VP9)
    and DIR/received.wav and prints a summary. Exit code 0 only when the subscriber decoded frames whose
    counters read back in increasing order (with --camera: when it decoded frames).

      --duration SECONDS    how long to run (default 10, with --web until Ctrl-C; Ctrl-C stops early)
      --resolution WxH      picture size of the test pattern (default 640x480)
      --fps N               frame rate (default 30)
      --codec VP8|VP9       the video codec the publisher sends (default VP8)
      --routed              media through the server's media router (default)
      --relayed             media peer to peer; the server relays signaling only
      --out DIR             where the recordings go (default ./out)
      --web                 also print a URL of the server's demo page (/demo) that joins the session in a
                            browser (camera, microphone, signal box, statistics); the browser's streams are
                            received and shown in the status lines, its signals printed
      --server URL          join an external server (e.g. ot-server) at http://HOST:PORT instead of
                            starting an embedded one on 127.0.0.1; needs --project
      --project KEY:SECRET  the external server's project, to mint tokens and create the session
      --session ID          use this session (routed or relayed as it was created) instead of creating
                            one through the REST API
      --camera [DEVICE]     publish a V4L2 camera instead of the test pattern: a path (/dev/video0) or a
                            camera's name; without one, the first camera. --resolution and --fps are
                            the target (the camera's closest mode is used)
      --microphone [SOURCE] publish a PulseAudio source instead of the tone (without one: the default)
      --speaker [SINK]      play the received audio on a PulseAudio sink (without one: the default)
      --help                this text

    Devices: PulseAudio (or PipeWire's pipewire-pulse) for sound, V4L2 for cameras. A device that cannot be
    opened or goes away mid-run is reported and the run goes on (silence, black frames, no playout).

    """

    /// Parses the arguments (without the program name); throws a message for a bad command line.
    static func parse(_ arguments: [String]) throws(UsageError) -> DemoOptions {
        var o = DemoOptions()
        var mode: String?
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < arguments.count else { throw UsageError("\(flag) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            let flag = arguments[i]
            switch flag {
            case "--help", "-h":
                o.help = true
            case "--duration":
                let v = try value(flag)
                guard let d = Double(v), d > 0, d <= 24 * 3600 else { throw UsageError("--duration needs seconds > 0, not \(v)") }
                o.duration = d
                o.durationGiven = true
            case "--resolution":
                let v = try value(flag)
                let parts = v.lowercased().split(separator: "x", omittingEmptySubsequences: false)
                guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (16...4096).contains(w), (16...4096).contains(h),
                      w % 2 == 0, h % 2 == 0 else {
                    throw UsageError("--resolution needs WxH with even sizes from 16 to 4096 (e.g. 1280x720), not \(v)")
                }
                o.width = w; o.height = h
            case "--fps":
                let v = try value(flag)
                guard let n = Int(v), (1...60).contains(n) else { throw UsageError("--fps needs a number from 1 to 60, not \(v)") }
                o.fps = n
            case "--routed", "--relayed":
                if let mode, mode != flag { throw UsageError("choose one of --routed and --relayed") }
                mode = flag
                o.relayed = flag == "--relayed"
                o.modeGiven = true
            case "--out":
                let v = try value(flag)
                guard !v.isEmpty else { throw UsageError("--out needs a folder") }
                o.outDir = v
            case "--server":
                let v = try value(flag)
                guard v.hasPrefix("http://") || v.hasPrefix("ws://") else {
                    throw UsageError("--server needs http://HOST:PORT or ws://HOST:PORT/v2/signaling, not \(v)")
                }
                o.serverURL = v
            case "--project":
                let v = try value(flag)
                do { o.project = try Project.parse(v) } catch { throw UsageError("--project: \(error)") }
            case "--session":
                o.sessionId = try value(flag)
            case "--codec":
                let v = try value(flag)
                guard let c = VideoCodecType(name: v) else { throw UsageError("--codec needs VP8 or VP9, not \(v)") }
                o.videoCodec = c
            case "--web":
                o.web = true
            case "--camera", "--microphone", "--speaker":
                // The value is optional: the next argument, unless it is another flag.
                var choice = DeviceChoice(name: nil)
                if i + 1 < arguments.count, !arguments[i + 1].hasPrefix("-") {
                    i += 1
                    guard !arguments[i].isEmpty else { throw UsageError("\(flag) needs a non-empty device name") }
                    choice.name = arguments[i]
                }
                switch flag {
                case "--camera": o.camera = choice
                case "--microphone": o.microphone = choice
                default: o.speaker = choice
                }
            default:
                throw UsageError("unknown argument \(flag)")
            }
            i += 1
        }
        if o.serverURL != nil, o.project == nil { throw UsageError("--server needs --project KEY:SECRET") }
        if o.serverURL == nil, o.project != nil || o.sessionId != nil { throw UsageError("--project and --session need --server") }
        return o
    }
}

/// A bad command line: the message is printed with the usage, and the demo exits with code 2.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}
