import OTBase
import OTWire

/// A sans-IO layer of a byte stream, between the network side (below) and the application side (above): TLS
/// (`TLSStream`), an HTTP CONNECT tunnel (`HTTPConnectTunnel`). Bytes from the network go in with `receive`; what the
/// application writes goes in with `write` (held until the layer is open); `takeOutgoing` drains what goes to the
/// network, `takeIncoming` what goes to the application. Failures are thrown as `OTError`s.
public protocol StreamLayer: AnyObject {
    /// Starts the layer once the one below is open: a client's first flight (ClientHello, the CONNECT request).
    func start() throws
    /// Bytes from the network side.
    func receive(_ bytes: UnsafeRawBufferPointer) throws
    /// Application bytes to send (held until the layer is open).
    func write(_ bytes: [UInt8]) throws
    /// Ends the application stream in an orderly way (TLS: close_notify); later writes are dropped.
    func shutdown()
    /// Application data may flow (the handshake is done, the tunnel is up).
    var isOpen: Bool { get }
    /// The peer ended the stream in an orderly way (TLS close_notify).
    var peerClosed: Bool { get }
    /// Bytes for the network side, drained.
    func takeOutgoing() -> [UInt8]
    /// Bytes for the application side, drained.
    func takeIncoming() -> [UInt8]
}

/// Layers stacked over one byte stream, the first nearest the network: each one starts once the one below it is
/// open, and the stack is open when all are. Sans-IO: drivers feed it what the socket read and write what it gives.
public final class StreamStack {
    private let layers: [StreamLayer]
    private var started: Int = 0
    private var outgoing: [UInt8] = []
    private var incoming: [UInt8] = []

    public init(_ layers: [StreamLayer]) { self.layers = layers }

    /// Every layer is open: application data flows.
    public var isOpen: Bool { started == layers.count && layers.allSatisfy(\.isOpen) }
    /// The peer ended the stream in an orderly way (in any layer).
    public var peerClosed: Bool { layers.contains { $0.peerClosed } }

    /// Starts the first layer (the socket is connected, or accepted).
    public func start() throws {
        guard started == 0, let first = layers.first else { return }
        started = 1
        try first.start()
        try pump()
    }

    /// Bytes the socket read.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws {
        guard let first = layers.first else { incoming += bytes; return }
        try first.receive(bytes)
        try pump()
    }

    /// Application bytes to send (held by the layers until they are open).
    public func write(_ bytes: [UInt8]) throws {
        guard let last = layers.last else { outgoing += bytes; return }
        try last.write(bytes)
        try pump()
    }

    /// Ends the stream in an orderly way, from the top layer down.
    public func shutdown() {
        for l in layers.reversed() where l.isOpen { l.shutdown() }
        try? pump()
    }

    /// Bytes for the socket, drained.
    public func takeOutgoing() -> [UInt8] { defer { outgoing = [] }; return outgoing }
    /// Bytes for the application, drained.
    public func takeIncoming() -> [UInt8] { defer { incoming = [] }; return incoming }

    /// Moves bytes between the layers until nothing moves: up what each one decoded, down what each one encoded,
    /// starting each layer once the one below it opens.
    private func pump() throws {
        var moved = true
        while moved {
            moved = false
            for i in 0..<started {
                if i + 1 == started, started < layers.count, layers[i].isOpen {
                    started += 1
                    try layers[i + 1].start()
                    moved = true
                }
                let up = layers[i].takeIncoming()
                guard !up.isEmpty else { continue }
                moved = true
                if i + 1 < started { try up.withUnsafeBytes { try layers[i + 1].receive($0) } } else { incoming += up }
            }
            for i in stride(from: started - 1, to: 0, by: -1) {
                let down = layers[i].takeOutgoing()
                guard !down.isEmpty else { continue }
                moved = true
                try layers[i - 1].write(down)
            }
            if let first = layers.first {
                let out = first.takeOutgoing()
                if !out.isEmpty { outgoing += out; moved = true }
            }
        }
    }
}

/// How a client's TCP connections to servers (TURN over TCP or TLS) are made: the TLS trust and an HTTP CONNECT
/// proxy (its address resolved).
public struct StreamRoute: Sendable {
    public struct Proxy: Sendable, Equatable {
        public var address: TransportAddress
        /// `user:password` for Proxy-Authorization: Basic.
        public var credentials: String?
        public init(address: TransportAddress, credentials: String? = nil) { self.address = address; self.credentials = credentials }
    }
    /// What TLS connections trust (nil: the system store).
    public var tls: TLSClientContext?
    public var proxy: Proxy?
    public init(tls: TLSClientContext? = nil, proxy: Proxy? = nil) { self.tls = tls; self.proxy = proxy }
}
