import OTBase
@testable import OTServer
import OTWire

/// Connects `socket` to session `sid` of `project` with a fresh client token (created at `nowMillis`), as a client's
/// `connect` message does; returns the router's outputs (the first is `connected`, or the refusal).
func connectSocket(_ r: SignalingRouter, _ project: Project, sid: String, socket: Int, role: SessionRole = .publisher,
                   now: Instant = Instant(micros: 1), nowMillis: Int64) throws -> [SignalingRouter.Output] {
    let token = try ClientToken(apiKey: project.apiKey, sessionId: sid, role: role, createTime: nowMillis / 1000).mint(secret: project.secret)
    return r.receive(socket: socket, .connect(ConnectRequest(id: 1, apiKey: project.apiKey, sessionId: sid, token: token)), now: now, nowMillis: nowMillis)
}
