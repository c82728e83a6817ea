/// Audio or video: the kind of an m-section and of the formats it can carry.
public enum MediaKind: String, Sendable, Equatable {
    case audio, video
}
