import OTBase

/// What the test pattern carries in its barcode: the frame counter and the capture time.
public struct TestPatternStamp: Sendable, Equatable, CustomStringConvertible {
    public var frameNumber: UInt32
    /// Capture time in microseconds, as given to `TestPatternSource.render` (56 bits are kept).
    public var timestampMicros: Int64

    public init(frameNumber: UInt32, timestampMicros: Int64) {
        self.frameNumber = frameNumber; self.timestampMicros = timestampMicros
    }
    public var description: String { "#\(frameNumber)@\(timestampMicros)µs" }
}

/// Where the barcode sits in a picture of a given size. Both the source and the reader derive it
/// from the picture size alone: a grid of 13 × 8 square cells, one bit each, starting one cell in
/// from the top-left corner. Cells are 16-pixel aligned when large enough, so they line up with
/// the codec's macroblocks and survive heavy quantization.
struct TestPatternLayout {
    static let columns = 13
    static let rows = 8
    static let bitCount = columns * rows  // 32 counter + 56 timestamp + 16 CRC
    static let dark: UInt8 = 32
    static let light: UInt8 = 224

    let cell: Int
    var origin: Int { cell }

    /// nil when the picture is too small to carry the code.
    init?(width: Int, height: Int) {
        var c = min(width / (2 * Self.columns), height / (2 * Self.rows + 4))
        if c >= 16 { c -= c % 16 } else if c >= 8 { c -= c % 8 }
        guard c >= 4 else { return nil }
        cell = c
    }

    /// The 104 bits for a stamp, most significant first: counter, timestamp, CRC-16 of both.
    static func bits(for stamp: TestPatternStamp) -> [Bool] {
        let bytes = payloadBytes(stamp)
        let crc = crc16(bytes)
        var bits: [Bool] = []
        bits.reserveCapacity(bitCount)
        for b in bytes + [UInt8(crc >> 8), UInt8(crc & 0xFF)] {
            for i in stride(from: 7, through: 0, by: -1) { bits.append((b >> UInt8(i)) & 1 == 1) }
        }
        return bits
    }

    /// The stamp the bits carry, or nil when the CRC does not match.
    static func stamp(from bits: [Bool]) -> TestPatternStamp? {
        guard bits.count == bitCount else { return nil }
        var bytes = [UInt8](repeating: 0, count: bitCount / 8)
        for (i, bit) in bits.enumerated() where bit { bytes[i / 8] |= 0x80 >> UInt8(i % 8) }
        let payload = Array(bytes[0..<11])
        let crc = UInt16(bytes[11]) << 8 | UInt16(bytes[12])
        guard crc16(payload) == crc else { return nil }
        var counter: UInt32 = 0
        for b in payload[0..<4] { counter = counter << 8 | UInt32(b) }
        var ts: Int64 = 0
        for b in payload[4..<11] { ts = ts << 8 | Int64(b) }
        return TestPatternStamp(frameNumber: counter, timestampMicros: ts)
    }

    private static func payloadBytes(_ s: TestPatternStamp) -> [UInt8] {
        var out: [UInt8] = []
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: s.frameNumber >> UInt32(shift))) }
        for shift in stride(from: 48, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: s.timestampMicros >> Int64(shift))) }
        return out
    }

    /// CRC-16/CCITT-FALSE: the barcode's own integrity check (11 bytes per frame).
    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0xFFFF
        for b in bytes {
            crc ^= UInt16(b) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }
}

/// A synthetic camera: scrolling colour bars and a bouncing square, with a block barcode in the
/// top-left corner that carries the frame counter and capture timestamp. The barcode is made of
/// large flat cells (16 px at 640×480) that VP8 keeps readable at a few hundred kbit/s;
/// `TestPatternReader` reads it back from a decoded frame.
public struct TestPatternSource: Sendable {
    public let width: Int
    public let height: Int

    // 75% colour bars in BT.601 limited-range YUV: white, yellow, cyan, green, magenta, red, blue, black.
    private static let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
        (180, 128, 128), (162, 44, 142), (131, 156, 44), (112, 72, 58),
        (84, 184, 198), (65, 100, 212), (35, 212, 114), (16, 128, 128),
    ]

    /// Throws `invalidParameter` for a size outside 1...8192.
    public init(width: Int, height: Int) throws {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw OTError(.invalidParameter, "test pattern size \(width)x\(height) is out of range 1...8192")
        }
        self.width = width; self.height = height
    }

    /// True when the picture is large enough (at least 104×80) to carry the barcode.
    public var carriesStamp: Bool { TestPatternLayout(width: width, height: height) != nil }

    /// The picture for frame `frameNumber`, stamped with `timestampMicros`; the motion depends on the frame number.
    public func render(frameNumber: UInt32, timestampMicros: Int64) -> VideoFrame {
        var frame = VideoFrame(width: width, height: height, timestampMicros: timestampMicros)
        let c = VideoFrame.chromaSize(width: width, height: height)
        let bars = Self.bars
        let barWidth = max(1, (width + bars.count - 1) / bars.count)
        let shift = Int(frameNumber % UInt32(width)) * 2 % width  // scroll 2 px per frame

        // One row of bars, shifted; then copied to every row.
        var rowY = [UInt8](repeating: 0, count: width)
        for x in 0..<width { rowY[x] = bars[((x + shift) % width) / barWidth % bars.count].y }
        var rowU = [UInt8](repeating: 0, count: c.width)
        var rowV = [UInt8](repeating: 0, count: c.width)
        for x in 0..<c.width {
            let b = bars[((min(2 * x, width - 1) + shift) % width) / barWidth % bars.count]
            rowU[x] = b.u; rowV[x] = b.v
        }
        fillRows(&frame.y, stride: frame.strideY, rows: height, with: rowY)
        fillRows(&frame.u, stride: frame.strideU, rows: c.height, with: rowU)
        fillRows(&frame.v, stride: frame.strideV, rows: c.height, with: rowV)

        // A bouncing grey-white square, a sixth of the height.
        let side = max(2, height / 6) & ~1
        let n = Int(frameNumber)
        let sx = bounce(n * 3, range: max(1, width - side))
        let sy = bounce(n * 2, range: max(1, height - side))
        fillRect(&frame.y, stride: frame.strideY, x: sx, y: sy, w: min(side, width - sx), h: min(side, height - sy), value: 235)
        fillRect(&frame.u, stride: frame.strideU, x: sx / 2, y: sy / 2, w: min(side / 2, c.width - sx / 2), h: min(side / 2, c.height - sy / 2), value: 128)
        fillRect(&frame.v, stride: frame.strideV, x: sx / 2, y: sy / 2, w: min(side / 2, c.width - sx / 2), h: min(side / 2, c.height - sy / 2), value: 128)

        if let layout = TestPatternLayout(width: width, height: height) {
            let stamp = TestPatternStamp(frameNumber: frameNumber, timestampMicros: timestampMicros)
            drawCode(into: &frame, layout: layout, bits: TestPatternLayout.bits(for: stamp))
        }
        return frame
    }

    /// A capturer that renders this pattern at `fps`, stamping each frame with its capture time.
    public func capturer(fps: Int = 30, clock: any TimeSource = MonotonicClock()) -> TimedVideoCapturer {
        let source = self
        return TimedVideoCapturer(settings: VideoCaptureSettings(format: .i420, width: width, height: height, fps: fps),
                                  clock: clock) { index, ts in
            CapturedFrame(source.render(frameNumber: UInt32(truncatingIfNeeded: index), timestampMicros: ts))
        }
    }

    private func drawCode(into frame: inout VideoFrame, layout: TestPatternLayout, bits: [Bool]) {
        let c = layout.cell
        let cols = TestPatternLayout.columns
        for (i, bit) in bits.enumerated() {
            let x = layout.origin + (i % cols) * c
            let y = layout.origin + (i / cols) * c
            fillRect(&frame.y, stride: frame.strideY, x: x, y: y, w: c, h: c,
                     value: bit ? TestPatternLayout.light : TestPatternLayout.dark)
            fillRect(&frame.u, stride: frame.strideU, x: x / 2, y: y / 2, w: c / 2, h: c / 2, value: 128)
            fillRect(&frame.v, stride: frame.strideV, x: x / 2, y: y / 2, w: c / 2, h: c / 2, value: 128)
        }
    }

    private func bounce(_ t: Int, range: Int) -> Int {
        let p = t % (2 * range)
        return p < range ? p : 2 * range - p
    }

    private func fillRows(_ plane: inout [UInt8], stride: Int, rows: Int, with row: [UInt8]) {
        plane.withUnsafeMutableBufferPointer { dst in
            row.withUnsafeBufferPointer { src in
                guard let d = dst.baseAddress, let s = src.baseAddress else { return }
                for r in 0..<rows { (d + r * stride).update(from: s, count: row.count) }
            }
        }
    }

    private func fillRect(_ plane: inout [UInt8], stride: Int, x: Int, y: Int, w: Int, h: Int, value: UInt8) {
        guard w > 0, h > 0 else { return }
        plane.withUnsafeMutableBufferPointer { dst in
            guard let d = dst.baseAddress else { return }
            for r in y..<(y + h) { (d + r * stride + x).update(repeating: value, count: w) }
        }
    }
}

/// Reads the frame counter and capture timestamp back from a (decoded) test-pattern frame.
///
/// Each cell's luma is averaged over its inner half and compared with the midpoint between the
/// two cell levels, so codec noise and ringing at the cell edges do not flip bits; a CRC-16
/// rejects frames whose code is damaged or absent.
public enum TestPatternReader {
    /// The stamp in `frame`, or nil when the frame carries no readable code.
    public static func read(_ frame: VideoFrame) -> TestPatternStamp? {
        guard let layout = TestPatternLayout(width: frame.width, height: frame.height) else { return nil }
        let c = layout.cell
        let inset = c / 4
        let inner = c - 2 * inset
        let cols = TestPatternLayout.columns
        let threshold = (Int(TestPatternLayout.dark) + Int(TestPatternLayout.light)) / 2
        let lastRow = layout.origin + TestPatternLayout.rows * c - 1
        guard frame.strideY >= frame.width, frame.y.count >= lastRow * frame.strideY + frame.width else { return nil }
        var bits = [Bool](repeating: false, count: TestPatternLayout.bitCount)
        frame.y.withUnsafeBufferPointer { y in
            for i in 0..<TestPatternLayout.bitCount {
                let x0 = layout.origin + (i % cols) * c + inset
                let y0 = layout.origin + (i / cols) * c + inset
                var sum = 0
                for r in y0..<(y0 + inner) {
                    let row = r * frame.strideY
                    for x in x0..<(x0 + inner) { sum += Int(y[row + x]) }
                }
                bits[i] = sum > threshold * inner * inner
            }
        }
        return TestPatternLayout.stamp(from: bits)
    }
}
