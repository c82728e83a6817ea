import OTTransport

/// The product's SRTPContext keyed from DTLS keying material, with the small call shapes these tests use.
final class InteropSRTP {
    private let context: SRTPContext
    private(set) var lastError: SRTPError?

    /// `outbound` only documents the direction a test uses this instance for: SRTPContext holds both.
    init?(_ k: SRTPKeyingMaterial, outbound: Bool) {
        let keys = SRTPKeys(local: k.localKey + k.localSalt, remote: k.remoteKey + k.remoteSalt)
        guard let c = try? SRTPContext(profile: k.profile, keys: keys) else { return nil }
        context = c
    }

    func protect(_ rtp: [UInt8]) -> [UInt8]? {
        var p = rtp
        return (try? context.protectRTP(&p)) != nil ? p : nil
    }

    func protectRTCP(_ rtcp: [UInt8]) -> [UInt8]? {
        var p = rtcp
        return (try? context.protectRTCP(&p)) != nil ? p : nil
    }

    func unprotect(_ srtp: [UInt8], rtcp: Bool) -> [UInt8]? {
        var p = srtp
        do {
            if rtcp { try context.unprotectRTCP(&p) } else { try context.unprotectRTP(&p) }
            lastError = nil
            return p
        } catch let e as SRTPError {
            lastError = e
            return nil
        } catch {
            return nil
        }
    }
}
