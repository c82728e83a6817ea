import CPulse
import Dispatch
import OTBase

/// One connection to a PulseAudio server (or PipeWire's pipewire-pulse): a threaded main loop and a context in
/// the READY state. libpulse calls back on the main loop's thread with the loop's lock held; everything else
/// that touches the context or its streams takes that lock (`withLock`). It may be released on any thread.
final class PulseContext: @unchecked Sendable {
    let mainloop: OpaquePointer
    let context: OpaquePointer
    /// How long connecting and other round trips to the server may take.
    static let timeout: Duration = .seconds(3)
    /// Called on libpulse's thread (lock held) when the connection fails after it was up.
    private let onFailure: (@Sendable () -> Void)?
    private var wasReady = false

    /// Connects to `server` (nil: libpulse's default, from $PULSE_SERVER, client.conf or the user's runtime
    /// directory), never spawning a server. Throws `deviceUnavailable` when no server answers in time.
    init(server: String?, name: String = "libotsession", onFailure: (@Sendable () -> Void)? = nil) throws {
        guard let ml = pa_threaded_mainloop_new() else { throw OTError(.deviceUnavailable, "libpulse could not make a main loop") }
        guard let api = pa_threaded_mainloop_get_api(ml), let ctx = pa_context_new(api, name) else {
            pa_threaded_mainloop_free(ml)
            throw OTError(.deviceUnavailable, "libpulse could not make a context")
        }
        mainloop = ml
        context = ctx
        self.onFailure = onFailure
        // Unretained: the callback is cleared before the context is released (close()).
        pa_context_set_state_callback(ctx, { ctx, ud in
            guard let ctx, let ud else { return }
            let me = Unmanaged<PulseContext>.fromOpaque(ud).takeUnretainedValue()
            pa_threaded_mainloop_signal(me.mainloop, 0)
            switch pa_context_get_state(ctx) {
            case PA_CONTEXT_READY: me.wasReady = true
            case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED: if me.wasReady { me.onFailure?() }
            default: break
            }
        }, Unmanaged.passUnretained(self).toOpaque())
        guard pa_threaded_mainloop_start(ml) >= 0 else {
            pa_context_set_state_callback(ctx, nil, nil)
            pa_context_unref(ctx)
            pa_threaded_mainloop_free(ml)
            closed = true
            throw OTError(.deviceUnavailable, "libpulse could not start its thread")
        }
        let where_ = server ?? "the default server"
        let ready: Result<Void, OTError> = withLock {
            guard pa_context_connect(ctx, server, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else {
                return .failure(OTError(.deviceUnavailable, "no sound server at \(where_): \(errorText)"))
            }
            let outcome = wait(until: {
                let st = pa_context_get_state(ctx)
                return st == PA_CONTEXT_READY || st == PA_CONTEXT_FAILED || st == PA_CONTEXT_TERMINATED
            })
            guard outcome, pa_context_get_state(ctx) == PA_CONTEXT_READY else {
                return .failure(OTError(.deviceUnavailable, "no sound server at \(where_): \(outcome ? errorText : "timed out")"))
            }
            return .success(())
        }
        if case .failure(let e) = ready {
            close()
            throw e
        }
    }

    deinit { close() }

    private var closed = false
    /// Disconnects, then stops the loop's thread and frees the loop (idempotent). From the loop's own thread (the last
    /// reference dropped inside a callback) the stopping is handed to another thread: a loop cannot stop itself.
    private func close() {
        guard !closed else { return }
        closed = true
        withLock {
            pa_context_set_state_callback(context, nil, nil)
            pa_context_disconnect(context)
        }
        let loop = Loop(mainloop: mainloop, context: context)
        if onLoopThread { DispatchQueue.global().async { loop.free() } } else { loop.free() }
    }

    /// The loop and context to free once the loop's thread has stopped.
    private struct Loop: @unchecked Sendable {
        let mainloop: OpaquePointer, context: OpaquePointer
        func free() {
            pa_threaded_mainloop_stop(mainloop)
            pa_context_unref(context)
            pa_threaded_mainloop_free(mainloop)
        }
    }

    /// Whether the caller is libpulse's loop thread (in a callback, so holding the loop's lock).
    private var onLoopThread: Bool { pa_threaded_mainloop_in_thread(mainloop) != 0 }

    /// Whether the connection is still up.
    var isReady: Bool { withLock { pa_context_get_state(context) == PA_CONTEXT_READY } }

    /// libpulse's text for the context's last error (call with the lock held).
    var errorText: String { String(cString: pa_strerror(pa_context_errno(context))) }

    /// Runs `body` holding the loop's lock: taking it, or inline on the loop's thread, where libpulse runs callbacks
    /// with the lock held (and aborts when it is taken again).
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        if onLoopThread { return try body() }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body()
    }

    /// With the lock held: waits on the loop's signal until `done` holds, the context fails, or `timeout` passes
    /// (a timer event on the loop wakes the wait). Returns whether `done` held.
    func wait(until done: () -> Bool) -> Bool {
        let deadline = MonotonicClock.now() + Self.timeout
        let timer = pa_context_rttime_new(context, pa_rtclock_now() + pa_usec_t(Self.timeout.microseconds) + 1000, { _, _, _, ml in
            if let ml { pa_threaded_mainloop_signal(OpaquePointer(ml), 0) }
        }, UnsafeMutableRawPointer(mainloop))
        defer { if let timer { pa_threaded_mainloop_get_api(mainloop)?.pointee.time_free(timer) } }
        while !done() {
            let state = pa_context_get_state(context)
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED || MonotonicClock.now() >= deadline { return done() }
            pa_threaded_mainloop_wait(mainloop)
        }
        return true
    }

    /// With the lock held: waits for an operation whose callback signals the loop, then releases it.
    /// Returns false when it did not complete (the context failed or the server did not answer in time).
    @discardableResult
    func finish(_ operation: OpaquePointer?) -> Bool {
        guard let operation else { return false }
        defer { pa_operation_unref(operation) }
        return wait { pa_operation_get_state(operation) != PA_OPERATION_RUNNING }
            && pa_operation_get_state(operation) == PA_OPERATION_DONE
    }
}

/// A PulseAudio source or sink as enumeration reports it.
public struct AudioDeviceInfo: Sendable, Equatable {
    /// PulseAudio's name for the device: what `PulseAudioDevice(source:sink:)` takes.
    public var name: String
    /// The human-readable description ("Built-in Audio Analog Stereo").
    public var description: String
    /// Whether it is the server's default source or sink now.
    public var isDefault: Bool
    /// For a source: whether it is the monitor of a sink (what that sink plays).
    public var isMonitor: Bool

    public init(name: String, description: String, isDefault: Bool, isMonitor: Bool) {
        self.name = name; self.description = description; self.isDefault = isDefault; self.isMonitor = isMonitor
    }
}

extension PulseContext {
    /// The server's default sink and source names (lock held).
    func defaults() -> (sink: String?, source: String?) {
        final class Box { var sink: String?; var source: String?; var ml: OpaquePointer; init(_ ml: OpaquePointer) { self.ml = ml } }
        let box = Box(mainloop)
        let ud = Unmanaged.passUnretained(box).toOpaque()
        finish(pa_context_get_server_info(context, { _, info, ud in
            guard let ud else { return }
            let box = Unmanaged<Box>.fromOpaque(ud).takeUnretainedValue()
            if let info {
                box.sink = info.pointee.default_sink_name.map { String(cString: $0) }
                box.source = info.pointee.default_source_name.map { String(cString: $0) }
            }
            pa_threaded_mainloop_signal(box.ml, 0)
        }, ud))
        return withExtendedLifetime(box) { (box.sink, box.source) }
    }

    /// Every source or sink the server has, in its order.
    func list(_ kind: DeviceKind) throws -> [AudioDeviceInfo] {
        final class Box { var items: [AudioDeviceInfo] = []; var ml: OpaquePointer; init(_ ml: OpaquePointer) { self.ml = ml } }
        return try withLock {
            let (defaultSink, defaultSource) = defaults()
            let box = Box(mainloop)
            let ud = Unmanaged.passUnretained(box).toOpaque()
            let op: OpaquePointer?
            if kind == .speaker {
                op = pa_context_get_sink_info_list(context, { _, info, eol, ud in
                    guard let ud else { return }
                    let box = Unmanaged<Box>.fromOpaque(ud).takeUnretainedValue()
                    if eol == 0, let i = info?.pointee, let name = i.name {
                        box.items.append(AudioDeviceInfo(name: String(cString: name), description: i.description.map { String(cString: $0) } ?? "",
                                                         isDefault: false, isMonitor: false))
                    }
                    if eol != 0 { pa_threaded_mainloop_signal(box.ml, 0) }
                }, ud)
            } else {
                op = pa_context_get_source_info_list(context, { _, info, eol, ud in
                    guard let ud else { return }
                    let box = Unmanaged<Box>.fromOpaque(ud).takeUnretainedValue()
                    if eol == 0, let i = info?.pointee, let name = i.name {
                        box.items.append(AudioDeviceInfo(name: String(cString: name), description: i.description.map { String(cString: $0) } ?? "",
                                                         isDefault: false, isMonitor: i.monitor_of_sink != UInt32.max))
                    }
                    if eol != 0 { pa_threaded_mainloop_signal(box.ml, 0) }
                }, ud)
            }
            guard finish(op) else { throw OTError(.deviceUnavailable, "the sound server did not list its devices: \(errorText)") }
            let wanted = kind == .speaker ? defaultSink : defaultSource
            return withExtendedLifetime(box) { box.items.map { var d = $0; d.isDefault = d.name == wanted; return d } }
        }
    }
}
