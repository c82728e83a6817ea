import OTBase

/// What the signaling router refuses, in its own terms. It knows nothing of HTTP: the REST API maps these to statuses
/// (`RESTAPI.status(for:)`) and the WebSocket replies carry `protocolCode` (the table in docs/protocol.md, "REST API").
public enum SignalingError: Error, Equatable {
    /// No such session on this server.
    case sessionNotFound(String)
    /// No such connection in the session.
    case connectionNotFound(String)
    /// No such stream in the session.
    case streamNotFound(String)
    /// A signal breaking `SignalRules` (type or data too long, a bad type character): the rule's error.
    case badSignal(OTError)
    /// A request naming something that does not fit (a layout change for a stream that is not there).
    case invalidArgument(String)

    /// The OpenTok error code a WebSocket client gets in its reply.
    public var protocolCode: OTErrorCode {
        switch self {
        case .sessionNotFound: .invalidSession
        case .connectionNotFound, .invalidArgument: .invalidParameter
        case .streamNotFound: .serverCannotFindStream
        case .badSignal(let e): e.code
        }
    }

    public var message: String {
        switch self {
        case .sessionNotFound(let id): "session \(id) not found"
        case .connectionNotFound(let id): "no connection \(id) in this session"
        case .streamNotFound(let id): "stream \(id) not found"
        case .badSignal(let e): e.message
        case .invalidArgument(let m): m
        }
    }

    /// The error a WebSocket reply carries.
    var otError: OTError { OTError(protocolCode, message) }
}
