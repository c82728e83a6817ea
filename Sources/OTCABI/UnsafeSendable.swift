/// Carries a C pointer (user_data) into a Sendable closure; the C caller owns what it points to.
struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
