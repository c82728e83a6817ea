import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire

/// One run of the demo: a server (embedded on loopback, or external), a publishing and a subscribing client, a status
/// line each second until `shouldStop` or the duration ends, then the recordings and a summary.
final class Demo {
    let options: DemoOptions
    /// Set from the SIGINT handler; polled by the status loop.
    let stopRequested: DispatchSemaphore
    private let out: (String) -> Void

    init(options: DemoOptions, stopRequested: DispatchSemaphore, out: @escaping (String) -> Void) {
        self.options = options; self.stopRequested = stopRequested; self.out = out
    }

    /// Runs the demo; throws `DemoFailure` when it did not pass.
    func run() throws {
        let o = options
        try FileManager.default.createDirectory(atPath: o.outDir, withIntermediateDirectories: true)
        let files = (png: path("snapshot.png"), ivf: path("received.ivf"), wav: path("received.wav"))

        // The server, the session and two tokens.
        var server: SessionServer?
        defer { server?.stop() }
        let serverURL: String, apiKey: String, sessionId: String, tokens: (String, String)
        /// `--web`: the page's base URL and the browser's token.
        var web: (base: String, token: String)?
        if let url = o.serverURL, let project = o.project {
            serverURL = url
            apiKey = project.apiKey
            sessionId = try o.sessionId ?? ExternalServer.createSession(server: url, project: project, relayed: o.relayed)
            tokens = (try ExternalServer.token(project: project, sessionId: sessionId, data: "ot-demo publisher"),
                      try ExternalServer.token(project: project, sessionId: sessionId, data: "ot-demo subscriber"))
            if o.web { web = (try ExternalServer.restBase(url), try ExternalServer.token(project: project, sessionId: sessionId, data: "browser")) }
            out("server \(url) (external), session \(sessionId)\(o.sessionId == nil ? " (created)" : "")")
        } else {
            let project = Project.generate()
            let s = SessionServer(.init(host: "127.0.0.1", port: 0, projects: [project], media: o.relayed ? nil : .init()))
            try s.start()
            server = s
            serverURL = s.signalingURL
            apiKey = project.apiKey
            sessionId = try s.createSession(apiKey: project.apiKey, relayed: o.relayed)
            tokens = (try s.token(sessionId: sessionId, data: "ot-demo publisher"), try s.token(sessionId: sessionId, data: "ot-demo subscriber"))
            if o.web { web = (s.apiURL, try s.token(sessionId: sessionId, data: "browser")) }
            out("server \(s.apiURL) (embedded), \(o.relayed ? "relayed" : "routed") session \(sessionId)")
        }

        // Two clients.
        let pubEvents = ClientEvents(), subEvents = ClientEvents()
        pubEvents.report = out
        subEvents.report = out
        let settings = SessionSettings(serverURL: serverURL)
        let pubSession = Session(apiKey: apiKey, sessionId: sessionId, delegate: pubEvents, settings: settings)
        let subSession = Session(apiKey: apiKey, sessionId: sessionId, delegate: subEvents, settings: settings)
        defer { try? pubSession.disconnect(); try? subSession.disconnect() }
        try pubSession.connect(token: tokens.0)
        try subSession.connect(token: tokens.1)
        _ = try pubEvents.wait("the publishing client to connect") { $0.isConnected ? true : nil }
        _ = try subEvents.wait("the subscribing client to connect") { $0.isConnected ? true : nil }
        let relayed = pubSession.isRelayed
        let mode = relayed ? "relayed" : "routed"
        if relayed != o.relayed, o.modeGiven || o.sessionId == nil {
            throw DemoFailure("session \(sessionId) is \(mode), not \(o.relayed ? "relayed" : "routed")")
        }

        // Publish the test pattern (or a camera) and a tone (or a microphone).
        let audio: any AudioDevice = try o.microphone.map { try PulseAudioDevice(source: $0.name) }
            ?? HeadlessAudioDevice(capture: .tone(frequency: 440, amplitude: 0.5))
        let video: PublisherVideoSource = o.camera.map { .camera(device: $0.name) } ?? .testPattern
        let publisher = try Publisher(delegate: pubEvents, settings: PublisherSettings(
            name: o.camera == nil ? "ot-demo test pattern" : "ot-demo camera", videoSource: video, audioDevice: audio,
            width: o.width, height: o.height, fps: o.fps))
        try pubSession.publish(publisher)
        let stream = try pubEvents.wait("the published stream") { $0.publishedStream }
        guard let pubConnection = pubSession.connection?.id else { throw DemoFailure("the publishing client has no connection") }
        let seen = try subEvents.wait("the stream at the subscribing client") { $0.stream(from: pubConnection) }
        let videoText: String
        if let camera = publisher.videoCapturer as? V4L2Capturer {
            videoText = "camera \(camera.camera.name) (\(camera.camera.path)), \(camera.mode.format) \(camera.captureSettings.width)x\(camera.captureSettings.height) at \(camera.captureSettings.fps) fps"
        } else {
            videoText = "test pattern \(o.width)x\(o.height) at \(o.fps) fps"
        }
        let audioText = o.microphone.map { "microphone \($0.name ?? "(default source)")" } ?? "440 Hz tone"
        out("publishing stream \(stream.id): \(videoText), \(audioText)")

        // --speaker: the subscribing client plays what it receives on a PulseAudio sink (set before any subscription).
        if let speaker = o.speaker {
            try subSession.setAudioDevice(try PulseAudioDevice(sink: speaker.name))
            out("playing the received audio on \(speaker.name ?? "the default sink")")
        }

        // --web: the subscribing client also receives what a browser publishes; then the page's URL.
        var guests: WebGuests?
        if let web {
            let g = WebGuests(session: subSession, demoConnection: pubConnection, out: out)
            subEvents.guests = g
            for s in subEvents.allStreams { g.streamCreated(s) }
            guests = g
            let fragment = FormEncoding.encode([("apiKey", apiKey), ("sessionId", sessionId), ("token", web.token)])
            out("web page: \(web.base)/demo#\(fragment)")
            out("  open it in a browser to join this session\(o.durationGiven ? "" : "; Ctrl-C ends the demo")")
        }

        // Subscribe from the second client.
        let (width, height) = (stream.width, stream.height)
        let receiver = try DemoReceiver(ivfPath: files.ivf, wavPath: files.wav, width: width > 0 ? width : o.width,
                                        height: height > 0 ? height : o.height)
        let subscriber = Subscriber(stream: seen, delegate: receiver, settings: SubscriberSettings(playAudio: o.speaker != nil))
        let subscribedAt = MonotonicClock.now()
        try subSession.subscribe(subscriber)

        // Status line once a second until the duration is over or Ctrl-C (--web without --duration: Ctrl-C only).
        let end: Instant? = o.web && !o.durationGiven ? nil : subscribedAt + .microseconds(Int64(o.duration * 1_000_000))
        var interrupted = false
        var mediaFailure: OTError?
        var tick = 1
        while true {
            let next = end.map { min($0, subscribedAt + .seconds(tick)) } ?? subscribedAt + .seconds(tick)
            let wait = max(0, (next - MonotonicClock.now()).microseconds)
            if stopRequested.wait(timeout: .now() + .microseconds(Int(wait))) == .success { interrupted = true; break }
            if let e = receiver.failure ?? pubEvents.error ?? subEvents.error { mediaFailure = e; break }
            let st = subscriber.stats
            let rtt = st.roundTripTimeMillis ?? publisher.stats.roundTripTimeMillis
            let elapsed = Double((MonotonicClock.now() - subscribedAt).microseconds) / 1e6
            out(String(format: "[%5.1fs] ", elapsed) + receiver.statusLine(st, rttMillis: rtt))
            for line in guests?.statusLines() ?? [] { out(line) }
            if let end, MonotonicClock.now() >= end { break }
            tick += 1
        }
        if interrupted { out("interrupted: stopping") }
        if let e = mediaFailure { out("media failed: \(e); stopping") }

        // Stop, then write what was received.
        let guestSummary = guests?.stop() ?? []
        let pubStats = publisher.stats
        let subStats = subscriber.stats
        try? subSession.unsubscribe(subscriber)
        try? pubSession.unpublish(publisher)
        let recorded = try receiver.finish()
        var pngNote = "no frame received"
        if let picture = receiver.picture {
            try PNGWriter.write(picture, to: files.png)
            pngNote = "\(picture.width)x\(picture.height)"
        }
        let rb = receiver.stamps
        let lat = receiver.latency

        let ran = Double((MonotonicClock.now() - subscribedAt).microseconds) / 1e6
        out("summary (\(mode), \(o.width)x\(o.height) at \(o.fps) fps, \(String(format: "%.1f", ran)) s subscribed\(interrupted ? ", interrupted" : ""))")
        out("  video frames: sent \(pubStats.framesEncoded) (keyframes \(pubStats.keyFramesEncoded)), decoded \(subStats.framesDecoded), "
            + "rendered \(receiver.rendered), dropped \(subStats.framesDropped), freezes \(subStats.freezeCount)")
        if let first = rb.first, let last = rb.last {
            let order = rb.outOfOrder == 0 ? "in order" : "\(rb.outOfOrder) out of order"
            out("  counters: \(rb.stamped) read back, #\(first) … #\(last), \(order), \(rb.gaps) gaps (\(rb.missing) frames skipped)")
        } else {
            out("  counters: none read back")
        }
        if let l = lat {
            out(String(format: "  capture-to-render latency (ms, n=%d): p50 %.1f  p90 %.1f  p95 %.1f  p99 %.1f  max %.1f",
                       l.count, l.p50, l.p90, l.p95, l.p99, l.max))
        }
        if let ff = receiver.firstFrame { out(String(format: "  subscribe to first frame: %.0f ms", Double((ff - subscribedAt).microseconds) / 1000)) }
        let pkts = subStats.videoPacketsReceived + subStats.audioPacketsReceived
        let lost = subStats.videoPacketsLost + subStats.audioPacketsLost
        out("  received: video \(subStats.videoBytesReceived) bytes in \(subStats.videoPacketsReceived) packets, audio \(subStats.audioBytesReceived) bytes "
            + "in \(subStats.audioPacketsReceived) packets; lost \(lost) (\(String(format: "%.2f", pkts + lost > 0 ? 100 * Double(lost) / Double(pkts + lost) : 0))%)"
            + ((subStats.roundTripTimeMillis ?? pubStats.roundTripTimeMillis).map { String(format: ", rtt %.1f ms", $0) } ?? ""))
        if guests != nil { out("  browser streams received: \(guestSummary.isEmpty ? "none" : "\(guestSummary.count)")") }
        for line in guestSummary { out(line) }
        out("  sent: video \(pubStats.videoBytesSent) bytes, audio \(pubStats.audioBytesSent) bytes, target \(pubStats.targetBitrateKbps) kbit/s")
        out("  files:")
        out("    \(files.png)  \(fileSize(files.png))  (\(pngNote))")
        out("    \(files.ivf)  \(fileSize(files.ivf))  (\(recorded.ivfFrames) VP8 frames)")
        out("    \(files.wav)  \(fileSize(files.wav))  (\(String(format: "%.1f", receiver.recordedAudioSeconds)) s of PCM)")

        // Pass only when the subscriber decoded frames whose counters read back in increasing order.
        if let e = mediaFailure { throw DemoFailure("media failed: \(e)") }
        if let e = receiver.error { throw DemoFailure("writing the recordings failed: \(e)") }
        guard subStats.framesDecoded > 0, receiver.rendered > 0 else {
            throw DemoFailure(receiver.connected ? "the subscriber decoded no video frames" : "the subscriber's media never connected")
        }
        if o.camera == nil {
            guard rb.stamped >= 2 else { throw DemoFailure("no test-pattern counters could be read back from the decoded frames") }
            guard rb.outOfOrder == 0 else { throw DemoFailure("\(rb.outOfOrder) decoded frames came out of order") }
        }
        guard recorded.wavWritten else { throw DemoFailure("no audio was received") }
        out("PASS: \(subStats.framesDecoded) frames decoded" + (o.camera == nil ? ", counters increasing" : ""))
    }

    private func path(_ name: String) -> String { (options.outDir as NSString).appendingPathComponent(name) }

    private func fileSize(_ path: String) -> String {
        guard let n = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber else { return "missing" }
        return "\(n.intValue) bytes"
    }
}
