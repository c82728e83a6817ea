import COTAllocCounter

/// The heap blocks this process has allocated and not freed, counted exactly by COTAllocCounter (which replaces
/// malloc in the test executable), leaving out libdispatch's cached continuations: a thread keeps up to 1024 freed
/// work items for reuse until it ends, so they rise with the work a test dispatches whether or not anything leaks.
public struct LiveAllocations: Sendable, CustomStringConvertible {
    public let bytes: Int, blocks: Int
    /// Bytes in libdispatch's continuations (in flight or cached), not in `bytes`.
    public let dispatchContinuationBytes: Int

    public static func sample() -> LiveAllocations {
        LiveAllocations(bytes: Int(ot_alloc_live_bytes() - ot_alloc_dispatch_continuation_bytes()),
                        blocks: Int(ot_alloc_live_blocks() - ot_alloc_dispatch_continuation_blocks()),
                        dispatchContinuationBytes: Int(ot_alloc_dispatch_continuation_bytes()))
    }
    public var description: String { "\(bytes / 1024) KiB in \(blocks) blocks (+ \(dispatchContinuationBytes / 1024) KiB of Dispatch's continuations)" }
}

/// Heap allocations made by the calling thread, counted exactly by COTAllocCounter: a per-packet path run in a loop on
/// the test's thread allocates nothing when this does not move (other threads' allocations are not counted).
public enum ThreadAllocations {
    /// Allocation calls of this thread since it started.
    public static var count: UInt64 { UInt64(ot_alloc_thread_count()) }

    /// Allocation calls `body` made on this thread.
    public static func during(_ body: () throws -> Void) rethrows -> UInt64 {
        let before = count
        try body()
        return count - before
    }
}
