// The types of OTSession's public API that other targets define, re-exported so that `import OTSession` is all an
// outside package needs (the `OTSession` product holds this target only; bindings/swift/Sample proves it).

// Errors, time and logging.
@_exported import struct OTBase.OTError
@_exported import enum OTBase.OTErrorCode
@_exported import struct OTBase.Instant
@_exported import struct OTBase.MonotonicClock
@_exported import enum OTBase.Log
@_exported import enum OTBase.LogLevel

// Connections, streams and the signaling messages `SignalingClient` takes and gives.
@_exported import struct OTWire.ConnectionInfo
@_exported import struct OTWire.StreamInfo
@_exported import struct OTWire.PublishRequest
@_exported import enum OTWire.SessionRole
@_exported import enum OTWire.ClientMessage
@_exported import enum OTWire.ServerMessage
@_exported import struct OTWire.ConnectRequest
@_exported import struct OTWire.ConnectedInfo
@_exported import enum OTWire.MediaDirection
@_exported import enum OTWire.MediaQualityEvent
@_exported import enum OTWire.PublisherMediaState

// Frames, audio, transforms, devices and capturers the delegates and settings use.
@_exported import struct OTMedia.VideoFrame
@_exported import enum OTMedia.VideoRotation
@_exported import struct OTMedia.AudioFrame
@_exported import struct OTMedia.EncodedFrameInfo
@_exported import enum OTWire.MediaKind
@_exported import protocol OTMedia.FrameTransform
@_exported import struct OTMedia.IdentityFrameTransform
@_exported import protocol OTMedia.AudioDevice
@_exported import struct OTMedia.AudioDeviceSettings
@_exported import protocol OTMedia.AudioCaptureSink
@_exported import protocol OTMedia.AudioRenderSource
@_exported import class OTMedia.HeadlessAudioDevice
@_exported import class OTMedia.CustomAudioDevice
@_exported import protocol OTMedia.VideoCapturer
@_exported import protocol OTMedia.VideoFrameConsumer
@_exported import struct OTMedia.VideoCaptureSettings
@_exported import struct OTMedia.CapturedFrame
@_exported import enum OTMedia.PixelFormat
@_exported import class OTMedia.CallbackVideoCapturer
@_exported import enum OTMedia.TestPatternReader
@_exported import struct OTMedia.TestPatternStamp
@_exported import class OTMedia.IVFWriter
@_exported import class OTMedia.WAVWriter
@_exported import enum OTMedia.PNGWriter
