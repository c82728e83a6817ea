import COTABI
import OTBase
import OTMedia
import OTSession

/// The object behind an `ot_device_list *`: the devices of one kind, with C strings that live as long as it.
final class DeviceListObject: Sendable {
    struct Entry: Sendable {
        let id: OwnedCString, name: OwnedCString
        let isDefault: Bool, isMonitor: Bool
        let modes: [CameraMode]
    }
    let kind: DeviceKind
    let entries: [Entry]

    init(kind: DeviceKind) throws {
        self.kind = kind
        switch kind {
        case .camera:
            entries = V4L2Cameras.list().enumerated().map { i, c in
                Entry(id: OwnedCString(c.path), name: OwnedCString(c.name), isDefault: i == 0, isMonitor: false, modes: c.modes)
            }
        case .microphone, .speaker:
            let devices = kind == .microphone ? try PulseAudioDevice.sources() : try PulseAudioDevice.sinks()
            entries = devices.map {
                Entry(id: OwnedCString($0.name), name: OwnedCString($0.description), isDefault: $0.isDefault, isMonitor: $0.isMonitor, modes: [])
            }
        }
    }
}

private func withDeviceList(_ p: UnsafePointer<ot_device_list>?, _ body: (DeviceListObject) throws -> ot_status) -> ot_status {
    withObject(p, as: DeviceListObject.self, body)
}

/// Lists the devices of one kind (an ot_device_kind) into a new list, released with ot_device_list_delete: the
/// cameras under /dev, or the PulseAudio sources (microphones) or sinks (speakers) of the sound server libpulse
/// finds ($PULSE_SERVER, or the user's). OT_ERR_DEVICE_UNAVAILABLE for audio kinds when no sound server answers;
/// no camera is an empty list.
@c(ot_device_list_new) public func ot_device_list_new(_ kind: Int32, _ list: UnsafeMutablePointer<UnsafeMutablePointer<ot_device_list>?>?) -> ot_status {
    guard let list, let k = DeviceKind(rawValue: kind) else { return Status.invalidParam }
    list.pointee = nil
    return Status.catching {
        let bits = HandleRegistry.shared.insert(try DeviceListObject(kind: k))
        list.pointee = Handle.pointer(bits, as: ot_device_list.self)
    }
}

/// How many devices the list holds.
@c(ot_device_list_count) public func ot_device_list_count(_ list: UnsafePointer<ot_device_list>?,
                                                          _ count: UnsafeMutablePointer<UInt>?) -> ot_status {
    withDeviceList(list) { l in
        guard let count else { return Status.invalidParam }
        count.pointee = UInt(l.entries.count)
        return Status.ok
    }
}

/// Fills `info` with device `index` (0 ..< count); its strings belong to the list. OT_ERR_INVALID_PARAM out of range.
@c(ot_device_list_get) public func ot_device_list_get(_ list: UnsafePointer<ot_device_list>?, _ index: UInt,
                                                      _ info: UnsafeMutablePointer<ot_device_info>?) -> ot_status {
    withDeviceList(list) { l in
        guard let info, index < UInt(l.entries.count) else { return Status.invalidParam }
        let e = l.entries[Int(index)]
        info.pointee = ot_device_info(id: e.id.pointer, name: e.name.pointer, kind: l.kind.rawValue, is_default: CArg.bool(e.isDefault),
                                      is_monitor: CArg.bool(e.isMonitor), mode_count: e.modes.count)
        return Status.ok
    }
}

/// Fills `info` with capture mode `mode` (0 ..< mode_count) of camera `index`. OT_ERR_INVALID_PARAM out of range.
@c(ot_device_list_get_camera_mode) public func ot_device_list_get_camera_mode(_ list: UnsafePointer<ot_device_list>?, _ index: UInt,
                                                                              _ mode: UInt, _ info: UnsafeMutablePointer<ot_camera_mode>?) -> ot_status {
    withDeviceList(list) { l in
        guard let info, index < UInt(l.entries.count), mode < UInt(l.entries[Int(index)].modes.count) else { return Status.invalidParam }
        let m = l.entries[Int(index)].modes[Int(mode)]
        info.pointee = ot_camera_mode(pixel_format: m.format.rawValue, width: Int32(clamping: m.width), height: Int32(clamping: m.height),
                                     max_fps: m.frameRates.max() ?? 0)
        return Status.ok
    }
}

/// Releases a device list (and the strings it handed out).
@c(ot_device_list_delete) public func ot_device_list_delete(_ list: UnsafeMutablePointer<ot_device_list>?) -> ot_status {
    removeObject(list, as: DeviceListObject.self).status
}

/// Plays the session's subscribers' audio on a PulseAudio sink (`sink`: a name from ot_device_list_new with
/// OT_DEVICE_SPEAKER; NULL: the system default, followed when it changes) instead of the headless device that
/// discards it. Call before subscribing: OT_ERR_ILLEGAL_STATE while subscribers play. Failures (no sound server, the
/// sink lost) come to the session's on_device_error and playout goes on, discarded.
@c(ot_session_set_speaker) public func ot_session_set_speaker(_ session: UnsafeMutablePointer<ot_session>?,
                                                              _ sink: UnsafePointer<CChar>?) -> ot_status {
    withSession(session) { s in
        if sink != nil, CArg.string(sink) == nil { return Status.invalidParam }
        try s.session.setAudioDevice(try PulseAudioDevice(sink: CArg.string(sink)))
        return Status.ok
    }
}
