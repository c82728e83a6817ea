import COTABI
import OTBase
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
        /// Handles the library lends and takes back itself (borrowed in a callback, a session's own connection):
        /// `remove` (the `*_delete` functions) refuses them.
        var lent: Set<UInt> = []
    }
    private let state = Mutex(State())

    /// Registers an object and returns its new handle bits (never 0, never reused); a `lent` one is taken back with
    /// `takeBack`, never by the caller's `*_delete`.
    func insert(_ object: any AnyObject & Sendable, lent: Bool = false) -> UInt {
        state.withLock { s in
            s.next += 16
            s.objects[s.next] = object
            if lent { s.lent.insert(s.next) }
            return s.next
        }
    }

    /// Unregisters a handle `insert(_:lent:)` lent.
    func takeBack(_ bits: UInt) {
        state.withLock { s in
            if s.lent.remove(bits) != nil { s.objects[bits] = nil }
        }
    }

    /// The live object of type `T` behind `bits`, or nil when the handle is unknown, deleted or of another kind.
    func lookup<T: AnyObject & Sendable>(_ bits: UInt, as: T.Type) -> T? {
        state.withLock { $0.objects[bits] as? T }
    }

    /// Unregisters and returns the object of type `T`; nil when it was not live (so a second delete fails cleanly) or
    /// is lent.
    func remove<T: AnyObject & Sendable>(_ bits: UInt, as: T.Type) -> T? {
        state.withLock { s in
            guard s.objects[bits] is T, !s.lent.contains(bits) else { return nil }
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

/// The live object of type `T` behind a C handle, or the status that says why there is none
/// (NULL: OT_ERR_INVALID_PARAM; unknown, deleted or of another type: OT_ERR_INVALID_HANDLE).
func object<P, T: AnyObject & Sendable>(_ p: UnsafePointer<P>?, as: T.Type) -> (object: T?, status: ot_status) {
    guard let p else { return (nil, Status.invalidParam) }
    guard let o = HandleRegistry.shared.lookup(UInt(bitPattern: p), as: T.self) else { return (nil, Status.invalidHandle) }
    return (o, Status.ok)
}

/// Runs `body` with the live object behind a C handle; thrown OTErrors become their codes (their messages logged).
func withObject<P, T: AnyObject & Sendable>(_ p: UnsafePointer<P>?, as: T.Type, _ body: (T) throws -> ot_status) -> ot_status {
    let (found, status) = object(p, as: T.self)
    guard let o = found else { return status }
    do { return try body(o) } catch let e as OTError { return Status.of(e) } catch { return Status.internalError }
}

/// Unregisters the object behind a C handle for `*_delete`: the object, or the status to return.
func removeObject<P, T: AnyObject & Sendable>(_ p: UnsafeMutablePointer<P>?, as: T.Type) -> (object: T?, status: ot_status) {
    guard let p else { return (nil, Status.invalidParam) }
    guard let o = HandleRegistry.shared.remove(UInt(bitPattern: p), as: T.self) else { return (nil, Status.invalidHandle) }
    return (o, Status.ok)
}

/// `*_delete` of an object that must be shut down: unregisters it (so no call reaches it any more), then runs
/// `shutDown` on it; the status of the removal.
func deleteObject<P, T: AnyObject & Sendable>(_ p: UnsafeMutablePointer<P>?, as: T.Type, shutDown: (T) -> Void) -> ot_status {
    let (found, status) = removeObject(p, as: T.self)
    if let found { shutDown(found) }
    return status
}
