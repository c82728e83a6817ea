/// A first-in first-out queue with O(1) amortized push and pop (engines' output queues). Inlinable: its users are in
/// other modules, on per-packet paths, and an unspecialized generic there cost the router a fifth of its thread.
@frozen
public struct FIFO<Element> {
    @usableFromInline var items: [Element] = []
    @usableFromInline var head = 0

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool { head == items.count }
    @inlinable public var count: Int { items.count - head }

    @inlinable public mutating func push(_ e: Element) { items.append(e) }
    public mutating func push<S: Sequence>(contentsOf s: S) where S.Element == Element { items.append(contentsOf: s) }

    @inlinable public mutating func pop() -> Element? {
        guard head < items.count else { return nil }
        let e = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return e
    }

    /// The queued elements, oldest first.
    @inlinable public var elements: ArraySlice<Element> { items[head...] }

    /// Keeps only the elements matching `keep`.
    @inlinable public mutating func filter(_ keep: (Element) -> Bool) {
        items = items[head...].filter(keep)
        head = 0
    }
}

extension FIFO: Sendable where Element: Sendable {}
