import COTShims
import Glibc

/// Starting the library's own long-lived threads (the IO loops, the camera) on pthreads directly.
public enum OSThread {
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }

    /// Starts a detached thread running `body`; `name` (at most 15 bytes are kept) is what `top -H` and
    /// /proc/<pid>/task/<tid>/comm show. Returns false when the system refuses a new thread.
    @discardableResult
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { arg in
            guard let arg else { return nil }
            let start = Unmanaged<Start>.fromOpaque(arg).takeRetainedValue()
            _ = otshim_set_thread_name(start.name)
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            return false
        }
        pthread_detach(tid)
        return true
    }
}
