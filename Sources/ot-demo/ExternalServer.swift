import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OTBase
import Synchronization
import OTServer
import OTWire

/// Talking to an external session server (e.g. `ot-server`): its REST API and client tokens.
enum ExternalServer {
    /// `http://host:port` for the REST API, from the `--server` URL (`ws://` becomes `http://`, the path is dropped).
    static func restBase(_ url: String) throws -> String {
        guard var c = URLComponents(string: url), c.host != nil else { throw OTError(.invalidParameter, "bad server URL \(url)") }
        c.scheme = c.scheme == "ws" ? "http" : c.scheme == "wss" ? "https" : c.scheme
        c.path = ""; c.query = nil
        guard let s = c.string else { throw OTError(.invalidParameter, "bad server URL \(url)") }
        return s
    }

    /// Creates a session through `POST /session/create` (as the server SDKs do) and returns its id.
    static func createSession(server: String, project: Project, relayed: Bool) throws -> String {
        guard let url = URL(string: try restBase(server) + "/session/create") else { throw OTError(.invalidParameter, "bad server URL \(server)") }
        var req = URLRequest(url: url, timeoutInterval: 10)
        req.httpMethod = "POST"
        req.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        req.setValue(try ProjectAuth.mint(apiKey: project.apiKey, secret: project.secret, now: wallClockMillis() / 1000),
                     forHTTPHeaderField: "X-OPENTOK-AUTH")
        req.httpBody = Data("p2p.preference=\(relayed ? "enabled" : "disabled")".utf8)
        let reply = Mutex<(Data?, Int, String?)>((nil, 0, nil))
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: req) { data, response, error in
            reply.withLock { $0 = (data, (response as? HTTPURLResponse)?.statusCode ?? 0, error.map { "\($0.localizedDescription)" }) }
            done.signal()
        }.resume()
        guard done.wait(timeout: .now() + 15) == .success else { throw OTError(.connectionTimedOut, "POST \(url) timed out") }
        let (data, status, error) = reply.withLock { $0 }
        if let error { throw OTError(.connectionFailed, "POST \(url): \(error)") }
        let body = data.map { String(decoding: $0, as: UTF8.self) } ?? ""
        guard status == 200 else { throw OTError(.connectionFailed, "POST \(url): HTTP \(status) \(body)") }
        guard let list = try? JSONSerialization.jsonObject(with: data ?? Data()) as? [[String: Any]],
              let sid = list.first?["session_id"] as? String else {
            throw OTError(.connectionFailed, "POST \(url): no session_id in \(body)")
        }
        return sid
    }

    /// A publisher-role client token for `sessionId`, signed with the project's secret.
    static func token(project: Project, sessionId: String, data: String) throws -> String {
        let now = wallClockMillis() / 1000
        return try ClientToken(apiKey: project.apiKey, sessionId: sessionId, role: .publisher, createTime: now,
                               expireTime: now + 3600, connectionData: data).mint(secret: project.secret)
    }
}
