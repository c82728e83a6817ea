/// Where a device fetches audio to play (the mixer of the subscribers). Called on the device's thread.
public protocol AudioRenderSource: AnyObject, Sendable {
    /// Fills `buffer` (interleaved, in the device's render settings) and returns how many samples are
    /// real audio; the rest of the buffer is left silent.
    func renderAudio(into buffer: UnsafeMutableBufferPointer<Int16>, settings: AudioDeviceSettings) -> Int
}
