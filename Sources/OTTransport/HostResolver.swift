#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import OTBase
import OTWire
import Synchronization

/// Host names to addresses with the system resolver (`getaddrinfo`: /etc/hosts, DNS, IPv4 and IPv6 in the order
/// RFC 6724 prefers), always on a worker thread: a slow or silent DNS server never holds an IO thread. IP literals
/// are answered at once, without a lookup.
public enum HostResolver {
    public enum SocketKind: Sendable { case stream, datagram }

    private static let queue = DispatchQueue(label: "otsession.dns", attributes: .concurrent)
    private static let counts = Mutex<[String: Int]>([:])

    /// Resolves `host` (a name, an IPv4 address, or an IPv6 address with or without brackets); `completion` runs on
    /// a worker thread (at once on the caller's for an IP literal) with the addresses, or `.connectionFailed`
    /// naming the host and the resolver's reason.
    public static func resolve(_ host: String, port: UInt16, kind: SocketKind = .stream,
                               completion: @escaping @Sendable (Result<[TransportAddress], OTError>) -> Void) {
        if let ip = IPAddress(host) { completion(.success([TransportAddress(ip: ip, port: port)])); return }
        queue.async { completion(resolveNow(host, port: port, kind: kind)) }
    }

    /// Resolves several names at once (in parallel, on worker threads) and calls `completion` on a worker thread with
    /// the addresses found by name (lowercased) and a message for each name that failed or took longer than `timeout`.
    public static func resolveAll(_ hosts: Set<String>, timeout: Duration = .seconds(5),
                                  completion: @escaping @Sendable ([String: [IPAddress]], [String]) -> Void) {
        let found = Mutex<([String: [IPAddress]], [String: String])>(([:], [:]))
        let group = DispatchGroup()
        for h in hosts {
            group.enter()
            resolve(h, port: 0, kind: .datagram) { r in
                found.withLock {
                    switch r {
                    case .success(let a): $0.0[h.lowercased()] = a.map(\.ip)
                    case .failure(let e): $0.1[h.lowercased()] = e.message
                    }
                }
                group.leave()
            }
        }
        queue.async {
            _ = group.wait(timeout: .now() + .microseconds(Int(timeout.microseconds)))
            let (addresses, errors) = found.withLock { $0 }
            var failures = hosts.map { $0.lowercased() }.filter { addresses[$0] == nil }.map { errors[$0] ?? "cannot resolve \($0): no answer within \(timeout)" }
            failures.sort()
            completion(addresses, failures)
        }
    }

    /// How many lookups of `host` went to the system resolver in this process (literals are not looked up).
    public static func lookups(of host: String) -> Int { counts.withLock { $0[host.lowercased(), default: 0] } }

    /// Blocking: for worker threads only.
    public static func resolveNow(_ host: String, port: UInt16, kind: SocketKind = .stream) -> Result<[TransportAddress], OTError> {
        if let ip = IPAddress(host) { return .success([TransportAddress(ip: ip, port: port)]) }
        counts.withLock { $0[host.lowercased(), default: 0] += 1 }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = kind == .stream ? Int32(SOCK_STREAM.rawValue) : Int32(SOCK_DGRAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0, let first = list else {
            let why = rc == EAI_SYSTEM ? "errno \(errno)" : String(cString: gai_strerror(rc))
            return .failure(OTError(.connectionFailed, "cannot resolve \(host): \(why)"))
        }
        defer { freeaddrinfo(list) }
        var out: [TransportAddress] = []
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let ai = p {
            defer { p = ai.pointee.ai_next }
            guard let sa = ai.pointee.ai_addr, var a = UDPDriver.address(from: sa) else { continue }
            a.port = port
            if !out.contains(a) { out.append(a) }
        }
        return out.isEmpty ? .failure(OTError(.connectionFailed, "cannot resolve \(host): no address")) : .success(out)
    }
}
