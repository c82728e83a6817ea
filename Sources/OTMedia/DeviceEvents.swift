import Dispatch
import OTBase
import Synchronization

/// The kinds of device the library captures from and plays to. Raw values equal the C ABI's `ot_device_kind`.
public enum DeviceKind: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// An audio capture device (a PulseAudio source).
    case microphone = 1
    /// An audio playout device (a PulseAudio sink).
    case speaker = 2
    /// A video capture device (a V4L2 node).
    case camera = 3

    public var description: String {
        switch self {
        case .microphone: "microphone"
        case .speaker: "speaker"
        case .camera: "camera"
        }
    }
}

/// A device failed while the library used it: it could not be opened (`deviceUnavailable`: no sound server, no
/// such device) or it vanished (`deviceLost`: unplugged, its module unloaded, the server gone). The library carries
/// on without it: silence is captured, playout is discarded, the camera's stream shows black frames.
public struct DeviceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var kind: DeviceKind
    /// The device's name or path; empty for "the system default".
    public var device: String
    public var error: OTError

    public init(kind: DeviceKind, device: String, error: OTError) {
        self.kind = kind; self.device = device; self.error = error
    }

    public var description: String { "\(kind) \(device.isEmpty ? "(default)" : device): \(error)" }
}

/// A device that reports its failures to whoever observes it.
public protocol DeviceErrorReporting: AnyObject, Sendable {
    /// Calls `handler` for every failure, on a library thread, one at a time, until the observation is cancelled
    /// or released.
    func observeErrors(_ handler: @escaping @Sendable (DeviceError) -> Void) -> DeviceObservation
}

/// Keeps an observer registered; `cancel()` (or releasing it) unregisters it.
public final class DeviceObservation: Sendable {
    private let cancelAction: Mutex<(@Sendable () -> Void)?>
    init(_ cancel: @escaping @Sendable () -> Void) { cancelAction = Mutex(cancel) }
    /// Stops the notifications (a failure already being delivered may still arrive).
    public func cancel() { cancelAction.withLock { a in defer { a = nil }; return a }?() }
    deinit { cancel() }
}

/// The observers of one device and the serial queue their handlers run on (never a device's own IO thread, so a
/// handler may call back into the device).
final class DeviceErrorObservers: Sendable {
    private let handlers = Mutex<[Int: @Sendable (DeviceError) -> Void]>([:])
    private let nextId = Atomic<Int>(0)
    private let queue = DispatchQueue(label: "ot.device.events")

    func observe(_ handler: @escaping @Sendable (DeviceError) -> Void) -> DeviceObservation {
        let id = nextId.add(1, ordering: .relaxed).newValue
        handlers.withLock { $0[id] = handler }
        return DeviceObservation { [weak self] in _ = self?.handlers.withLock { $0.removeValue(forKey: id) } }
    }

    /// Logs the failure and tells every observer, asynchronously.
    func report(_ error: DeviceError) {
        Log.warn("device", "\(error)")
        queue.async { [self] in
            for handler in handlers.withLock({ Array($0.values) }) { handler(error) }
        }
    }
}
