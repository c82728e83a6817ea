import COTHeapUsage

/// Bytes glibc's malloc has handed out and not had back, all arenas (`mallinfo2`: in-use chunks + mmapped blocks).
/// Freed chunks parked in a thread's malloc cache count as in use until that thread reuses them or exits.
public func heapInUse() -> Int { Int(ot_heap_in_use()) }

/// The median of some samples (the lower middle one for an even count); nil when there are none.
public func median(_ xs: [Int]) -> Int? {
    guard !xs.isEmpty else { return nil }
    return xs.sorted()[(xs.count - 1) / 2]
}
