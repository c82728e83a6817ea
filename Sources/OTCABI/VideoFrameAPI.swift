import COTABI
import OTBase
import OTMedia

/// The object behind an `ot_video_frame *`: an I420 frame whose planes live as long as the handle.
final class VideoFrameObject: @unchecked Sendable {
    let frame: VideoFrame
    init(_ frame: VideoFrame) { self.frame = frame }
}

/// Fills `info` with the frame's planes, strides, size, timestamp and rotation (pointers owned by the frame handle).
@c(ot_video_frame_get_info) public func ot_video_frame_get_info(_ frame: UnsafePointer<ot_video_frame>?,
                                                              _ info: UnsafeMutablePointer<ot_video_frame_info>?) -> ot_status {
    withObject(frame, as: VideoFrameObject.self) { o in
        guard let info else { return Status.invalidParam }
        let f = o.frame
        // The arrays are immutable for the object's life, so their storage stays where it is.
        let y = f.y.withUnsafeBufferPointer { $0.baseAddress }, u = f.u.withUnsafeBufferPointer { $0.baseAddress }
        let v = f.v.withUnsafeBufferPointer { $0.baseAddress }
        info.pointee = ot_video_frame_info(y: y, u: u, v: v, stride_y: Int32(clamping: f.strideY), stride_u: Int32(clamping: f.strideU),
                                           stride_v: Int32(clamping: f.strideV), width: Int32(clamping: f.width),
                                           height: Int32(clamping: f.height), timestamp_us: f.timestampMicros, rotation: f.rotation.rawValue)
        return Status.ok
    }
}

/// A copy of a (borrowed) frame handle that stays valid until ot_video_frame_delete; NULL for a bad handle.
@c(ot_video_frame_copy) public func ot_video_frame_copy(_ frame: UnsafePointer<ot_video_frame>?) -> UnsafeMutablePointer<ot_video_frame>? {
    guard let o = object(frame, as: VideoFrameObject.self).object else { return nil }
    return Handle.pointer(HandleRegistry.shared.insert(VideoFrameObject(o.frame)), as: ot_video_frame.self)
}

/// Releases a frame handle made by ot_video_frame_copy; OT_ERR_INVALID_HANDLE for a borrowed one (on_render_frame's).
@c(ot_video_frame_delete) public func ot_video_frame_delete(_ frame: UnsafeMutablePointer<ot_video_frame>?) -> ot_status {
    removeObject(frame, as: VideoFrameObject.self).status
}

/// Reads the frame number and capture time (microseconds, CLOCK_MONOTONIC of the sender) that the built-in
/// test pattern stamps into every frame, after it went through the codec. OT_ERR_INVALID_PARAM when the
/// frame carries no readable stamp (not the test pattern, or damaged).
@c(ot_video_frame_read_test_pattern) public func ot_video_frame_read_test_pattern(_ frame: UnsafePointer<ot_video_frame>?,
                                                                                _ frame_number: UnsafeMutablePointer<UInt32>?,
                                                                                _ capture_time_us: UnsafeMutablePointer<Int64>?) -> ot_status {
    withObject(frame, as: VideoFrameObject.self) { o in
        guard let frame_number, let capture_time_us else { return Status.invalidParam }
        guard let stamp = TestPatternReader.read(o.frame) else { return Status.invalidParam }
        frame_number.pointee = stamp.frameNumber
        capture_time_us.pointee = stamp.timestampMicros
        return Status.ok
    }
}

/// The monotonic clock the test pattern stamps capture times with, in microseconds (for capture-to-render latency).
@c(ot_monotonic_time_us) public func ot_monotonic_time_us() -> Int64 { MonotonicClock.now().micros }
