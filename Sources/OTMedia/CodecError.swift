/// A failure reported by libvpx or libopus, with the library's code and message.
public struct CodecError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Library: String, Sendable { case vpx = "libvpx", opus = "libopus" }
    public let library: Library
    public let code: Int32
    public let message: String
    public init(_ library: Library, code: Int32, _ message: String) {
        self.library = library; self.code = code; self.message = message
    }
    public var description: String { "\(library.rawValue) error \(code): \(message)" }
}
