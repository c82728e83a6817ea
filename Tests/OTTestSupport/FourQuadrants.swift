import OTMedia

/// The picture of the fake V4L2 camera (Tests/fixtures/fake-v4l2) and of the JPEG fixture: four flat quadrants.
public enum FourQuadrants {
    /// BT.601 studio-range (Y, U, V) of the top-left (red), top-right (green), bottom-left (blue) and bottom-right
    /// (yellow) quadrants.
    public static let colours: [(y: Int, u: Int, v: Int)] = [(81, 90, 240), (145, 54, 34), (41, 240, 110), (210, 16, 146)]

    /// The mean (Y, U, V) of each quadrant of `frame`, in `colours` order, over its middle half (edges, where codecs
    /// and chroma subsampling blur the boundaries, left out).
    public static func means(_ frame: VideoFrame) -> [(y: Double, u: Double, v: Double)] {
        let w = frame.width, h = frame.height
        return (0..<4).map { q in
            let x0 = (q % 2) * w / 2 + w / 8, y0 = (q / 2) * h / 2 + h / 8
            var sy = 0, su = 0, sv = 0, n = 0, nc = 0
            for y in y0..<(y0 + h / 4) {
                for x in x0..<(x0 + w / 4) {
                    sy += Int(frame.y[y * frame.strideY + x]); n += 1
                    if x % 2 == 0, y % 2 == 0 {
                        su += Int(frame.u[(y / 2) * frame.strideU + x / 2]); sv += Int(frame.v[(y / 2) * frame.strideV + x / 2]); nc += 1
                    }
                }
            }
            return (Double(sy) / Double(max(n, 1)), Double(su) / Double(max(nc, 1)), Double(sv) / Double(max(nc, 1)))
        }
    }

    /// The largest difference of any component of any quadrant from `colours`.
    public static func largestError(_ frame: VideoFrame) -> Double {
        zip(means(frame), colours).map { m, c in
            max(abs(m.y - Double(c.y)), abs(m.u - Double(c.u)), abs(m.v - Double(c.v)))
        }.max() ?? .infinity
    }
}
