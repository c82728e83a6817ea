/// Regroups interleaved PCM written in arbitrary amounts (a custom audio device's writes) into
/// fixed-size chunks (for example 20 ms for the Opus encoder).
public struct PCMChunker: Sendable {
    /// Interleaved samples per chunk.
    public let chunkSamples: Int
    private var pending: [Int16] = []

    public init(chunkSamples: Int) {
        self.chunkSamples = max(1, chunkSamples)
        pending.reserveCapacity(self.chunkSamples)
    }

    /// Samples waiting for a chunk to fill.
    public var pendingCount: Int { pending.count }

    /// Appends samples and calls `emit` for every chunk completed, in order.
    public mutating func append(_ samples: UnsafeBufferPointer<Int16>, emit: (UnsafeBufferPointer<Int16>) -> Void) {
        var rest = samples[...]
        if !pending.isEmpty {
            let take = min(chunkSamples - pending.count, rest.count)
            pending.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
            guard pending.count == chunkSamples else { return }
            pending.withUnsafeBufferPointer(emit)
            pending.removeAll(keepingCapacity: true)
        }
        // Whole chunks straight from the input, without copying.
        while rest.count >= chunkSamples {
            emit(UnsafeBufferPointer(rebasing: rest.prefix(chunkSamples)))
            rest = rest.dropFirst(chunkSamples)
        }
        pending.append(contentsOf: rest)
    }

    /// Drops samples waiting for a chunk.
    public mutating func reset() { pending.removeAll(keepingCapacity: true) }
}
