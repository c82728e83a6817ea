import Dispatch
import Synchronization

/// Delivers one object's callbacks in order on a library thread.
///
/// - Callbacks never run on the caller's thread or the network thread.
/// - `close()` waits for the callback in flight (unless it is called from that
///   callback) and no callback runs after it returns.
final class CallbackQueue: Sendable {
    private let queue: DispatchQueue
    private let key = DispatchSpecificKey<ObjectIdentifier>()
    private let open = Atomic<Bool>(true)

    init(label: String) {
        queue = DispatchQueue(label: "otsession.callbacks.\(label)")
        queue.setSpecific(key: key, value: ObjectIdentifier(self))
    }

    /// True on this queue's thread, i.e. inside one of this object's callbacks.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == ObjectIdentifier(self) }

    /// Queues a callback; it is skipped if the queue is closed before it runs.
    func post(_ body: @escaping @Sendable () -> Void) {
        guard open.load(ordering: .acquiring) else { return }
        queue.async { [self] in
            guard open.load(ordering: .acquiring) else { return }
            body()
        }
    }

    /// Stops all further callbacks and waits for the one in flight, if any.
    /// Safe to call from inside a callback of this queue (it then does not wait on itself).
    func close() {
        open.store(false, ordering: .releasing)
        if !isCurrent { queue.sync {} }
    }

    /// Waits until every callback posted so far has run (for tests and orderly shutdown).
    func drain() { if !isCurrent { queue.sync {} } }
}
