/// The one peer connection a control machine (`SubscriberControl`, `PublisherLinkControl`) has at a time: its id
/// (`base-1`, `base-2`, … — a new one for each connection, unique on the server when `base` is) and whether it is open.
struct ControlledLink {
    private let base: String
    private var count = 0
    /// The current (or last) connection's id.
    private(set) var peerId: String?
    private(set) var isOpen = false

    init(base: String) { self.base = base }

    /// Opens the next connection: its new id.
    mutating func openNext() -> String {
        count += 1
        let id = "\(base)-\(count)"
        peerId = id
        isOpen = true
        return id
    }

    /// True when `id` is the open connection (events of replaced or closed ones are ignored).
    func isCurrent(_ id: String) -> Bool { isOpen && id == peerId }

    /// Marks it closed: its id when it was open (to close it), else nil.
    mutating func close() -> String? {
        defer { isOpen = false }
        return isOpen ? peerId : nil
    }
}
