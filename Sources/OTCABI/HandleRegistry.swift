import Synchronization

/// Every live object the C ABI has handed out, keyed by its handle's bits.
///
/// Handles are not addresses: they are numbers from a counter that never
/// repeats, so a deleted handle can never alias a newer object. Each entry keeps
/// its kind, so a publisher handle passed where a session belongs is refused.
final class HandleRegistry: Sendable {
    static let shared = HandleRegistry()

    private struct State {
        var next: UInt = 0x10_000
        var objects: [UInt: any AnyObject & Sendable] = [:]
    }
    private let state = Mutex(State())

    /// Registers an object and returns its new handle bits (never 0, never reused).
    func insert(_ object: any AnyObject & Sendable) -> UInt {
        state.withLock { s in
            s.next += 16
            s.objects[s.next] = object
            return s.next
        }
    }

    /// The live object of type `T` behind `bits`, or nil when the handle is unknown, deleted or of another kind.
    func lookup<T: AnyObject & Sendable>(_ bits: UInt, as: T.Type) -> T? {
        state.withLock { $0.objects[bits] as? T }
    }

    /// Unregisters and returns the object of type `T`; nil when it was not live (so a second delete fails cleanly).
    func remove<T: AnyObject & Sendable>(_ bits: UInt, as: T.Type) -> T? {
        state.withLock { s in
            guard s.objects[bits] is T else { return nil }
            return s.objects.removeValue(forKey: bits) as? T
        }
    }

    /// How many handles are live (for leak checks).
    var count: Int { state.withLock { $0.objects.count } }
}

/// Turns typed C handle pointers into registry keys and back.
enum Handle {
    static func bits<T>(_ p: UnsafeMutablePointer<T>?) -> UInt? {
        guard let p else { return nil }
        return UInt(bitPattern: p)
    }
    static func pointer<T>(_ bits: UInt, as: T.Type) -> UnsafeMutablePointer<T>? {
        UnsafeMutablePointer<T>(bitPattern: bits)
    }
}
