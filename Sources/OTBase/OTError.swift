/// Error codes; numerically equal to OpenTok's where OpenTok has one, and to the C ABI's `ot_status_code`.
public enum OTErrorCode: Int32, Sendable, CaseIterable {
    case authorizationFailure = 1004
    case invalidSession = 1005
    case connectionFailed = 1006
    case notConnected = 1010
    case invalidParameter = 1011
    case illegalState = 1015
    case connectionTimedOut = 1021
    case connectionDropped = 1022
    case connectionRefused = 1023
    case connectionLimitExceeded = 1027
    case subscriberNotFound = 1112
    case publisherNotFound = 1113
    case signalDataTooLong = 1413
    case signalTypeTooLong = 1414
    case invalidSignalType = 1461
    case unableToPublish = 1500
    /// A force disconnect was refused (the role is not a moderator, or no such connection): OTSessionUnableToForceDisconnect.
    case unableToForceDisconnect = 1520
    case forceUnpublishOrInvalidStream = 1535
    case publisherTimedOut = 1541
    case subscriberTimedOut = 1542
    case subscriberWebRTC = 1600
    case serverCannotFindStream = 1604
    case streamLimitExceeded = 1605
    case publisherWebRTC = 1610
    case internalError = 2000
    case invalidHandle = 9001
    case bufferTooSmall = 9002
    /// End-to-end encryption (docs/e2ee.md): libotsession's numbers in OpenTok's session and subscriber ranges.
    case invalidEncryptionSecret = 1030
    case encryptionSecretMissing = 1031
    case encryptionSecretMismatch = 1620
    /// Capture and playout devices (libotsession's own numbers): a device could not be opened (no sound server, no
    /// such device), or one in use vanished. The library carries on with a stand-in (docs/devices.md).
    case deviceUnavailable = 9100
    case deviceLost = 9101
    /// A TLS server's certificate was not accepted (untrusted chain, expired, another host name): libotsession's own
    /// number. Never downgraded to a clear connection.
    case tlsCertificateRejected = 9200

    /// A short English description of the code.
    public var summary: String {
        switch self {
        case .authorizationFailure: "authorization failure: the token was refused"
        case .invalidSession: "invalid session id"
        case .connectionFailed: "could not connect to the server"
        case .notConnected: "the session is not connected"
        case .invalidParameter: "a parameter is NULL or invalid"
        case .illegalState: "the call is not allowed in the current state"
        case .connectionTimedOut: "connecting timed out"
        case .connectionDropped: "the connection to the server dropped"
        case .connectionRefused: "the connection was refused"
        case .connectionLimitExceeded: "the session has reached its connection limit"
        case .invalidEncryptionSecret: "the encryption secret must be 8 to 256 characters"
        case .encryptionSecretMissing: "the session is end-to-end encrypted and no encryption secret is set"
        case .subscriberNotFound: "subscriber not found"
        case .publisherNotFound: "publisher not found"
        case .signalDataTooLong: "signal data is longer than 8192 bytes"
        case .signalTypeTooLong: "signal type is longer than 128 characters"
        case .invalidSignalType: "signal type has characters outside [A-Za-z0-9_~-]"
        case .unableToPublish: "unable to publish"
        case .unableToForceDisconnect: "unable to force disconnect: not a moderator, or no such connection"
        case .forceUnpublishOrInvalidStream: "not allowed (role lacks the capability) or invalid stream"
        case .publisherTimedOut: "publishing timed out"
        case .subscriberTimedOut: "subscribing timed out"
        case .subscriberWebRTC: "subscriber media connection failed"
        case .serverCannotFindStream: "the server cannot find the stream"
        case .streamLimitExceeded: "stream limit exceeded"
        case .publisherWebRTC: "publisher media connection failed"
        case .encryptionSecretMismatch: "the stream cannot be decrypted: the encryption secrets differ"
        case .internalError: "internal error"
        case .invalidHandle: "the handle was never issued, is deleted, or is of another type"
        case .bufferTooSmall: "the buffer is too small"
        case .deviceUnavailable: "the capture or playout device is unavailable"
        case .deviceLost: "the capture or playout device was lost"
        case .tlsCertificateRejected: "the server's TLS certificate was not accepted"
        }
    }
}

/// An error carrying an OpenTok-compatible code and a specific message.
public struct OTError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: OTErrorCode
    public let message: String
    public init(_ code: OTErrorCode, _ message: String? = nil) {
        self.code = code
        self.message = message ?? code.summary
    }
    public var description: String { "\(message) (\(code.rawValue))" }
}
