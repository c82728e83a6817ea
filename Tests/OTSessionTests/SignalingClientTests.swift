import Foundation
import OTBase
import OTSession
import OTWire
import XCTest

/// The sans-IO client state machine, driven with messages and virtual time only.
final class SignalingClientTests: XCTestCase {
    let t0 = Instant(micros: 1_000_000)
    let me = ConnectionInfo(id: "me", creationTime: 1, data: "d")
    let other = ConnectionInfo(id: "other", creationTime: 2, data: "")
    func stream(_ id: String, audio: Bool = true) -> StreamInfo {
        StreamInfo(id: id, connectionId: "other", name: id, hasAudio: audio, hasVideo: true, videoType: "camera", width: 2, height: 2, creationTime: 3)
    }
    func connected(role: SessionRole = .publisher, connections: [ConnectionInfo] = [], streams: [StreamInfo] = []) -> ServerMessage {
        .connected(ConnectedInfo(id: 1, connection: me, role: role, resumeToken: "rt", connections: connections, streams: streams,
                                 muteForced: false, resumed: false, relayed: false, e2ee: false))
    }
    func events(_ out: [SignalingClient.Output]) -> [SessionEvent] { out.compactMap { if case .event(let e) = $0 { e } else { nil } } }

    func connectedClient(role: SessionRole = .publisher) throws -> SignalingClient {
        var c = SignalingClient(apiKey: "k", sessionId: "s")
        try c.connect(token: "tok", now: t0)
        _ = c.transportOpened(now: t0)
        _ = c.receive(connected(role: role), now: t0)
        return c
    }

    func testConnectSequenceAndRoster() throws {
        var c = SignalingClient(apiKey: "k", sessionId: "s", eventsSuppressed: true)
        XCTAssertEqual(c.status, .notConnected)
        try c.connect(token: "tok", now: t0)
        XCTAssertEqual(c.status, .connecting)
        XCTAssertThrowsError(try c.connect(token: "tok", now: t0)) { XCTAssertEqual(($0 as? OTError)?.code, .illegalState) }
        let out = c.transportOpened(now: t0)
        XCTAssertEqual(out, [.send(.connect(ConnectRequest(id: 1, apiKey: "k", sessionId: "s", token: "tok", eventsSuppressed: true)))])
        let ev = events(c.receive(connected(connections: [other], streams: [stream("s1")]), now: t0))
        XCTAssertEqual(ev, [.connected(me), .connectionCreated(other), .streamCreated(stream("s1"))])
        XCTAssertEqual(c.status, .connected)
        XCTAssertEqual(c.capabilities, SessionCapabilities(role: .publisher))
        XCTAssertEqual(c.streams.count, 1)
        XCTAssertEqual(c.resumeRequest(), .connect(ConnectRequest(id: 2, apiKey: "k", sessionId: "s", token: "tok", eventsSuppressed: true,
                                                                  resumeConnectionId: "me", resumeToken: "rt")))
    }

    /// A roster too large for one message arrives as `connected` plus `roster` parts: the client reports the
    /// connection once, with the whole roster, after the last part.
    func testRosterInPartsIsReportedWhole() throws {
        var c = SignalingClient(apiKey: "k", sessionId: "s")
        try c.connect(token: "tok", now: t0)
        _ = c.transportOpened(now: t0)
        let others = (0..<400).map { ConnectionInfo(id: "c\($0)", creationTime: 1, data: String(repeating: "€", count: 1000)) }
        guard case .connected(var info) = connected(connections: others, streams: [stream("s1"), stream("s2")]) else { return XCTFail() }
        info.connections = others
        let frames = SignalingCodec.encodeFrames(.connected(info))
        XCTAssertGreaterThan(frames.count, 2)
        var ev: [SessionEvent] = []
        for (i, f) in frames.enumerated() {
            let got = events(c.receive(try SignalingCodec.decodeServer(f), now: t0))
            if i < frames.count - 1 { XCTAssertEqual(got, [], "nothing before the last part"); XCTAssertEqual(c.status, .connecting) }
            ev += got
        }
        XCTAssertEqual(ev.first, .connected(me))
        XCTAssertEqual(ev.count, 1 + others.count + 2)
        XCTAssertEqual(c.connections.count, others.count)
        XCTAssertEqual(c.streams.count, 2)
        XCTAssertEqual(events(c.receive(.roster(connections: [other], streams: [], last: true), now: t0)), [], "a stray part is ignored")
    }

    func testConnectTimesOutWith1021() throws {
        var c = SignalingClient(apiKey: "k", sessionId: "s", connectTimeout: .seconds(5))
        try c.connect(token: "tok", now: t0)
        XCTAssertEqual(c.nextDeadline, t0 + .seconds(5))
        XCTAssertEqual(c.tick(now: t0 + .seconds(4)), [])
        let out = c.tick(now: t0 + .seconds(5))
        XCTAssertEqual(events(out), [.failed(OTError(.connectionTimedOut))])
        XCTAssertTrue(out.contains(.closeTransport))
        XCTAssertEqual(c.status, .failed)
        // A failed session can connect again.
        XCTAssertNoThrow(try c.connect(token: "tok", now: t0 + .seconds(6)))
    }

    func testRefusedConnectAndTransportFailure() throws {
        var c = SignalingClient(apiKey: "k", sessionId: "s")
        try c.connect(token: "tok", now: t0)
        _ = c.transportOpened(now: t0)
        XCTAssertEqual(events(c.receive(.error(code: 1004, message: "bad"), now: t0)), [.failed(OTError(.authorizationFailure, "bad"))])
        XCTAssertEqual(c.status, .failed)
        XCTAssertEqual(c.transportClosed(error: nil, now: t0), [], "one failure only")

        var d = SignalingClient(apiKey: "k", sessionId: "s")
        try d.connect(token: "tok", now: t0)
        XCTAssertEqual(events(d.transportClosed(error: OTError(.connectionFailed, "refused"), now: t0)), [.failed(OTError(.connectionFailed, "refused"))])
    }

    func testDropWithoutReconnectionGivesErrorThenDisconnectAndFailsPending() throws {
        var c = try connectedClient()
        c.reconnectEnabled = false
        let (id, _) = try c.signal(type: "a", data: "b", to: nil)
        let out = c.transportClosed(error: OTError(.connectionDropped, "reset"), now: t0)
        XCTAssertEqual(out.first, .completed(id: id, .failure(OTError(.notConnected))))
        XCTAssertEqual(events(out), [.failed(OTError(.connectionDropped, "reset")), .disconnected])
        XCTAssertEqual(c.status, .notConnected)
        XCTAssertTrue(c.connections.isEmpty)
    }

    func testOrderlyDisconnectAndTimeout() throws {
        var c = try connectedClient()
        XCTAssertEqual(try c.disconnect(now: t0), [.send(.disconnect)])
        XCTAssertEqual(c.status, .disconnecting)
        XCTAssertEqual(events(c.transportClosed(error: nil, now: t0)), [.disconnected])
        XCTAssertEqual(c.status, .notConnected)
        XCTAssertThrowsError(try c.disconnect(now: t0)) { XCTAssertEqual(($0 as? OTError)?.code, .notConnected) }

        var d = try connectedClient()
        _ = try d.disconnect(now: t0)
        let out = d.tick(now: t0 + .seconds(3))
        XCTAssertEqual(events(out), [.disconnected])
        XCTAssertTrue(out.contains(.closeTransport))
    }

    func testSignalValidationAndRoles() throws {
        var c = try connectedClient()
        let (id, out) = try c.signal(type: "chat", data: "hi", to: "other")
        XCTAssertEqual(out, [.send(.signal(id: id, type: "chat", data: "hi", to: "other"))])
        XCTAssertEqual(c.receive(.reply(id: id, code: nil, message: nil, stream: nil, issueId: nil), now: t0),
                       [.completed(id: id, .success(RequestReply()))])
        XCTAssertEqual(c.receive(.reply(id: id, code: nil, message: nil, stream: nil, issueId: nil), now: t0), [], "duplicate reply ignored")
        XCTAssertThrowsError(try c.signal(type: "a b", data: "", to: nil)) { XCTAssertEqual(($0 as? OTError)?.code, .invalidSignalType) }
        var s = try connectedClient(role: .subscriber)
        XCTAssertThrowsError(try s.signal(type: "a", data: "", to: nil)) { XCTAssertEqual(($0 as? OTError)?.code, .forceUnpublishOrInvalidStream) }
        var n = SignalingClient(apiKey: "k", sessionId: "s")
        XCTAssertThrowsError(try n.signal(type: "a", data: "", to: nil)) { XCTAssertEqual(($0 as? OTError)?.code, .notConnected) }
    }

    func testEventsFromServer() throws {
        var c = try connectedClient()
        XCTAssertEqual(events(c.receive(.connectionCreated(other), now: t0)), [.connectionCreated(other)])
        XCTAssertEqual(events(c.receive(.connectionCreated(me), now: t0)), [], "own connection is not an event")
        XCTAssertEqual(events(c.receive(.streamCreated(stream("s1")), now: t0)), [.streamCreated(stream("s1"))])
        XCTAssertEqual(events(c.receive(.streamChanged(stream("s1", audio: false), property: "hasAudio"), now: t0)),
                       [.streamChanged(stream("s1", audio: false), .hasAudio(false))])
        XCTAssertEqual(c.streams["s1"]?.hasAudio, false)
        XCTAssertEqual(events(c.receive(.streamChanged(stream("unknown"), property: "hasAudio"), now: t0)), [])
        XCTAssertEqual(events(c.receive(.signal(type: "t", data: "d", from: "other"), now: t0)), [.signal(type: "t", data: "d", from: other)])
        XCTAssertEqual(events(c.receive(.signal(type: "t", data: "d", from: nil), now: t0)), [.signal(type: "t", data: "d", from: nil)])
        XCTAssertEqual(events(c.receive(.muteForced(active: true, streamId: nil, excludedStreamIds: ["x"]), now: t0)),
                       [.muteForced(MuteForcedInfo(active: true, streamId: nil, excludedStreamIds: ["x"]))])
        XCTAssertTrue(c.muteAllActive)
        XCTAssertEqual(events(c.receive(.streamDestroyed(streamId: "s1", reason: "x"), now: t0)), [.streamDestroyed(stream("s1", audio: false))])
        XCTAssertEqual(events(c.receive(.connectionDestroyed(connectionId: "other", reason: "x"), now: t0)), [.connectionDestroyed(other)])
        XCTAssertEqual(events(c.receive(.connectionDestroyed(connectionId: "other", reason: "x"), now: t0)), [])
        XCTAssertEqual(events(c.receive(.disconnected(reason: "forceDisconnected"), now: t0)), [.disconnected])
        XCTAssertEqual(c.status, .notConnected)
    }

    func resumedMessage(connections: [ConnectionInfo] = [], streams: [StreamInfo] = [], grace: Int? = nil) -> ServerMessage {
        .connected(ConnectedInfo(id: 9, connection: me, role: .publisher, resumeToken: "rt2", connections: connections, streams: streams,
                                 muteForced: false, resumed: true, relayed: false, e2ee: false, reconnectGraceMillis: grace))
    }

    func testDropStartsReconnectingAndResumeReconcilesTheRoster() throws {
        var c = SignalingClient(apiKey: "k", sessionId: "s")
        try c.connect(token: "tok", now: t0)
        _ = c.transportOpened(now: t0)
        let gone = ConnectionInfo(id: "gone", creationTime: 5, data: "")
        _ = c.receive(.connected(ConnectedInfo(id: 1, connection: me, role: .publisher, resumeToken: "rt", connections: [other, gone],
                                               streams: [stream("kept"), stream("old")], muteForced: false, resumed: false, relayed: false,
                                               e2ee: false, reconnectGraceMillis: 4000)), now: t0)
        let (inFlight, _) = try c.signal(type: "a", data: "b", to: nil)
        let out = c.transportClosed(error: OTError(.connectionDropped, "reset"), now: t0)
        XCTAssertEqual(out.first, .completed(id: inFlight, .failure(OTError(.connectionDropped, "the connection dropped before the server replied"))))
        XCTAssertEqual(events(out), [.reconnecting])
        XCTAssertEqual(c.status, .connected)
        XCTAssertTrue(c.isReconnecting)
        // Queued while reconnecting: nothing goes out; a signal that opted out of the retry is refused.
        let (queued, q) = try c.signal(type: "q", data: "1", to: nil)
        XCTAssertEqual(q, [])
        XCTAssertEqual(c.send(.mediaClose(peerId: "p")), [])
        XCTAssertThrowsError(try c.signal(type: "q", data: "2", to: nil, retryAfterReconnect: false)) {
            XCTAssertEqual(($0 as? OTError)?.code, .notConnected)
        }
        // First attempt after the first backoff step.
        XCTAssertEqual(c.nextDeadline, t0 + .milliseconds(100))
        XCTAssertEqual(c.tick(now: t0 + .milliseconds(50)), [])
        XCTAssertEqual(c.tick(now: t0 + .milliseconds(100)), [.openTransport])
        // It fails; the next one waits longer.
        XCTAssertEqual(c.transportClosed(error: OTError(.connectionFailed, "refused"), now: t0 + .milliseconds(110)), [])
        XCTAssertEqual(c.nextDeadline, t0 + .milliseconds(360))
        XCTAssertEqual(c.tick(now: t0 + .milliseconds(360)), [.openTransport])
        let opened = c.transportOpened(now: t0 + .milliseconds(370))
        guard case .send(.connect(let req)) = opened.first else { return XCTFail("no resume request: \(opened)") }
        XCTAssertEqual(req.resumeConnectionId, "me")
        XCTAssertEqual(req.resumeToken, "rt")
        // Resumed: "gone" left, "new" joined, stream "old" ended, "kept" changed, "fresh" appeared; then the queue goes out.
        let fresh = ConnectionInfo(id: "new", creationTime: 6, data: "")
        var kept = stream("kept"); kept.hasAudio = false
        let resumed = c.receive(resumedMessage(connections: [other, fresh], streams: [kept, stream("fresh")]), now: t0 + .milliseconds(380))
        XCTAssertEqual(events(resumed), [.reconnected, .streamDestroyed(stream("old")), .connectionDestroyed(gone), .connectionCreated(fresh),
                                         .streamChanged(kept, .hasAudio(false)), .streamCreated(stream("fresh"))])
        XCTAssertEqual(Array(resumed.suffix(2)), [.send(.signal(id: queued, type: "q", data: "1", to: nil)), .send(.mediaClose(peerId: "p"))])
        XCTAssertFalse(c.isReconnecting)
        XCTAssertEqual(c.connection, me)
        // What the server queued for us replays the same changes: not reported twice.
        XCTAssertEqual(events(c.receive(.streamCreated(stream("fresh")), now: t0)), [])
        XCTAssertEqual(events(c.receive(.connectionCreated(fresh), now: t0)), [])
        XCTAssertEqual(events(c.receive(.streamChanged(kept, property: "hasAudio"), now: t0)), [])
        XCTAssertEqual(events(c.receive(.streamDestroyed(streamId: "old", reason: "x"), now: t0)), [])
        // The new resume token is used next time.
        XCTAssertEqual(events(c.transportClosed(error: nil, now: t0 + .seconds(1))), [.reconnecting])
        _ = c.tick(now: t0 + .seconds(2))
        guard case .send(.connect(let req2)) = c.transportOpened(now: t0 + .seconds(2)).first else { return XCTFail("no resume request") }
        XCTAssertEqual(req2.resumeToken, "rt2")
    }

    func testReconnectionGivesUpAfterTheGracePeriodWithConnectionDropped() throws {
        var c = try connectedClient()
        _ = c.receive(resumedMessage(grace: 2000), now: t0)  // a (re)connect announcing a 2 s grace period
        _ = c.transportClosed(error: nil, now: t0)
        let (queued, _) = try c.signal(type: "q", data: "1", to: nil)
        var now = t0
        var attempts = 0
        var last: [SignalingClient.Output] = []
        // Every attempt hangs: abandoned after the attempt timeout or cut by the grace period.
        while c.isReconnecting, now < t0 + .seconds(10) {
            now = c.nextDeadline ?? now + .seconds(1)
            last = c.tick(now: now)
            if last.contains(.openTransport) { attempts += 1 }
        }
        XCTAssertGreaterThanOrEqual(attempts, 1)
        XCTAssertEqual(now, t0 + .seconds(2))
        XCTAssertEqual(events(last), [.failed(OTError(.connectionDropped, "could not reconnect within the server's grace period")), .disconnected])
        XCTAssertTrue(last.contains(.completed(id: queued, .failure(OTError(.notConnected)))))
        XCTAssertEqual(c.status, .notConnected)
        XCTAssertFalse(c.isReconnecting)
    }

    /// A server announcing an absurd grace period (`Int.max` milliseconds, through the wire format) overflows no
    /// deadline: the client reconnects and gives up after the longest grace it accepts, an hour.
    func testAbsurdGracePeriodIsCutToAnHour() throws {
        var c = try connectedClient()
        for frame in SignalingCodec.encodeFrames(resumedMessage(grace: .max)) {
            _ = c.receive(try SignalingCodec.decodeServer(frame), now: t0)
        }
        XCTAssertEqual(events(c.transportClosed(error: nil, now: t0)), [.reconnecting])
        var now = t0
        while c.isReconnecting, now < t0 + .seconds(7200) {
            now = c.nextDeadline ?? now + .seconds(1)
            _ = c.tick(now: now)
        }
        XCTAssertFalse(c.isReconnecting)
        XCTAssertEqual(now, t0 + SignalingClient.maxReconnectGrace)
        XCTAssertEqual(SignalingClient.maxReconnectGrace, .seconds(3600))
    }

    /// Fuzz/corpus/control/ and seeded mutations of it (extreme numbers among them): every input the codec reads as a
    /// server message goes into a connecting client (the `connected` path), then into a connected one, whose
    /// transport then drops and comes back (reconnection timers, the resume path). They may be refused, never trap.
    func testMutatedServerMessagesNeverTrapTheClient() throws {
        let corpus = FuzzMutator.readCorpus(directory: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/control").path)
            .filter { (try? SignalingCodec.decodeServer(String(decoding: $0, as: UTF8.self))) != nil }
        XCTAssertGreaterThanOrEqual(corpus.count, 2)
        var mutator = FuzzMutator(corpus: corpus, seed: 0x5165, maxRandomLength: 600)
        var decoded = 0
        for i in 0..<(corpus.count + 40_000) {
            let input = i < corpus.count ? corpus[i] : mutator.next()
            guard let m = try? SignalingCodec.decodeServer(String(decoding: input, as: UTF8.self)) else { continue }
            decoded += 1
            var connecting = SignalingClient(apiKey: "k", sessionId: "s")
            try connecting.connect(token: "tok", now: t0)
            _ = connecting.transportOpened(now: t0)
            _ = connecting.receive(m, now: t0)
            var c = try connectedClient()
            for client in [connecting, c] {
                c = client
                _ = c.receive(m, now: t0)
                _ = c.transportClosed(error: nil, now: t0)
                var now = t0
                for _ in 0..<3 { now = c.nextDeadline ?? now + .seconds(1); _ = c.tick(now: now) }
                _ = c.transportOpened(now: now)
                _ = c.receive(m, now: now)
            }
        }
        XCTAssertGreaterThan(decoded, 1_000, "enough mutations still decode to reach the machine")
    }

    func testRefusedResumeAndDisconnectWhileReconnecting() throws {
        var c = try connectedClient()
        _ = c.transportClosed(error: nil, now: t0)
        XCTAssertEqual(c.tick(now: t0 + .seconds(1)), [.openTransport])
        _ = c.transportOpened(now: t0 + .seconds(1))
        let out = c.receive(.error(code: 1022, message: "gone"), now: t0 + .seconds(1))
        XCTAssertEqual(events(out), [.failed(OTError(.connectionDropped, "the server refused to resume the connection (1022: gone)")), .disconnected])
        XCTAssertEqual(c.status, .notConnected)

        var d = try connectedClient()
        _ = d.transportClosed(error: nil, now: t0)
        XCTAssertEqual(events(try d.disconnect(now: t0)), [.disconnected])
        XCTAssertEqual(d.status, .notConnected)
        XCTAssertNil(d.nextDeadline)
    }
}
