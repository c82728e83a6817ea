import OTBase

/// A reception report block (RFC 3550 §6.4.1).
public struct RTCPReportBlock: Equatable, Sendable {
    public var ssrc: UInt32
    /// Fraction lost since the previous report, in 1/256ths.
    public var fractionLost: UInt8
    /// Cumulative packets lost (24-bit signed).
    public var cumulativeLost: Int32
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP timestamp of the last SR received (0 if none).
    public var lastSR: UInt32
    /// Delay since that SR, in 1/65536 seconds.
    public var delaySinceLastSR: UInt32
    public init(ssrc: UInt32, fractionLost: UInt8 = 0, cumulativeLost: Int32 = 0, extendedHighestSequence: UInt32 = 0,
                jitter: UInt32 = 0, lastSR: UInt32 = 0, delaySinceLastSR: UInt32 = 0) {
        self.ssrc = ssrc; self.fractionLost = fractionLost; self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence; self.jitter = jitter
        self.lastSR = lastSR; self.delaySinceLastSR = delaySinceLastSR
    }
}

/// Sender report (PT 200).
public struct RTCPSenderReport: Equatable, Sendable {
    public var ssrc: UInt32
    public var ntpTime: UInt64
    public var rtpTime: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    public var reports: [RTCPReportBlock]
    public init(ssrc: UInt32, ntpTime: UInt64, rtpTime: UInt32, packetCount: UInt32, octetCount: UInt32, reports: [RTCPReportBlock] = []) {
        self.ssrc = ssrc; self.ntpTime = ntpTime; self.rtpTime = rtpTime
        self.packetCount = packetCount; self.octetCount = octetCount; self.reports = reports
    }
}

/// One SDES chunk: an SSRC and its items (type 1 = CNAME).
public struct RTCPSDESChunk: Equatable, Sendable {
    public var ssrc: UInt32
    public var items: [(type: UInt8, text: String)]
    public init(ssrc: UInt32, items: [(type: UInt8, text: String)]) { self.ssrc = ssrc; self.items = items }
    public static func == (a: RTCPSDESChunk, b: RTCPSDESChunk) -> Bool {
        a.ssrc == b.ssrc && a.items.map { "\($0.type)/\($0.text)" } == b.items.map { "\($0.type)/\($0.text)" }
    }
    public var cname: String? { items.first { $0.type == 1 }?.text }
}

/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01, RTPFB FMT 15).
public struct TransportCCFeedback: Equatable, Sendable {
    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var baseSequence: UInt16
    /// Reference time in multiples of 64 ms (24-bit signed).
    public var referenceTime: Int32
    public var feedbackCount: UInt8
    /// One entry per sequence number from `baseSequence`: nil when not received, else the receive delta
    /// in 250 µs ticks from the previous received packet (the first from `referenceTime`).
    public var deltas: [Int32?]
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, baseSequence: UInt16, referenceTime: Int32, feedbackCount: UInt8, deltas: [Int32?]) {
        self.senderSSRC = senderSSRC; self.mediaSSRC = mediaSSRC; self.baseSequence = baseSequence
        self.referenceTime = referenceTime; self.feedbackCount = feedbackCount; self.deltas = deltas
    }
}

/// One DLRR sub-block (RFC 3611 §4.5): the answer to the last RRTR received from `ssrc`.
public struct RTCPDLRRSubBlock: Equatable, Sendable {
    public var ssrc: UInt32
    /// Middle 32 bits of that RRTR's NTP timestamp.
    public var lastRR: UInt32
    /// Delay since it arrived, in 1/65536 seconds.
    public var delaySinceLastRR: UInt32
    public init(ssrc: UInt32, lastRR: UInt32, delaySinceLastRR: UInt32) {
        self.ssrc = ssrc; self.lastRR = lastRR; self.delaySinceLastRR = delaySinceLastRR
    }
}

/// The XR report blocks we read and write (RFC 3611 §4.4, §4.5): how a receive-only leg measures its round trip.
public enum RTCPXRBlock: Equatable, Sendable {
    /// Receiver Reference Time Report (BT 4): the sender's NTP time.
    case receiverReferenceTime(ntp: UInt64)
    /// DLRR (BT 5): one sub-block per RRTR sender answered.
    case dlrr([RTCPDLRRSubBlock])
}

/// One RTCP packet of a compound packet.
public enum RTCPPacket: Equatable, Sendable {
    case senderReport(RTCPSenderReport)
    case receiverReport(ssrc: UInt32, reports: [RTCPReportBlock])
    case sourceDescription([RTCPSDESChunk])
    case bye(ssrcs: [UInt32], reason: String?)
    /// Generic NACK (RFC 4585 §6.2.1): lost sequence numbers, ascending as encoded.
    case nack(senderSSRC: UInt32, mediaSSRC: UInt32, lost: [UInt16])
    /// Picture loss indication (RFC 4585 §6.3.1).
    case pli(senderSSRC: UInt32, mediaSSRC: UInt32)
    /// Full intra request (RFC 5104 §4.3.1): (ssrc, command sequence number) entries.
    case fir(senderSSRC: UInt32, entries: [FIREntry])
    case transportCC(TransportCCFeedback)
    /// Extended report (RFC 3611, PT 207): the sender's SSRC and its RRTR and DLRR blocks (blocks of other types are
    /// skipped when parsed).
    case extendedReport(senderSSRC: UInt32, blocks: [RTCPXRBlock])
    /// Anything else (APP, REMB, ...), kept raw: the header's count/FMT field and the payload after the header.
    case other(packetType: UInt8, count: UInt8, payload: [UInt8])

    public struct FIREntry: Equatable, Sendable {
        public var ssrc: UInt32
        public var sequence: UInt8
        public init(ssrc: UInt32, sequence: UInt8) { self.ssrc = ssrc; self.sequence = sequence }
    }
}

/// A compound RTCP packet as `RTCP.parseCompound` read it: the packets that parsed and what was skipped.
public struct RTCPCompound: Equatable, Sendable {
    /// The packets that parsed, in their order.
    public var packets: [RTCPPacket] = []
    /// Packets skipped: each one whose body did not parse, and one more when a header that did not parse ended the
    /// compound (what followed it was not read).
    public var skipped = 0
    /// Why the first skipped packet was skipped; nil when nothing was.
    public var firstError: WireError?
    public init(packets: [RTCPPacket] = [], skipped: Int = 0, firstError: WireError? = nil) {
        self.packets = packets; self.skipped = skipped; self.firstError = firstError
    }

    mutating func skip(_ error: any Error) {
        skipped += 1
        if firstError == nil { firstError = error as? WireError ?? WireError("\(error)") }
    }
}

/// RTCP compound packet parsing and building (RFC 3550, RFC 4585, RFC 5104, RFC 3611 XR).
public enum RTCP {
    public static let senderReportType: UInt8 = 200, receiverReportType: UInt8 = 201, sdesType: UInt8 = 202
    public static let byeType: UInt8 = 203, rtpfbType: UInt8 = 205, psfbType: UInt8 = 206, xrType: UInt8 = 207
    static let rrtrBlockType: UInt8 = 4, dlrrBlockType: UInt8 = 5

    /// Reads a compound RTCP packet by the rule libwebrtc follows (`RTCPReceiver::ParseCompoundPacket`), so that one
    /// bad packet costs only itself: a packet whose header is sound but whose body does not parse is skipped and
    /// counted, and the packets before and after it are kept; a header that does not parse (not version 2, a length
    /// past the datagram, bad padding, fewer than 4 bytes) ends the compound and keeps what came before it. Never
    /// throws and never traps.
    public static func parseCompound(_ bytes: ArraySlice<UInt8>) -> RTCPCompound {
        var compound = RTCPCompound()
        var r = ByteReader(bytes)
        repeat {
            let pt: UInt8, count: UInt8, body: ArraySlice<UInt8>
            do { (pt, count, body) = try commonHeader(&r) } catch {
                compound.skip(error)
                break
            }
            do { compound.packets.append(try parseOne(pt: pt, count: count, body: body)) } catch { compound.skip(error) }
        } while r.remaining > 0
        return compound
    }

    public static func parseCompound(_ bytes: [UInt8]) -> RTCPCompound { parseCompound(bytes[...]) }

    /// Parses every packet of a compound RTCP packet, strictly: throws the `WireError` of the first packet that does not
    /// parse (fuzzers and tests; a receiver uses `parseCompound`, which keeps the rest).
    public static func parse(_ bytes: ArraySlice<UInt8>) throws -> [RTCPPacket] {
        let compound = parseCompound(bytes)
        if let error = compound.firstError { throw error }
        return compound.packets
    }

    public static func parse(_ bytes: [UInt8]) throws -> [RTCPPacket] { try parse(bytes[...]) }

    /// One packet's common header (RFC 3550 §6.4.1): its packet type, count/FMT field and body, padding removed.
    private static func commonHeader(_ r: inout ByteReader) throws -> (pt: UInt8, count: UInt8, body: ArraySlice<UInt8>) {
        guard r.remaining >= 4 else { throw WireError("RTCP: packet shorter than 4 bytes") }
        let b0 = try r.u8("RTCP header")
        guard b0 >> 6 == 2 else { throw WireError("RTCP: version \(b0 >> 6), expected 2") }
        let pt = try r.u8("RTCP packet type")
        let words = Int(try r.u16("RTCP length"))
        var body = try r.take(words * 4, "RTCP packet body")
        if b0 & 0x20 != 0 {
            guard let pad = body.last, pad > 0, Int(pad) <= body.count else { throw WireError("RTCP: bad padding") }
            body = body.dropLast(Int(pad))
        }
        return (pt, b0 & 0x1F, body)
    }

    private static func reportBlocks(_ r: inout ByteReader, _ n: UInt8) throws -> [RTCPReportBlock] {
        var blocks: [RTCPReportBlock] = []
        for _ in 0..<n {
            let ssrc = try r.u32("report block")
            let lost = try r.u32("report block")
            var cum = Int32(bitPattern: lost & 0x00FF_FFFF)
            if cum & 0x0080_0000 != 0 { cum -= 0x0100_0000 }
            blocks.append(RTCPReportBlock(ssrc: ssrc, fractionLost: UInt8(lost >> 24), cumulativeLost: cum,
                                          extendedHighestSequence: try r.u32("report block"), jitter: try r.u32("report block"),
                                          lastSR: try r.u32("report block"), delaySinceLastSR: try r.u32("report block")))
        }
        return blocks
    }

    private static func parseOne(pt: UInt8, count: UInt8, body: ArraySlice<UInt8>) throws -> RTCPPacket {
        var r = ByteReader(body)
        switch pt {
        case senderReportType:
            let ssrc = try r.u32("SR"), ntp = try r.u64("SR"), rtp = try r.u32("SR"), pc = try r.u32("SR"), oc = try r.u32("SR")
            return .senderReport(RTCPSenderReport(ssrc: ssrc, ntpTime: ntp, rtpTime: rtp, packetCount: pc, octetCount: oc,
                                                  reports: try reportBlocks(&r, count)))
        case receiverReportType:
            let ssrc = try r.u32("RR")
            return .receiverReport(ssrc: ssrc, reports: try reportBlocks(&r, count))
        case sdesType:
            var chunks: [RTCPSDESChunk] = []
            for _ in 0..<count {
                let ssrc = try r.u32("SDES chunk")
                var items: [(UInt8, String)] = []
                while true {
                    let t = try r.u8("SDES item")
                    if t == 0 {
                        let used = (r.offset - body.startIndex) % 4
                        try r.skip(min((4 - used) % 4, r.remaining), "SDES padding")
                        break
                    }
                    let len = Int(try r.u8("SDES item length"))
                    items.append((t, String(decoding: try r.take(len, "SDES item text"), as: UTF8.self)))
                }
                chunks.append(RTCPSDESChunk(ssrc: ssrc, items: items))
            }
            return .sourceDescription(chunks)
        case byeType:
            var ssrcs: [UInt32] = []
            for _ in 0..<count { ssrcs.append(try r.u32("BYE ssrc")) }
            var reason: String?
            if r.remaining > 0 {
                let len = Int(try r.u8("BYE reason length"))
                reason = String(decoding: try r.take(len, "BYE reason"), as: UTF8.self)
            }
            return .bye(ssrcs: ssrcs, reason: reason)
        case rtpfbType where count == 1:
            let s = try r.u32("NACK"), m = try r.u32("NACK")
            guard r.remaining % 4 == 0, r.remaining > 0 else { throw WireError("RTCP NACK: FCI length \(r.remaining) is not a positive multiple of 4") }
            var lost: [UInt16] = []
            while r.remaining > 0 {
                let pid = try r.u16("NACK"), blp = try r.u16("NACK")
                lost.append(pid)
                for bit in 0..<16 where blp & (1 << bit) != 0 { lost.append(pid &+ UInt16(bit + 1)) }
            }
            return .nack(senderSSRC: s, mediaSSRC: m, lost: lost)
        case rtpfbType where count == 15:
            return .transportCC(try parseTransportCC(&r))
        case psfbType where count == 1:
            return .pli(senderSSRC: try r.u32("PLI"), mediaSSRC: try r.u32("PLI"))
        case psfbType where count == 4:
            let s = try r.u32("FIR")
            _ = try r.u32("FIR")
            guard r.remaining % 8 == 0 else { throw WireError("RTCP FIR: FCI length \(r.remaining) is not a multiple of 8") }
            var entries: [RTCPPacket.FIREntry] = []
            while r.remaining > 0 {
                let ssrc = try r.u32("FIR"), seq = try r.u8("FIR")
                try r.skip(3, "FIR")
                entries.append(.init(ssrc: ssrc, sequence: seq))
            }
            return .fir(senderSSRC: s, entries: entries)
        case xrType:
            return try parseExtendedReport(&r)
        default:
            return .other(packetType: pt, count: count, payload: Array(body))
        }
    }

    /// XR (RFC 3611 §3): each block's length is checked against the packet's; blocks of other types are skipped.
    private static func parseExtendedReport(_ r: inout ByteReader) throws -> RTCPPacket {
        let ssrc = try r.u32("XR sender SSRC")
        var blocks: [RTCPXRBlock] = []
        while r.remaining > 0 {
            guard r.remaining >= 4 else { throw WireError("RTCP XR: \(r.remaining) bytes left, shorter than a block header") }
            let type = try r.u8("XR block type")
            try r.skip(1, "XR block")
            let length = Int(try r.u16("XR block length")) * 4
            guard length <= r.remaining else { throw WireError("RTCP XR: block type \(type) of \(length) bytes, \(r.remaining) left") }
            switch type {
            case rrtrBlockType:
                guard length == 8 else { throw WireError("RTCP XR: RRTR block of \(length) bytes, expected 8") }
                blocks.append(.receiverReferenceTime(ntp: try r.u64("XR RRTR")))
            case dlrrBlockType:
                guard length % 12 == 0 else { throw WireError("RTCP XR: DLRR block of \(length) bytes, not a multiple of 12") }
                var subs: [RTCPDLRRSubBlock] = []
                subs.reserveCapacity(length / 12)
                for _ in 0..<length / 12 {
                    subs.append(RTCPDLRRSubBlock(ssrc: try r.u32("XR DLRR"), lastRR: try r.u32("XR DLRR"), delaySinceLastRR: try r.u32("XR DLRR")))
                }
                blocks.append(.dlrr(subs))
            default:
                try r.skip(length, "XR block")
            }
        }
        return .extendedReport(senderSSRC: ssrc, blocks: blocks)
    }

    private static func parseTransportCC(_ r: inout ByteReader) throws -> TransportCCFeedback {
        let s = try r.u32("TWCC"), m = try r.u32("TWCC")
        let base = try r.u16("TWCC base sequence")
        let statusCount = Int(try r.u16("TWCC status count"))
        var ref = Int32(bitPattern: try r.u24("TWCC reference time"))
        if ref & 0x0080_0000 != 0 { ref -= 0x0100_0000 }
        let fbCount = try r.u8("TWCC feedback count")
        var symbols: [UInt8] = []
        symbols.reserveCapacity(statusCount)
        while symbols.count < statusCount {
            let chunk = try r.u16("TWCC packet chunk")
            if chunk & 0x8000 == 0 {
                let sym = UInt8((chunk >> 13) & 3), run = Int(chunk & 0x1FFF)
                guard run > 0 else { throw WireError("TWCC: run-length chunk with length 0") }
                symbols.append(contentsOf: repeatElement(sym, count: min(run, statusCount - symbols.count)))
            } else if chunk & 0x4000 == 0 {
                for i in 0..<14 where symbols.count < statusCount { symbols.append(UInt8((chunk >> (13 - i)) & 1)) }
            } else {
                for i in 0..<7 where symbols.count < statusCount { symbols.append(UInt8((chunk >> (12 - 2 * i)) & 3)) }
            }
        }
        var deltas: [Int32?] = []
        deltas.reserveCapacity(statusCount)
        for sym in symbols {
            switch sym {
            case 0: deltas.append(nil)
            case 1: deltas.append(Int32(try r.u8("TWCC small delta")))
            case 2: deltas.append(Int32(Int16(bitPattern: try r.u16("TWCC large delta"))))
            default: throw WireError("TWCC: reserved packet status symbol 3")
            }
        }
        return TransportCCFeedback(senderSSRC: s, mediaSSRC: m, baseSequence: base, referenceTime: ref, feedbackCount: fbCount, deltas: deltas)
    }

    // MARK: building

    /// Serializes packets into one compound packet.
    public static func serialize(_ packets: [RTCPPacket]) -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        for p in packets { append(p, to: &w) }
        return w.bytes
    }

    private static func header(_ w: inout ByteWriter, count: UInt8, pt: UInt8) -> Int {
        let start = w.count
        w.u8(0x80 | (count & 0x1F)); w.u8(pt); w.u16(0)
        return start
    }

    private static func finish(_ w: inout ByteWriter, _ start: Int) {
        let pad = (4 - (w.count - start) % 4) % 4
        w.zeros(pad)
        w.set16(at: start + 2, UInt16(truncatingIfNeeded: (w.count - start) / 4 - 1))
    }

    private static func writeBlocks(_ w: inout ByteWriter, _ blocks: [RTCPReportBlock]) {
        for b in blocks.prefix(31) {
            w.u32(b.ssrc)
            w.u32(UInt32(b.fractionLost) << 24 | (UInt32(bitPattern: b.cumulativeLost) & 0x00FF_FFFF))
            w.u32(b.extendedHighestSequence); w.u32(b.jitter); w.u32(b.lastSR); w.u32(b.delaySinceLastSR)
        }
    }

    /// Appends one packet to `w`.
    public static func append(_ p: RTCPPacket, to w: inout ByteWriter) {
        switch p {
        case .senderReport(let sr):
            let s = header(&w, count: UInt8(min(sr.reports.count, 31)), pt: senderReportType)
            w.u32(sr.ssrc); w.u64(sr.ntpTime); w.u32(sr.rtpTime); w.u32(sr.packetCount); w.u32(sr.octetCount)
            writeBlocks(&w, sr.reports)
            finish(&w, s)
        case .receiverReport(let ssrc, let reports):
            let s = header(&w, count: UInt8(min(reports.count, 31)), pt: receiverReportType)
            w.u32(ssrc); writeBlocks(&w, reports)
            finish(&w, s)
        case .sourceDescription(let chunks):
            let s = header(&w, count: UInt8(min(chunks.count, 31)), pt: sdesType)
            for c in chunks.prefix(31) {
                let cs = w.count
                w.u32(c.ssrc)
                for item in c.items {
                    let t = Array(item.text.utf8.prefix(255))
                    w.u8(item.type); w.u8(UInt8(t.count)); w.append(t)
                }
                w.u8(0)
                w.zeros((4 - (w.count - cs) % 4) % 4)
            }
            finish(&w, s)
        case .bye(let ssrcs, let reason):
            let s = header(&w, count: UInt8(min(ssrcs.count, 31)), pt: byeType)
            for x in ssrcs.prefix(31) { w.u32(x) }
            if let reason {
                let t = Array(reason.utf8.prefix(255))
                w.u8(UInt8(t.count)); w.append(t)
            }
            finish(&w, s)
        case .nack(let sender, let media, let lost):
            let s = header(&w, count: 1, pt: rtpfbType)
            w.u32(sender); w.u32(media)
            for (pid, blp) in nackPairs(lost) { w.u16(pid); w.u16(blp) }
            finish(&w, s)
        case .pli(let sender, let media):
            let s = header(&w, count: 1, pt: psfbType)
            w.u32(sender); w.u32(media)
            finish(&w, s)
        case .fir(let sender, let entries):
            let s = header(&w, count: 4, pt: psfbType)
            w.u32(sender); w.u32(0)
            for e in entries { w.u32(e.ssrc); w.u8(e.sequence); w.zeros(3) }
            finish(&w, s)
        case .transportCC(let fb):
            let s = header(&w, count: 15, pt: rtpfbType)
            writeTransportCC(fb, &w)
            finish(&w, s)
        case .extendedReport(let ssrc, let blocks):
            let s = header(&w, count: 0, pt: xrType)
            w.u32(ssrc)
            for b in blocks {
                switch b {
                case .receiverReferenceTime(let ntp):
                    w.u8(rrtrBlockType); w.u8(0); w.u16(2); w.u64(ntp)
                case .dlrr(let subs):
                    // A block's length is 16 bits of words: 21845 sub-blocks at most.
                    let kept = subs.prefix(0xFFFF / 3)
                    w.u8(dlrrBlockType); w.u8(0); w.u16(UInt16(kept.count * 3))
                    for d in kept { w.u32(d.ssrc); w.u32(d.lastRR); w.u32(d.delaySinceLastRR) }
                }
            }
            finish(&w, s)
        case .other(let pt, let count, let payload):
            let s = header(&w, count: count, pt: pt)
            w.append(payload)
            finish(&w, s)
        }
    }

    /// Packs lost sequence numbers into (PID, BLP) pairs; handles wrap-around.
    public static func nackPairs(_ lost: [UInt16]) -> [(UInt16, UInt16)] {
        var pairs: [(UInt16, UInt16)] = []
        for seq in lost {
            if let last = pairs.last {
                let d = seq &- last.0
                if d >= 1 && d <= 16 { pairs[pairs.count - 1].1 |= 1 << (d - 1); continue }
            }
            pairs.append((seq, 0))
        }
        return pairs
    }

    private static func symbol(_ d: Int32?) -> UInt8 {
        guard let d else { return 0 }
        return (0...255).contains(d) ? 1 : 2
    }

    private static func writeTransportCC(_ fb: TransportCCFeedback, _ w: inout ByteWriter) {
        w.u32(fb.senderSSRC); w.u32(fb.mediaSSRC)
        w.u16(fb.baseSequence); w.u16(UInt16(min(fb.deltas.count, 0xFFFF)))
        w.u24(UInt32(bitPattern: fb.referenceTime) & 0x00FF_FFFF); w.u8(fb.feedbackCount)
        let syms = fb.deltas.prefix(0xFFFF).map(symbol)
        var i = 0
        while i < syms.count {
            var run = 1
            while i + run < syms.count && syms[i + run] == syms[i] && run < 0x1FFF { run += 1 }
            if run >= 7 {
                w.u16(UInt16(syms[i]) << 13 | UInt16(run))
                i += run
            } else {
                var chunk: UInt16 = 0xC000
                for k in 0..<7 where i + k < syms.count { chunk |= UInt16(syms[i + k]) << (12 - 2 * k) }
                w.u16(chunk)
                i += 7
            }
        }
        for d in fb.deltas.prefix(0xFFFF) {
            guard let d else { continue }
            if (0...255).contains(d) { w.u8(UInt8(d)) } else { w.u16(UInt16(bitPattern: Int16(clamping: d))) }
        }
    }
}
