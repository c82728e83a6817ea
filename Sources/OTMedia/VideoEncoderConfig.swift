import Glibc

/// Video encoder settings (libvpx); defaults follow libwebrtc's realtime configuration.
public struct VideoEncoderConfig: Sendable {
    public var width: Int
    public var height: Int
    /// Target bitrate in kbit/s (CBR).
    public var bitrateKbps: Int
    /// Expected frame rate.
    public var framerate: Int
    /// libvpx speed; nil picks libwebrtc's on x86: VP8 -6 (negative = realtime speed level; more negative is faster),
    /// VP9 5 below CIF, 7 from CIF, 9 from 1080p.
    public var cpuUsed: Int?
    /// Encoder threads; nil picks 1 at VGA or below, or on 2 cores or fewer, like libwebrtc.
    public var threads: Int?
    /// Longest distance between keyframes in frames.
    public var keyframeInterval: Int
    /// Reset entropy state per frame so a lost frame does not corrupt the next ones' parsing.
    public var errorResilient: Bool
    /// Temporal layers: 1 (none), 2 (period 2) or 3 (period 4, pattern 0-2-1-2); VP9 has 1 only.
    public var temporalLayers: Int
    /// Buffer fullness (percent) below which the encoder may drop frames; 0 never drops.
    public var frameDropThreshold: Int

    public init(width: Int, height: Int, bitrateKbps: Int = 500, framerate: Int = 30, cpuUsed: Int? = nil,
                threads: Int? = nil, keyframeInterval: Int = 3000, errorResilient: Bool = true,
                temporalLayers: Int = 1, frameDropThreshold: Int = 30) {
        self.width = width; self.height = height; self.bitrateKbps = bitrateKbps; self.framerate = framerate
        self.cpuUsed = cpuUsed; self.threads = threads; self.keyframeInterval = keyframeInterval
        self.errorResilient = errorResilient; self.temporalLayers = temporalLayers
        self.frameDropThreshold = frameDropThreshold
    }

    /// The thread count libwebrtc would use for this size on this machine.
    public var effectiveThreads: Int {
        if let threads { return max(1, threads) }
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        if width * height <= 640 * 480 || cores <= 2 { return 1 }
        return width * height >= 1920 * 1080 && cores > 4 ? 4 : 2
    }
}
