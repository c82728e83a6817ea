import OTBase
import OTWire

/// A host (a DNS name, an IPv4 address or a bracketed IPv6 address) and a port, as URLs write them.
public enum HostPort {
    /// Splits `host[:port]` / `[v6][:port]`; the host is returned without brackets. Names are checked for the
    /// characters DNS allows (letters, digits, `-`, `.`, `_`).
    public static func parse(_ text: Substring, defaultPort: UInt16, context bad: (String) -> OTError) throws -> (String, UInt16) {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw bad("unclosed [ in the IPv6 address") }
            host = text[text.index(after: text.startIndex)..<close]
            guard case .v6? = IPAddress(String(host)) else { throw bad("not an IPv6 address in brackets") }
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("expected :port after ]") }
                portText = after.dropFirst()
            }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw bad("an IPv6 address must be in brackets") }
            host = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
            guard host.utf8.count <= 253, host.utf8.allSatisfy({ isNameByte($0) }) else { throw bad("bad host name") }
        }
        guard !host.isEmpty else { throw bad("no host") }
        var port = defaultPort
        if let portText {
            guard portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let p = UInt16(portText), p > 0 else { throw bad("bad port") }
            port = p
        }
        return (String(host), port)
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x2E || b == 0x5F
    }

    /// `host:port`, with brackets around an IPv6 address (a Host header, a CONNECT target).
    public static func authority(_ host: String, _ port: UInt16) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
