import CEpoll
import Dispatch
import Glibc
import OTBase
import Synchronization

/// One C object's right to callbacks (a session, publisher or subscriber). Closing it (`*_delete`) waits for its
/// callback in flight, unless called from inside that callback, and no callback of it runs after.
final class CallbackOwner: @unchecked Sendable {
    /// Guarded by `CallbackGate`'s lock.
    fileprivate var closed = false
    fileprivate var running: [pthread_t] = []

    /// Stops all further callbacks of this owner and waits for the one in flight on another thread, if any.
    func close() { CallbackGate.close(self) }
    var isClosed: Bool { CallbackGate.lock.withLock { closed } }
}

/// Runs callbacks for their owners: skips closed owners, records which thread runs which owner's callback so a close
/// can wait for it. One lock for the process: a callback costs two uncontended lock round trips.
enum CallbackGate {
    fileprivate static let lock = Condition()

    /// Runs `body` unless `owner` is closed.
    static func run(_ owner: CallbackOwner, _ body: () -> Void) {
        let me = pthread_self()
        let go = lock.withLock { () -> Bool in
            guard !owner.closed else { return false }
            owner.running.append(me)
            return true
        }
        guard go else { return }
        body()
        lock.withLock {
            if let i = owner.running.firstIndex(where: { pthread_equal($0, me) != 0 }) { owner.running.remove(at: i) }
            lock.broadcast()
        }
    }

    fileprivate static func close(_ owner: CallbackOwner) {
        let me = pthread_self()
        lock.withLock {
            owner.closed = true
            while owner.running.contains(where: { pthread_equal($0, me) == 0 }) { lock.wait() }
        }
    }
}

/// Where one session's C callbacks go (its own, its publisher's and its subscribers'), in the order they are posted:
/// a library thread of the session's own (`OT_CALLBACK_THREAD`), or the global poll queue that `ot_poll` runs on the
/// caller's thread (`OT_CALLBACK_POLL`).
///
/// The Swift session delivers its delegate messages, its publisher's and subscribers' among them, on the sink's
/// `deliveryQueue` (its `apiQueue`), which is tagged with the sink: a publisher's or subscriber's message goes to the
/// sink of the session that raised it (`sinkForCallbackRaisedNow`), even when the object has moved to another session
/// since (an `on_stream_destroyed` of session A queued before the publisher was published in B runs on A's sink).
final class CallbackSink: Sendable {
    private let queue: DispatchQueue?
    /// The session's `apiQueue` (see the type's comment).
    let deliveryQueue: DispatchQueue

    /// A library thread of its own.
    static func thread(_ label: String) -> CallbackSink { CallbackSink(queue: DispatchQueue(label: "otsession.callbacks.\(label)"), label: label) }
    /// The process-wide poll queue (each poll-mode session has a sink of its own, for its delivery queue).
    static func poll(_ label: String) -> CallbackSink { CallbackSink(queue: nil, label: label) }

    private init(queue: DispatchQueue?, label: String) {
        self.queue = queue
        deliveryQueue = DispatchQueue(label: "otsession.delivery.\(label)")
        deliveryQueue.setSpecific(key: Self.raisedIn, value: WeakSink(self))
    }

    var isPoll: Bool { queue == nil }

    /// Queues a callback of `owner`; it is skipped if the owner is closed before it runs.
    func post(_ owner: CallbackOwner, _ body: @escaping @Sendable () -> Void) {
        if let queue {
            queue.async { CallbackGate.run(owner, body) }
        } else {
            PollQueue.shared.post(owner, body)
        }
    }

    /// Waits until every callback posted so far has run or been skipped (thread sinks; for tests and shutdown).
    func drain() { queue?.sync {} }

    private final class WeakSink: @unchecked Sendable {
        weak var sink: CallbackSink?
        init(_ sink: CallbackSink) { self.sink = sink }
    }
    private static let raisedIn = DispatchSpecificKey<WeakSink>()

    /// Where a publisher's or subscriber's callback raised on this thread now goes. On a session's delivery queue: that
    /// session's sink, the one it was raised for (nil when that session is gone: the callback is dropped), whatever
    /// session the object is in by now. Elsewhere (a subscriber's media queue: frames, audio; a capturer's start and
    /// stop during publish or unpublish): `attached`, the sink of the session the object is in now, which is the one
    /// they belong to, since an object's media stops before it can start in another session.
    static func sinkForCallbackRaisedNow(attached: CallbackSink?) -> CallbackSink? {
        guard let raised = DispatchQueue.getSpecific(key: raisedIn) else { return attached }
        return raised.sink
    }
}

/// The callbacks of poll-mode sessions, run by `ot_poll` on the caller's thread, in the order posted. An eventfd is
/// readable while callbacks wait (`ot_poll_get_fd`), so a host loop can watch it.
final class PollQueue: @unchecked Sendable {
    static let shared = PollQueue()

    private let lock = Lock()
    private var items: [(CallbackOwner, @Sendable () -> Void)] = []
    /// Serializes pollers: one thread runs callbacks at a time, keeping each session's in order.
    private let pollers = Lock()
    private let pollingThread = Mutex<pthread_t?>(nil)
    /// Readable (non-zero) while `items` is not empty; -1 if the kernel refused one (then `ot_poll` still works).
    let fd: Int32

    private init() { fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }

    func post(_ owner: CallbackOwner, _ body: @escaping @Sendable () -> Void) {
        let wasEmpty = lock.withLock { () -> Bool in
            items.append((owner, body))
            return items.count == 1
        }
        if wasEmpty && fd >= 0 {
            var one: UInt64 = 1
            _ = write(fd, &one, 8)
        }
    }

    var pending: Int { lock.withLock { items.count } }

    /// True on the thread that is running poll callbacks now.
    var isPollingThread: Bool { pollingThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false } }

    /// Waits up to `timeoutMillis` (-1: no limit) for callbacks, then runs those waiting; returns how many ran.
    func run(timeoutMillis: Int32) -> Int {
        pollers.lock()
        defer { pollers.unlock() }
        if pending == 0 && timeoutMillis != 0 { waitReadable(timeoutMillis) }
        let batch = lock.withLock { () -> [(CallbackOwner, @Sendable () -> Void)] in
            defer { items = [] }
            if fd >= 0 {
                var n: UInt64 = 0
                _ = read(fd, &n, 8)
            }
            return items
        }
        pollingThread.withLock { $0 = pthread_self() }
        defer { pollingThread.withLock { $0 = nil } }
        for (owner, body) in batch { CallbackGate.run(owner, body) }
        return batch.count
    }

    private func waitReadable(_ timeoutMillis: Int32) {
        guard fd >= 0 else {
            // No eventfd: wait by sleeping in small steps.
            let end = timeoutMillis < 0 ? Int64.max : MonotonicClock.now().micros + Int64(timeoutMillis) * 1000
            while pending == 0 && MonotonicClock.now().micros < end { usleep(1000) }
            return
        }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = Glibc.poll(&p, 1, timeoutMillis)
    }
}
