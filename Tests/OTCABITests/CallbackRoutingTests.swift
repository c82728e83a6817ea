@testable import OTCABI
@testable import OTSession
import COTABI
import Dispatch
import Foundation
import Synchronization
import XCTest

/// Where a publisher's or subscriber's C callbacks run when it leaves a session while a callback of its time there is
/// still queued: a publisher's on the first session's sink, never the second's; a subscriber's nowhere (no subscriber
/// callback follows ot_session_unsubscribe). Session A polls (`ot_poll` on the test's thread), session B has a library
/// thread; A's delivery queue is held while the object leaves A, so that A's callback is still queued when it has.
final class CallbackRoutingTests: XCTestCase {
    /// What the callbacks saw: each callback's name and whether it ran inside `ot_poll` (A's sink).
    private final class Seen: @unchecked Sendable {
        let calls = Mutex<[(String, polled: Bool)]>([])
        func add(_ name: String) { calls.withLock { $0.append((name, PollQueue.shared.isPollingThread)) } }
        func polled(_ name: String) -> [Bool] { calls.withLock { $0.filter { $0.0 == name }.map(\.polled) } }
    }

    private var server: UnsafeMutablePointer<ot_server>?
    private var sessionId = "", url = ""

    override func setUpWithError() throws {
        server = ot_server_new("127.0.0.1", 0, "4711", String(repeating: "ab", count: 20))
        XCTAssertNotNil(server)
        XCTAssertEqual(ot_server_start(server, nil), 0)
        sessionId = try text { ot_server_create_session(server, 0, $0, $1) }
        url = try text { ot_server_get_url(server, $0, $1) }
    }

    override func tearDown() { XCTAssertEqual(ot_server_delete(server), 0) }

    /// Deletes the sessions, then runs what their delivery queues still hold and what that left in the poll queue, so
    /// that the process's poll queue is empty for the next test.
    private func delete(_ sessions: (UnsafeMutablePointer<ot_session>?, SessionObject)...) {
        for (h, o) in sessions {
            XCTAssertEqual(ot_session_delete(h), 0)
            flush(o)
        }
        runPolled()
    }

    /// Returns once what `session` delivered so far has been posted to its sink, and (thread sinks) has run there.
    private func flush(_ session: SessionObject) {
        let flushed = DispatchSemaphore(value: 0)
        session.session.deliver { flushed.signal() }
        flushed.wait()
        session.sink.drain()
    }

    /// Runs every callback waiting in the poll queue.
    private func runPolled() {
        var ran: UInt = 1
        while ran > 0 { XCTAssertEqual(ot_poll(0, &ran), 0) }
    }

    private func text(_ call: (UnsafeMutablePointer<CChar>, UInt) -> ot_status) throws -> String {
        var buf = [CChar](repeating: 0, count: 32 * 1024)
        XCTAssertEqual(buf.withUnsafeMutableBufferPointer { call($0.baseAddress!, UInt($0.count)) }, 0)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A connected session (poll mode or a thread of its own) and its Swift object.
    private func session(poll: Bool) throws -> (UnsafeMutablePointer<ot_session>?, SessionObject) {
        var settings = ot_session_settings()
        XCTAssertEqual(ot_session_settings_default(&settings), 0)
        settings.callback_mode = Int32(poll ? OT_CALLBACK_POLL.rawValue : OT_CALLBACK_THREAD.rawValue)
        var callbacks = ot_session_callbacks()
        let h = url.withCString { u in
            settings.server_url = u
            return ot_session_new_with_settings("4711", sessionId, &callbacks, &settings)
        }
        let o = try XCTUnwrap(HandleRegistry.shared.lookup(UInt(bitPattern: h), as: SessionObject.self))
        let token = try text { ot_server_new_token(server, sessionId, Int32(OT_ROLE_PUBLISHER.rawValue), nil, 0, $0, $1) }
        XCTAssertEqual(ot_session_connect(h, token), 0)
        XCTAssertTrue(until { o.session.status == .connected })
        return (h, o)
    }

    /// Polls (running A's callbacks on this thread) until `condition` holds, up to 20 s; whether it did.
    private func until(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while !condition() && Date() < deadline { _ = ot_poll(20, nil) }
        return condition()
    }

    /// A small test-pattern publisher.
    private func publisher(_ callbacks: ot_publisher_callbacks) -> UnsafeMutablePointer<ot_publisher>? {
        var settings = ot_publisher_settings()
        XCTAssertEqual(ot_publisher_settings_default(&settings), 0)
        (settings.width, settings.height, settings.fps) = (160, 120, 15)
        var callbacks = callbacks
        return ot_publisher_new(&settings, &callbacks)
    }

    /// Holds `session`'s delivery queue (where its publisher's and subscribers' callbacks are raised) until the result
    /// is called.
    private func hold(_ session: SessionObject) -> () -> Void {
        let gate = DispatchSemaphore(value: 0)
        session.session.deliver { gate.wait() }
        return { gate.signal() }
    }

    func testAPublishersStreamDestroyedInAStaysOnAsSinkWhenItPublishesInB() throws {
        let (a, aObject) = try session(poll: true)
        let (b, bObject) = try session(poll: false)
        defer { delete((a, aObject), (b, bObject)) }
        let seen = Seen()
        var callbacks = ot_publisher_callbacks()
        callbacks.user_data = Unmanaged.passUnretained(seen).toOpaque()
        callbacks.on_stream_created = { _, u, _ in Unmanaged<Seen>.fromOpaque(u!).takeUnretainedValue().add("created") }
        callbacks.on_stream_destroyed = { _, u, _ in Unmanaged<Seen>.fromOpaque(u!).takeUnretainedValue().add("destroyed") }
        let p = publisher(callbacks)
        defer { XCTAssertEqual(ot_publisher_delete(p), 0) }
        XCTAssertEqual(ot_session_publish(a, p), 0)
        XCTAssertTrue(until { seen.polled("created") == [true] }, "A's stream: \(seen.polled("created"))")

        let release = hold(aObject)
        XCTAssertEqual(ot_session_unpublish(a, p), 0)
        XCTAssertEqual(ot_session_publish(b, p), 0)
        release()
        XCTAssertTrue(until { seen.polled("destroyed").count == 1 && seen.polled("created").count == 2 })
        XCTAssertEqual(seen.polled("destroyed"), [true], "A's on_stream_destroyed ran on B's sink")
        XCTAssertEqual(seen.polled("created"), [true, false], "B's on_stream_created ran on A's sink")
    }

    func testASubscribersCallbackQueuedInASessionItLeftIsDropped() throws {
        let (a, aObject) = try session(poll: true)
        let (b, bObject) = try session(poll: false)
        let (publishing, publishingObject) = try session(poll: false)
        defer { delete((a, aObject), (b, bObject), (publishing, publishingObject)) }
        let p = publisher(ot_publisher_callbacks())
        defer { XCTAssertEqual(ot_publisher_delete(p), 0) }
        XCTAssertEqual(ot_session_publish(publishing, p), 0)
        let publisher = try XCTUnwrap(HandleRegistry.shared.lookup(UInt(bitPattern: p), as: PublisherObject.self))
        XCTAssertTrue(until { publisher.publisher.stream.map { aObject.session.streams[$0.id] != nil } ?? false })
        let stream = try XCTUnwrap(publisher.publisher.stream)

        let seen = Seen()
        var callbacks = ot_subscriber_callbacks()
        callbacks.user_data = Unmanaged.passUnretained(seen).toOpaque()
        callbacks.on_connected = { _, u, _ in Unmanaged<Seen>.fromOpaque(u!).takeUnretainedValue().add("connected") }
        let streamHandle = Handle.pointer(HandleRegistry.shared.insert(aObject.streamObject(stream)), as: ot_stream.self)
        defer { XCTAssertEqual(ot_stream_delete(streamHandle), 0) }
        let sub = ot_subscriber_new(UnsafePointer(streamHandle), &callbacks)
        defer { XCTAssertEqual(ot_subscriber_delete(sub), 0) }
        let subscriber = try XCTUnwrap(HandleRegistry.shared.lookup(UInt(bitPattern: sub), as: SubscriberObject.self))

        // Unsubscribed from A with its on_connected queued: dropped.
        var release = hold(aObject)
        XCTAssertEqual(ot_session_subscribe(a, sub), 0)
        // Connected in A: its on_connected is raised, and waits behind the held delivery queue.
        XCTAssertTrue(until { subscriber.subscriber.isConnected })
        XCTAssertEqual(ot_session_unsubscribe(a, sub), 0)
        release()
        flush(aObject)
        runPolled()
        XCTAssertEqual(seen.polled("connected"), [], "an on_connected came after ot_session_unsubscribe")

        // Moved from A to B with A's on_connected queued: only B's runs, on B's thread.
        release = hold(aObject)
        XCTAssertEqual(ot_session_subscribe(a, sub), 0)
        XCTAssertTrue(until { subscriber.subscriber.isConnected })
        XCTAssertEqual(ot_session_unsubscribe(a, sub), 0)
        XCTAssertEqual(ot_session_subscribe(b, sub), 0)
        release()
        XCTAssertTrue(until { subscriber.subscriber.isConnected })
        flush(bObject)
        flush(aObject)
        runPolled()
        XCTAssertEqual(seen.polled("connected"), [false], "A's on_connected ran after the subscriber left A (on B's thread if false)")
    }
}
