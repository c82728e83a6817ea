import COTShims
import CVPX
import OTBase
import OTWire

/// A decoder on libvpx (VP8 or VP9; one thread by default). Decoded pictures are copied into a caller-owned
/// `VideoFrame` whose planes are reused between calls.
public class LibvpxDecoder: VideoDecoder {
    public let codec: LibvpxCodec
    public var format: any RTPPayloadFormat { codec.format }
    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>

    /// Opens a decoder; throws `CodecError` if libvpx fails.
    public init(_ codec: LibvpxCodec, threads: Int = 1) throws {
        self.codec = codec
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        var cfg = vpx_codec_dec_cfg_t(threads: UInt32(max(1, threads)), w: 0, h: 0)
        let r = otshim_vpx_dec_init(ctx, codec.decoderInterface, &cfg, 0)
        guard r == VPX_CODEC_OK else {
            ctx.deallocate()
            throw LibvpxEncoder.error(r, nil, "dec_init")
        }
    }

    deinit {
        vpx_codec_destroy(ctx)
        ctx.deallocate()
    }

    /// Decodes one compressed frame and lends each decoded picture to `picture` without copying
    /// (the planes belong to libvpx and are valid only during the call). Returns false when libvpx produced
    /// no picture. Throws `CodecError` for a bitstream libvpx rejects or reports as corrupt.
    @discardableResult
    public func decode(_ data: UnsafeRawBufferPointer, timestampMicros: Int64 = 0,
                       picture: (I420PlanesView) throws -> Void) throws -> Bool {
        guard let base = data.baseAddress, data.count > 0, data.count <= Int(UInt32.max) else {
            throw CodecError(.vpx, code: -1, "empty \(format.name) frame")
        }
        let r = vpx_codec_decode(ctx, base.assumingMemoryBound(to: UInt8.self), UInt32(data.count), nil, 0)
        guard r == VPX_CODEC_OK else { throw LibvpxEncoder.error(r, ctx, "decode") }
        var corrupted: Int32 = 0
        if otshim_vpx_frame_corrupted(ctx, &corrupted) == VPX_CODEC_OK, corrupted != 0 {
            throw CodecError(.vpx, code: -2, "decoded \(format.name) frame is corrupted")
        }
        var iter: vpx_codec_iter_t?
        var produced = false
        while let img = vpx_codec_get_frame(ctx, &iter) {
            let w = Int(img.pointee.d_w), h = Int(img.pointee.d_h)
            guard img.pointee.fmt == VPX_IMG_FMT_I420, w > 0, h > 0,
                  let y = img.pointee.planes.0, let u = img.pointee.planes.1, let v = img.pointee.planes.2 else {
                throw CodecError(.vpx, code: -3, "unexpected decoder output format")
            }
            let c = VideoFrame.chromaSize(width: w, height: h)
            let sy = Int(img.pointee.stride.0), su = Int(img.pointee.stride.1), sv = Int(img.pointee.stride.2)
            try picture(I420PlanesView(width: w, height: h,
                                       y: UnsafeBufferPointer(start: y, count: sy * (h - 1) + w), strideY: sy,
                                       u: UnsafeBufferPointer(start: u, count: su * (c.height - 1) + c.width), strideU: su,
                                       v: UnsafeBufferPointer(start: v, count: sv * (c.height - 1) + c.width), strideV: sv,
                                       timestampMicros: timestampMicros))
            produced = true
        }
        return produced
    }

    /// Decodes one compressed frame into `frame` (resized as needed; its planes are reused). Returns false when
    /// libvpx produced no picture. Throws `CodecError` for a bitstream libvpx rejects or reports as corrupt,
    /// so no damaged picture is shown.
    @discardableResult
    public func decode(_ data: UnsafeRawBufferPointer, timestampMicros: Int64 = 0, into frame: inout VideoFrame) throws -> Bool {
        try decode(data, timestampMicros: timestampMicros) { try $0.copy(into: &frame) }
    }

    /// Decodes a frame held in an array slice, lending the picture to `picture`.
    @discardableResult
    public func decode(_ data: ArraySlice<UInt8>, timestampMicros: Int64 = 0,
                       picture: (I420PlanesView) throws -> Void) throws -> Bool {
        try data.withUnsafeBytes { try decode($0, timestampMicros: timestampMicros, picture: picture) }
    }
}

/// VP8 on libvpx.
public final class VP8Decoder: LibvpxDecoder {
    public init(threads: Int = 1) throws { try super.init(.vp8, threads: threads) }
}

/// VP9 (profile 0) on libvpx.
public final class VP9Decoder: LibvpxDecoder {
    public init(threads: Int = 1) throws { try super.init(.vp9, threads: threads) }
}
