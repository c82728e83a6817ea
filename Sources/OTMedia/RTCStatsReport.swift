import OTBase
import OTWire

/// A value of one member of an RTC stats object.
public enum RTCStatsValue: Sendable, Equatable {
    case int(Int)
    case double(Double)
    case string(String)
    case bool(Bool)
}

/// One stats object of a report, named like the W3C WebRTC statistics (`outbound-rtp`, `inbound-rtp`,
/// `remote-inbound-rtp`), with its members in a fixed order.
public struct RTCStats: Sendable, Equatable {
    public var id: String
    public var type: String
    /// Milliseconds since the Unix epoch.
    public var timestamp: Double
    public var members: [(name: String, value: RTCStatsValue)]

    public init(id: String, type: String, timestamp: Double, members: [(name: String, value: RTCStatsValue)] = []) {
        self.id = id; self.type = type; self.timestamp = timestamp; self.members = members
    }

    /// The member called `name`, if present.
    public subscript(name: String) -> RTCStatsValue? { members.first { $0.name == name }?.value }

    public static func == (a: RTCStats, b: RTCStats) -> Bool {
        a.id == b.id && a.type == b.type && a.timestamp == b.timestamp
            && a.members.map(\.name) == b.members.map(\.name) && a.members.map(\.value) == b.members.map(\.value)
    }
}

/// What the peer's RTCP receiver report says about a stream we send (the `remote-inbound-rtp` source).
public struct RemoteInboundReport: Sendable, Equatable {
    public var ssrc: UInt32
    /// Fraction lost since the previous report, 0…1.
    public var fractionLost: Double
    /// Cumulative packets lost.
    public var packetsLost: Int
    /// Interarrival jitter in seconds.
    public var jitter: Double
    /// The latest round-trip time, when the report allowed one to be computed (LSR/DLSR).
    public var roundTripTime: Duration?
    public var totalRoundTripTime: Duration
    public var roundTripTimeMeasurements: Int

    /// `jitterTicks` is the report's jitter in RTP clock units of `clockRate`; `fractionLost8` its 8-bit fraction.
    public init(ssrc: UInt32, fractionLost8: UInt8, packetsLost: Int, jitterTicks: UInt32, clockRate: Int,
                roundTripTime: Duration? = nil, totalRoundTripTime: Duration = .zero, roundTripTimeMeasurements: Int = 0) {
        self.ssrc = ssrc
        fractionLost = Double(fractionLost8) / 256
        self.packetsLost = packetsLost
        jitter = Double(jitterTicks) / Double(max(clockRate, 1))
        self.roundTripTime = roundTripTime
        self.totalRoundTripTime = totalRoundTripTime
        self.roundTripTimeMeasurements = roundTripTimeMeasurements
    }
}

/// Builds an RTC stats report from the pipelines' counters and RTCP reports, and writes it as JSON
/// (an array of stats objects, like `JSON.stringify([...report.values()])` in a browser).
public struct RTCStatsReportBuilder: Sendable {
    public let timestamp: Double
    public private(set) var stats: [RTCStats] = []

    /// `timestampMillis`: wall-clock milliseconds since the Unix epoch (`wallClockMillis()`).
    public init(timestampMillis: Int64 = wallClockMillis()) { timestamp = Double(timestampMillis) }

    private static func id(_ prefix: String, _ kind: MediaKind, _ ssrc: UInt32) -> String {
        "\(prefix)\(kind == .video ? "V" : "A")\(ssrc)"
    }

    private mutating func add(_ type: String, _ id: String, _ members: [(name: String, value: RTCStatsValue)]) {
        stats.append(RTCStats(id: id, type: type, timestamp: timestamp, members: members))
    }

    private mutating func addRemote(_ r: RemoteInboundReport, kind: MediaKind, localId: String) {
        var m: [(name: String, value: RTCStatsValue)] = [
            ("ssrc", .int(Int(r.ssrc))), ("kind", .string(kind.rawValue)), ("localId", .string(localId)),
            ("packetsLost", .int(r.packetsLost)), ("jitter", .double(r.jitter)), ("fractionLost", .double(r.fractionLost)),
        ]
        if let rtt = r.roundTripTime { m.append(("roundTripTime", .double(rtt.seconds))) }
        m.append(("totalRoundTripTime", .double(r.totalRoundTripTime.seconds)))
        m.append(("roundTripTimeMeasurements", .int(r.roundTripTimeMeasurements)))
        add("remote-inbound-rtp", Self.id("RI", kind, r.ssrc), m)
    }

    /// Adds the ICE pair media uses: a `candidate-pair` (id `CP<id>`) and its `local-candidate` (`LC<id>`) and
    /// `remote-candidate` (`RC<id>`). `local` is our candidate as the peer sees it (srflx/prflx behind a NAT);
    /// `availableOutgoingBitrate` is the send-side bandwidth estimate (bits per second) when there is one;
    /// `localRelayProtocol` (`udp`/`tcp`: how we reach the TURN server) goes on a relayed local candidate.
    public mutating func addCandidatePair(id: String, local: SDPCandidate, remote: SDPCandidate, nominated: Bool,
                                          bytesSent: Int, bytesReceived: Int, currentRoundTripTime: Duration?,
                                          availableOutgoingBitrate: Int? = nil, localRelayProtocol: String? = nil) {
        for (type, prefix, c) in [("local-candidate", "LC", local), ("remote-candidate", "RC", remote)] {
            var m: [(name: String, value: RTCStatsValue)] = [
                ("address", .string(c.address.ip.description)), ("port", .int(Int(c.address.port))),
                ("protocol", .string(c.transport)), ("candidateType", .string(c.kind.rawValue)), ("priority", .int(Int(c.priority))),
                ("foundation", .string(c.foundation)),
            ]
            if let r = c.relatedAddress { m += [("relatedAddress", .string(r.ip.description)), ("relatedPort", .int(Int(r.port)))] }
            if prefix == "LC", let localRelayProtocol { m.append(("relayProtocol", .string(localRelayProtocol))) }
            add(type, prefix + id, m)
        }
        var m: [(name: String, value: RTCStatsValue)] = [
            ("localCandidateId", .string("LC" + id)), ("remoteCandidateId", .string("RC" + id)), ("state", .string("succeeded")),
            ("nominated", .bool(nominated)), ("bytesSent", .int(bytesSent)), ("bytesReceived", .int(bytesReceived)),
        ]
        if let rtt = currentRoundTripTime { m.append(("currentRoundTripTime", .double(rtt.seconds))) }
        if let availableOutgoingBitrate { m.append(("availableOutgoingBitrate", .double(Double(availableOutgoingBitrate)))) }
        add("candidate-pair", "CP" + id, m)
    }

    /// Adds a `codec` (id `CO<V|A><payload type>`) for a negotiated payload format; returns the id for `codecId`.
    @discardableResult
    public mutating func addCodec(_ format: any RTPPayloadFormat, payloadType: UInt8) -> String {
        let id = "CO\(format.kind == .video ? "V" : "A")\(payloadType)"
        var m: [(name: String, value: RTCStatsValue)] = [
            ("payloadType", .int(Int(payloadType))), ("mimeType", .string("\(format.kind.rawValue)/\(format.name)")),
            ("clockRate", .int(Int(format.clockRate))),
        ]
        if let c = format.channels { m.append(("channels", .int(Int(c)))) }
        if let f = format.fmtp { m.append(("sdpFmtpLine", .string(f))) }
        add("codec", id, m)
        return id
    }

    /// Adds an `outbound-rtp` for a sent video stream, and its `remote-inbound-rtp` when a receiver report is known.
    public mutating func addOutbound(_ s: VideoSendStats, mid: String? = nil, codecId: String? = nil, framesPerSecond: Double? = nil,
                                     remote: RemoteInboundReport? = nil) {
        let id = Self.id("OT", .video, s.ssrc)
        var m: [(name: String, value: RTCStatsValue)] = [("ssrc", .int(Int(s.ssrc))), ("kind", .string("video"))]
        if let mid { m.append(("mid", .string(mid))) }
        if let codecId { m.append(("codecId", .string(codecId))) }
        if remote != nil { m.append(("remoteId", .string(Self.id("RI", .video, s.ssrc)))) }
        m += [("packetsSent", .int(s.packetsSent)), ("bytesSent", .int(s.bytesSent)), ("headerBytesSent", .int(s.headerBytesSent)),
              ("retransmittedPacketsSent", .int(s.retransmittedPacketsSent)),
              ("retransmittedBytesSent", .int(s.retransmittedBytesSent)),
              ("framesEncoded", .int(s.framesEncoded)), ("keyFramesEncoded", .int(s.keyFramesEncoded)),
              ("frameWidth", .int(s.frameWidth)), ("frameHeight", .int(s.frameHeight))]
        if let framesPerSecond { m.append(("framesPerSecond", .double(framesPerSecond))) }
        m += [("targetBitrate", .double(Double(s.targetBitrateKbps) * 1000)),
              ("nackCount", .int(s.nackCount)), ("pliCount", .int(s.pliCount)), ("firCount", .int(s.firCount))]
        add("outbound-rtp", id, m)
        if let remote { addRemote(remote, kind: .video, localId: id) }
    }

    /// Adds an `outbound-rtp` for a sent audio stream, and its `remote-inbound-rtp` when a receiver report is known.
    public mutating func addOutbound(_ s: AudioSendStats, mid: String? = nil, codecId: String? = nil, remote: RemoteInboundReport? = nil) {
        let id = Self.id("OT", .audio, s.ssrc)
        var m: [(name: String, value: RTCStatsValue)] = [("ssrc", .int(Int(s.ssrc))), ("kind", .string("audio"))]
        if let mid { m.append(("mid", .string(mid))) }
        if let codecId { m.append(("codecId", .string(codecId))) }
        if remote != nil { m.append(("remoteId", .string(Self.id("RI", .audio, s.ssrc)))) }
        m += [("packetsSent", .int(s.packetsSent)), ("bytesSent", .int(s.bytesSent)), ("headerBytesSent", .int(s.headerBytesSent)),
              ("targetBitrate", .double(Double(s.targetBitrate)))]
        add("outbound-rtp", id, m)
        if let remote { addRemote(remote, kind: .audio, localId: id) }
    }


    /// Adds an `inbound-rtp` for a received video stream.
    public mutating func addInbound(_ s: VideoReceiveStats, mid: String? = nil, codecId: String? = nil, framesPerSecond: Double? = nil) {
        var m: [(name: String, value: RTCStatsValue)] = [("ssrc", .int(Int(s.ssrc))), ("kind", .string("video"))]
        if let mid { m.append(("mid", .string(mid))) }
        if let codecId { m.append(("codecId", .string(codecId))) }
        m += [("packetsReceived", .int(s.packetsReceived)), ("bytesReceived", .int(s.bytesReceived)),
              ("headerBytesReceived", .int(s.headerBytesReceived)), ("packetsLost", .int(s.packetsLost)),
              ("packetsDiscarded", .int(s.packetsDiscarded)), ("jitter", .double(s.jitter)),
              ("framesReceived", .int(s.framesReceived)), ("framesDecoded", .int(s.framesDecoded)),
              ("keyFramesDecoded", .int(s.keyFramesDecoded)), ("framesDropped", .int(s.framesDropped)),
              ("frameWidth", .int(s.frameWidth)), ("frameHeight", .int(s.frameHeight))]
        if let framesPerSecond { m.append(("framesPerSecond", .double(framesPerSecond))) }
        m += [("freezeCount", .int(s.freezeCount)), ("totalFreezesDuration", .double(s.totalFreezesDuration)),
              ("nackCount", .int(s.nackCount)), ("pliCount", .int(s.pliCount))]
        add("inbound-rtp", Self.id("IT", .video, s.ssrc), m)
    }

    /// Adds an `inbound-rtp` for a received audio stream.
    public mutating func addInbound(_ s: AudioReceiveStats, mid: String? = nil, codecId: String? = nil) {
        var m: [(name: String, value: RTCStatsValue)] = [("ssrc", .int(Int(s.ssrc))), ("kind", .string("audio"))]
        if let mid { m.append(("mid", .string(mid))) }
        if let codecId { m.append(("codecId", .string(codecId))) }
        m += [("packetsReceived", .int(s.packetsReceived)), ("bytesReceived", .int(s.bytesReceived)),
              ("headerBytesReceived", .int(s.headerBytesReceived)), ("packetsLost", .int(s.packetsLost)),
              ("packetsDiscarded", .int(s.packetsDiscarded)), ("jitter", .double(s.jitter)),
              ("totalSamplesReceived", .int(s.totalSamplesReceived)), ("concealedSamples", .int(s.concealedSamples)),
              ("concealmentEvents", .int(s.concealmentEvents))]
        add("inbound-rtp", Self.id("IT", .audio, s.ssrc), m)
    }

    /// The report as a JSON array of objects (`id`, `type`, `timestamp`, then the members).
    public func json() -> String {
        var out = "["
        for (i, s) in stats.enumerated() {
            if i > 0 { out += "," }
            out += "{\"id\":" + Self.quote(s.id) + ",\"type\":" + Self.quote(s.type) + ",\"timestamp\":" + Self.number(s.timestamp)
            for (name, value) in s.members {
                out += "," + Self.quote(name) + ":"
                switch value {
                case .int(let v): out += String(v)
                case .double(let v): out += Self.number(v)
                case .string(let v): out += Self.quote(v)
                case .bool(let v): out += v ? "true" : "false"
                }
            }
            out += "}"
        }
        return out + "]"
    }

    /// A JSON number; non-finite values (which JSON cannot hold) become null.
    private static func number(_ v: Double) -> String {
        guard v.isFinite else { return "null" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return "\(v)"
    }

    private static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}
