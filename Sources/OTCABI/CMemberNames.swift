/// The C members that Swift settings properties are set from, where the names differ: the settings' one
/// `validate(naming:)` (OTSession's settings, OTServer's configuration) names the member a C caller wrote in the
/// messages of refused settings.
enum CMemberNames {
    private static let table: [String: String] = [
        // ot_session_settings, ot_subscriber_settings
        "connectTimeout": "connect_timeout_ms", "pingInterval": "ping_interval_ms",
        "qualityLossThreshold": "quality_loss_threshold", "qualityWindowSeconds": "quality_window_seconds",
        // ot_publisher_settings
        "minBitrateKbps": "min_bitrate_kbps", "startBitrateKbps": "start_bitrate_kbps", "maxBitrateKbps": "max_bitrate_kbps",
        "audioBitrateBps": "audio_bitrate_bps",
        // ot_server_options (SessionServer.Configuration.validate)
        "credentialLifetime": "turn_credential_ttl_s", "turnSecret": "turn_secret", "workers": "media_workers",
    ]

    /// The C member behind a Swift settings property.
    static func of(_ swiftName: String) -> String { table[swiftName] ?? swiftName }
}
