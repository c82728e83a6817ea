import OTBase
import OTMedia


/// Packed RGB layouts capturers hand over, named by byte order in memory
/// (`.bgra` is B,G,R,A at increasing addresses: what libyuv and Windows call ARGB).
public enum PackedRGBFormat: Sendable, CaseIterable {
    case rgb24, bgr24, bgra, argb, rgba, abgr

    /// Bytes per pixel.
    public var bytesPerPixel: Int {
        switch self { case .rgb24, .bgr24: 3; default: 4 }
    }
    /// Byte offsets of red, green, blue in a pixel.
    var offsets: (r: Int, g: Int, b: Int) {
        switch self {
        case .rgb24: (0, 1, 2)
        case .bgr24: (2, 1, 0)
        case .bgra: (2, 1, 0)
        case .argb: (1, 2, 3)
        case .rgba: (0, 1, 2)
        case .abgr: (3, 2, 1)
        }
    }
}

/// The hand-written converters libyuv replaced (BT.601, studio range), kept only as the benchmark's baseline.
extension VideoFrame {
    /// Bytes a plane spans, or nil on overflow (as OTMedia's).
    static func handPlaneSpan(stride: Int, rowBytes: Int, rows: Int) -> Int? {
        guard stride >= rowBytes, rowBytes > 0, rows > 0 else { return nil }
        let (full, o1) = stride.multipliedReportingOverflow(by: rows - 1)
        let (span, o2) = full.addingReportingOverflow(rowBytes)
        return o1 || o2 ? nil : span
    }

    private static func check(_ buffer: UnsafeRawBufferPointer, stride: Int, rowBytes: Int, rows: Int, _ what: String) throws {
        guard buffer.baseAddress != nil, let span = handPlaneSpan(stride: stride, rowBytes: rowBytes, rows: rows),
              buffer.count >= span else {
            throw OTError(.invalidParameter, "\(what) buffer of \(buffer.count) bytes too small for stride \(stride) × \(rows) rows")
        }
    }

    /// Fills this frame from NV12 (Y plane, then interleaved U/V at half resolution).
    public mutating func handWrittenFromNV12(width: Int, height: Int, y srcY: UnsafeRawBufferPointer, strideY srcStrideY: Int,
                                         uv srcUV: UnsafeRawBufferPointer, strideUV: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        try handWrittenFromSemiPlanar(width: width, height: height, y: srcY, strideY: srcStrideY, chroma: srcUV,
                                  strideChroma: strideUV, uFirst: true, "NV12", timestampMicros: timestampMicros, rotation: rotation)
    }

    /// Fills this frame from NV21 (Y plane, then interleaved V/U at half resolution).
    public mutating func handWrittenFromNV21(width: Int, height: Int, y srcY: UnsafeRawBufferPointer, strideY srcStrideY: Int,
                                         vu srcVU: UnsafeRawBufferPointer, strideVU: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        try handWrittenFromSemiPlanar(width: width, height: height, y: srcY, strideY: srcStrideY, chroma: srcVU,
                                  strideChroma: strideVU, uFirst: false, "NV21", timestampMicros: timestampMicros, rotation: rotation)
    }

    private mutating func handWrittenFromSemiPlanar(width: Int, height: Int, y srcY: UnsafeRawBufferPointer, strideY srcStrideY: Int,
                                                chroma srcUV: UnsafeRawBufferPointer, strideChroma strideUV: Int, uFirst: Bool,
                                                _ name: String, timestampMicros: Int64, rotation: VideoRotation) throws {
        let c = Self.chromaSize(width: width, height: height)
        try reshape(width: width, height: height)
        try Self.check(srcY, stride: srcStrideY, rowBytes: width, rows: height, "\(name) Y")
        try Self.check(srcUV, stride: strideUV, rowBytes: c.width * 2, rows: c.height, "\(name) chroma")
        self.timestampMicros = timestampMicros; self.rotation = rotation
        guard let sy = srcY.baseAddress, let suv = srcUV.baseAddress else { return }
        y.withUnsafeMutableBytes { dy in
            guard let d = dy.baseAddress else { return }
            for row in 0..<height {
                (d + row * width).copyMemory(from: sy + row * srcStrideY, byteCount: width)
            }
        }
        let cw = c.width
        let uo = uFirst ? 0 : 1, vo = 1 - uo
        u.withUnsafeMutableBufferPointer { du in
            v.withUnsafeMutableBufferPointer { dv in
                guard let pu = du.baseAddress, let pv = dv.baseAddress else { return }
                let src = suv.assumingMemoryBound(to: UInt8.self)
                for row in 0..<c.height {
                    let s = src + row * strideUV
                    let ou = pu + row * cw, ov = pv + row * cw
                    var x = 0
                    // 16 chroma pairs at a time: split even and odd bytes (U,V for NV12; V,U for NV21).
                    let (even, odd) = uo == 0 ? (ou, ov) : (ov, ou)
                    while x + 16 <= cw {
                        let pair = UnsafeRawPointer(s + 2 * x).loadUnaligned(as: SIMD32<UInt8>.self)
                        UnsafeMutableRawPointer(even + x).storeBytes(of: pair.evenHalf, as: SIMD16<UInt8>.self)
                        UnsafeMutableRawPointer(odd + x).storeBytes(of: pair.oddHalf, as: SIMD16<UInt8>.self)
                        x += 16
                    }
                    while x < cw {
                        ou[x] = s[2 * x + uo]
                        ov[x] = s[2 * x + vo]
                        x += 1
                    }
                }
            }
        }
    }

    /// Fills this frame from YUY2 (packed Y0 U Y1 V, 4:2:2); chroma of two rows is averaged.
    public mutating func handWrittenFromYUY2(width: Int, height: Int, data: UnsafeRawBufferPointer, stride: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        try handWrittenFromPacked422(width: width, height: height, data: data, stride: stride, offsets: (0, 1, 3), "YUY2",
                                 timestampMicros: timestampMicros, rotation: rotation)
    }

    /// Fills this frame from UYVY (packed U Y0 V Y1, 4:2:2); chroma of two rows is averaged.
    public mutating func handWrittenFromUYVY(width: Int, height: Int, data: UnsafeRawBufferPointer, stride: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        try handWrittenFromPacked422(width: width, height: height, data: data, stride: stride, offsets: (1, 0, 2), "UYVY",
                                 timestampMicros: timestampMicros, rotation: rotation)
    }

    /// Packed 4:2:2 with the byte offsets of the first luma sample, U and V in each 4-byte pair of pixels
    /// (the second luma sample is at first luma + 2).
    private mutating func handWrittenFromPacked422(width: Int, height: Int, data: UnsafeRawBufferPointer, stride: Int,
                                               offsets: (y: Int, u: Int, v: Int), _ name: String,
                                               timestampMicros: Int64, rotation: VideoRotation) throws {
        let c = Self.chromaSize(width: width, height: height)
        try reshape(width: width, height: height)
        try Self.check(data, stride: stride, rowBytes: c.width * 4, rows: height, name)
        self.timestampMicros = timestampMicros; self.rotation = rotation
        guard let base = data.baseAddress else { return }
        let src = base.assumingMemoryBound(to: UInt8.self)
        let w = width, h = height, cw = c.width
        let yo = offsets.y, uo = offsets.u, vo = offsets.v
        y.withUnsafeMutableBufferPointer { dy in
            u.withUnsafeMutableBufferPointer { du in
                v.withUnsafeMutableBufferPointer { dv in
                    guard let py = dy.baseAddress, let pu = du.baseAddress, let pv = dv.baseAddress else { return }
                    for row in 0..<h {
                        let s = src + row * stride + yo
                        let o = py + row * w
                        for x in 0..<w { o[x] = s[2 * x] }
                    }
                    for crow in 0..<c.height {
                        let r0 = src + (2 * crow) * stride
                        let r1 = src + min(2 * crow + 1, h - 1) * stride
                        let ou = pu + crow * cw, ov = pv + crow * cw
                        for x in 0..<cw {
                            ou[x] = UInt8((Int(r0[4 * x + uo]) + Int(r1[4 * x + uo]) + 1) >> 1)
                            ov[x] = UInt8((Int(r0[4 * x + vo]) + Int(r1[4 * x + vo]) + 1) >> 1)
                        }
                    }
                }
            }
        }
    }

    /// Fills this frame from packed RGB (any of `PackedRGBFormat`); chroma from the 2×2 average.
    public mutating func handWrittenFromRGB(_ format: PackedRGBFormat, width: Int, height: Int, data: UnsafeRawBufferPointer,
                                        stride: Int, timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        let bpp = format.bytesPerPixel
        try reshape(width: width, height: height)
        try Self.check(data, stride: stride, rowBytes: width * bpp, rows: height, "RGB")
        self.timestampMicros = timestampMicros; self.rotation = rotation
        guard let base = data.baseAddress else { return }
        let src = base.assumingMemoryBound(to: UInt8.self)
        let (ro, go, bo) = format.offsets
        let w = width, h = height, cw = c.width
        y.withUnsafeMutableBufferPointer { dy in
            u.withUnsafeMutableBufferPointer { du in
                v.withUnsafeMutableBufferPointer { dv in
                    guard let py = dy.baseAddress, let pu = du.baseAddress, let pv = dv.baseAddress else { return }
                    for row in 0..<h {
                        let s = src + row * stride
                        let o = py + row * w
                        var p = s
                        for x in 0..<w {
                            let r = Int(p[ro]), g = Int(p[go]), b = Int(p[bo])
                            o[x] = UInt8(truncatingIfNeeded: ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16)
                            p += bpp
                        }
                    }
                    for crow in 0..<c.height {
                        let s0 = src + (2 * crow) * stride
                        let s1 = src + min(2 * crow + 1, h - 1) * stride
                        let ou = pu + crow * cw, ov = pv + crow * cw
                        for x in 0..<cw {
                            let a = 2 * x * bpp
                            let b2 = min(2 * x + 1, w - 1) * bpp
                            let r = Int(s0[a + ro]) + Int(s0[b2 + ro]) + Int(s1[a + ro]) + Int(s1[b2 + ro])
                            let g = Int(s0[a + go]) + Int(s0[b2 + go]) + Int(s1[a + go]) + Int(s1[b2 + go])
                            let b = Int(s0[a + bo]) + Int(s0[b2 + bo]) + Int(s1[a + bo]) + Int(s1[b2 + bo])
                            // Sums of 4 pixels: scale the coefficients' shift by 2 more bits.
                            ou[x] = UInt8(truncatingIfNeeded: ((-38 * r - 74 * g + 112 * b + 512) >> 10) + 128)
                            ov[x] = UInt8(truncatingIfNeeded: ((112 * r - 94 * g - 18 * b + 512) >> 10) + 128)
                        }
                    }
                }
            }
        }
    }

    /// Fills this frame from I420 planes with any strides (copies rows).
    public mutating func handWrittenFromI420(width: Int, height: Int,
                                         y srcY: UnsafeRawBufferPointer, strideY sY: Int,
                                         u srcU: UnsafeRawBufferPointer, strideU sU: Int,
                                         v srcV: UnsafeRawBufferPointer, strideV sV: Int,
                                         timestampMicros: Int64, rotation: VideoRotation = .r0) throws {
        let c = Self.chromaSize(width: width, height: height)
        try reshape(width: width, height: height)
        try Self.check(srcY, stride: sY, rowBytes: width, rows: height, "I420 Y")
        try Self.check(srcU, stride: sU, rowBytes: c.width, rows: c.height, "I420 U")
        try Self.check(srcV, stride: sV, rowBytes: c.width, rows: c.height, "I420 V")
        self.timestampMicros = timestampMicros; self.rotation = rotation
        Self.handCopyPlane(from: srcY, stride: sY, to: &y, width: width, rows: height)
        Self.handCopyPlane(from: srcU, stride: sU, to: &u, width: c.width, rows: c.height)
        Self.handCopyPlane(from: srcV, stride: sV, to: &v, width: c.width, rows: c.height)
    }

    static func handCopyPlane(from src: UnsafeRawBufferPointer, stride: Int, to dst: inout [UInt8], width: Int, rows: Int) {
        guard let s = src.baseAddress else { return }
        dst.withUnsafeMutableBytes { d in
            guard let db = d.baseAddress else { return }
            if stride == width {
                db.copyMemory(from: s, byteCount: width * rows)
            } else {
                for row in 0..<rows { (db + row * width).copyMemory(from: s + row * stride, byteCount: width) }
            }
        }
    }
}
