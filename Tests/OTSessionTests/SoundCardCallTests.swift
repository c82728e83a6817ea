import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTTestSupport
import XCTest

/// Microphone and speaker on a real sound server: a private PulseAudio daemon with two null sinks. pacat plays a
/// 440 Hz tone into "tone_in"; the publisher captures "tone_in.monitor"; the stream crosses a routed session (the
/// embedded server's media router); the subscriber's session plays it to "speaker"; parec records "speaker.monitor".
final class SoundCardCallTests: RoutedServerTestCase {
    func testToneCrossesTheSessionFromMicrophoneToSpeakerAndSurvivesUnplugging() throws {
        let pulse = try PulseAudioServer(sinks: ["tone_in", "speaker"])
        let sid = try server.session(relayed: false)
        let (a, _) = try server.client(sid, name: "A")
        let (b, bRec) = try server.client(sid, name: "B")
        defer { try? a.disconnect(); try? b.disconnect() }

        let speaker = try PulseAudioDevice(server: pulse.server, sink: "speaker")
        try b.setAudioDevice(speaker)
        let microphone = try PulseAudioDevice(server: pulse.server, source: "tone_in.monitor")
        let pubRec = MediaRecorder("publisher")
        let publisher = try Publisher(delegate: pubRec, settings: PublisherSettings(name: "mic", videoSource: .none, audioDevice: microphone))
        try a.publish(publisher)
        pubRec.wait("streamCreated") { $0.publisherStreamCreated }
        let stream = try XCTUnwrap(publisher.stream)
        bRec.wait("stream at B") { $0.contains(.streamCreated(stream)) }

        // Timestamped taps on both monitors (same path, same buffering), and parec on the speaker's.
        let tapIn = try PulseAudioDevice(server: pulse.server, source: "tone_in.monitor")
        let tapOut = try PulseAudioDevice(server: pulse.server, source: "speaker.monitor")
        let heardIn = TimedAudioRecorder(), heardOut = TimedAudioRecorder()
        tapIn.setCaptureSink(heardIn); tapOut.setCaptureSink(heardOut)
        try tapIn.startCapture(); try tapOut.startCapture()
        let parec = try pulse.record("speaker.monitor", to: "speaker.raw")

        let subRec = MediaRecorder("subscriber")
        let subscriber = Subscriber(stream: stream, delegate: subRec)
        try b.subscribe(subscriber)
        subRec.waitFor(.connected)
        subRec.wait("0.5 s of (silent) audio") { $0.audioTotal >= 24_000 }
        XCTAssertTrue(speaker.isRendering)
        XCTAssertEqual(speaker.usingFallback.render, false)
        XCTAssertEqual(microphone.usingFallback.capture, false)
        XCTAssertNil(heardOut.onset(rmsAbove: 2000), "the speaker is silent before the tone")

        // 2 s of 440 Hz at half scale into tone_in.
        var generator = ToneGenerator(frequency: 440, amplitude: 0.5, settings: AudioDeviceSettings())
        var tone = [Int16](repeating: 0, count: 96_000)
        tone.withUnsafeMutableBufferPointer { generator.fill($0) }
        let pacat = try pulse.play(try pulse.rawFile("tone.raw", tone), into: "tone_in")
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let on = heardOut.onset(rmsAbove: 2000), heardOut.samples.count >= on.sample + 48_000 { break }
            usleep(20_000)
        }
        pacat.waitUntilExit()
        parec.process.interrupt()
        parec.process.waitUntilExit()
        tapIn.stopCapture(); tapOut.stopCapture()

        // parec's recording of the speaker holds the tone.
        let recorded = PulseAudioServer.samples(at: parec.path)
        let first = try XCTUnwrap(recorded.firstIndex { abs(Int($0)) > 4000 }, "no tone in parec's recording (\(recorded.count) samples)")
        let steady = recorded.dropFirst(first + 9_600).prefix(24_000)
        XCTAssertGreaterThanOrEqual(steady.count, 12_000)
        let pitch = TonePitch(steady)
        XCTAssertTrue(pitch.holds(440, tolerance: 10), "not a 440 Hz tone: \(pitch)")
        let peak = steady.map { abs(Int($0)) }.max() ?? 0
        XCTAssertGreaterThan(peak, 8000, "the tone arrives near its level (peak \(peak) of 16384 sent)")

        // Added latency: tone onset on the speaker's monitor minus on the microphone's.
        let onIn = try XCTUnwrap(heardIn.onset(rmsAbove: 2000)), onOut = try XCTUnwrap(heardOut.onset(rmsAbove: 2000))
        let latencyMillis = Double(onOut.arrivalMicros - onIn.arrivalMicros) / 1000
        XCTAssertGreaterThan(latencyMillis, 0)
        // Where it goes: to the subscriber's decoded-audio callback, then through the mixer and the speaker.
        let decoded = try XCTUnwrap(subRec.firstLoudAudioMicros)
        print(String(format: "[figures] sound card call (routed): tone onset tone_in.monitor -> speaker.monitor %.0f ms added latency "
                     + "(to the subscriber's decoded audio %.0f ms, then mixer and playout %.0f ms; microphone 10 ms fragments, "
                     + "playout buffer %d ms)", latencyMillis, Double(decoded - onIn.arrivalMicros) / 1000,
                     Double(onOut.arrivalMicros - decoded) / 1000, speaker.playoutLatencyMillis))

        // Unplug the speaker mid-call: the session reports it, playout carries on (discarded), audio still arrives.
        try pulse.unplug(sink: "speaker")
        bRec.waitFor(.deviceFailed(.speaker, .deviceLost))
        XCTAssertTrue(speaker.isRendering)
        XCTAssertEqual(speaker.usingFallback.render, true)
        let received = subRec.audioTotal
        subRec.wait("audio after the speaker went") { $0.audioTotal >= received + 24_000 }

        // Unplug the microphone (tone_in and its monitor): the publisher reports it and keeps sending (silence).
        try pulse.unplug(sink: "tone_in")
        pubRec.waitFor(.deviceFailed(.microphone, .deviceLost))
        XCTAssertEqual(microphone.usingFallback.capture, true)
        let sent = publisher.stats.audioPacketsSent
        pubRec.wait("audio packets after the microphone went") { _ in publisher.stats.audioPacketsSent >= sent + 25 }
        let after = subRec.audioTotal
        subRec.wait("the subscriber still receives") { $0.audioTotal >= after + 24_000 }
        XCTAssertEqual(a.status, .connected); XCTAssertEqual(b.status, .connected)
        XCTAssertFalse(subRec.events.contains(.disconnected))
        XCTAssertFalse(bRec.events.contains(.disconnected))
    }
}
