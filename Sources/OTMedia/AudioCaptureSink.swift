/// Where a device delivers captured audio (the publisher's side). Called on the device's thread.
public protocol AudioCaptureSink: AnyObject, Sendable {
    /// Interleaved int16 samples just captured, in the device's capture settings.
    func audioCaptured(_ samples: UnsafeBufferPointer<Int16>, settings: AudioDeviceSettings)
}
