import OTBase
@testable import OTServer
import OTWire
import XCTest

/// The REST API answered without sockets (a request and the time in, a response and the signaling router's outputs
/// out), and the signaling router's domain errors mapped to HTTP statuses and to the protocol's error codes.
final class RESTAPITests: XCTestCase {
    let project = Project.generate()
    let ms: Int64 = 1_800_000_000_000

    func request(_ method: String, _ path: String, body: String = "", auth: String? = nil) throws -> HTTPRequest {
        let token = try auth ?? ProjectAuth.mint(apiKey: project.apiKey, secret: project.secret, now: ms / 1000)
        return HTTPRequest(method: method, target: path, headers: HTTPHeaders([("X-OPENTOK-AUTH", token)]), body: Array(body.utf8))
    }

    func answer(_ r: SignalingRouter, _ req: HTTPRequest, stats: ((String) -> [UInt8])? = nil) -> RESTAPI.Answer {
        RESTAPI.answer(req, router: r, stats: stats, nowMillis: ms)
    }

    func body(_ a: RESTAPI.Answer) -> JSONValue? { try? JSONValue.parse(a.response.body) }

    func testSignalingErrorsMapToHTTPStatusesAndProtocolCodes() {
        let table: [(SignalingError, Int, OTErrorCode)] = [
            (.sessionNotFound("s"), 404, .invalidSession),
            (.connectionNotFound("c"), 404, .invalidParameter),
            (.streamNotFound("st"), 404, .serverCannotFindStream),
            (.badSignal(OTError(.signalDataTooLong)), 413, .signalDataTooLong),
            (.badSignal(OTError(.signalTypeTooLong)), 400, .signalTypeTooLong),
            (.badSignal(OTError(.invalidSignalType)), 400, .invalidSignalType),
            (.invalidArgument("stream x not found"), 400, .invalidParameter),
        ]
        for (error, status, code) in table {
            XCTAssertEqual(RESTAPI.status(for: error), status, "\(error)")
            XCTAssertEqual(error.protocolCode, code, "\(error)")
            XCTAssertEqual(error.otError.code, code, "\(error)")
        }
    }

    func testCreateSessionWithTheProjectJWTRegistersItInTheRouter() throws {
        let r = SignalingRouter(projects: [project])
        let a = answer(r, try request("POST", "/session/create", body: "p2p.preference=enabled"))
        XCTAssertEqual(a.response.status, 200)
        XCTAssertEqual(a.response.headers["Content-Type"], "application/json")
        let sid = try XCTUnwrap(body(a)?.arrayValue?.first?["session_id"]?.stringValue)
        XCTAssertTrue(r.sessionExists(sid))
        XCTAssertTrue(try SessionID.parse(sid).relayed)
        XCTAssertTrue(a.outputs.isEmpty)
        let other = Project.generate()
        for bad in [try ProjectAuth.mint(apiKey: project.apiKey, secret: "00", now: ms / 1000),
                    try ProjectAuth.mint(apiKey: other.apiKey, secret: other.secret, now: ms / 1000)] {
            let refused = answer(r, try request("POST", "/session/create", auth: bad))
            XCTAssertEqual(refused.response.status, 403)
            XCTAssertEqual(body(refused)?["code"]?.doubleValue, 403)
        }
        XCTAssertEqual(answer(r, try request("GET", "/session/create")).response.status, 405)
        XCTAssertEqual(answer(r, try request("GET", "/nowhere")).response.status, 404)
    }

    func testCallsOnASessionReturnTheRoutersOutputsAndMapItsRefusals() throws {
        let r = SignalingRouter(projects: [project])
        let sid = try r.createSession(apiKey: project.apiKey, nowMillis: ms)
        let joined = try connectSocket(r, project, sid: sid, socket: 9, nowMillis: ms)
        guard case .send([9], .connected(let info))? = joined.first else { return XCTFail("not connected: \(joined)") }
        let P = "/v2/project/\(project.apiKey)/session/\(sid)"
        let signal = answer(r, try request("POST", "\(P)/connection/\(info.connection.id)/signal", body: #"{"type":"t","data":"d"}"#))
        XCTAssertEqual(signal.response.status, 204)
        XCTAssertEqual(signal.outputs, [.send([9], .signal(type: "t", data: "d", from: nil))])
        let cases: [(HTTPRequest, Int)] = [
            (try request("POST", "\(P)/connection/nope/signal", body: #"{"type":"t","data":"d"}"#), 404),
            (try request("POST", "\(P)/signal", body: #"{"type":"t","data":"\#(String(repeating: "x", count: 8193))"}"#), 413),
            (try request("POST", "\(P)/signal", body: #"{"type":"a b","data":""}"#), 400),
            (try request("GET", "\(P)/stream/nope"), 404),
            (try request("POST", "\(P)/stream/nope/mute"), 404),
            (try request("PUT", "\(P)/stream", body: #"{"items":[{"id":"nope","layoutClassList":["a"]}]}"#), 400),
            (try request("DELETE", "\(P)/connection/nope"), 404),
            (try request("GET", "/v2/project/\(project.apiKey)/session/2_nope/stream"), 404),
            (try request("POST", "\(P)/signal", body: "[1]"), 400),
        ]
        for (req, status) in cases {
            let a = answer(r, req)
            XCTAssertEqual(a.response.status, status, "\(req.method) \(req.target)")
            XCTAssertEqual(body(a)?["code"]?.doubleValue, Double(status), "\(req.method) \(req.target)")
            XCTAssertTrue(a.outputs.isEmpty)
        }
        let kick = answer(r, try request("DELETE", "\(P)/connection/\(info.connection.id)"))
        XCTAssertEqual(kick.response.status, 204)
        XCTAssertTrue(kick.outputs.contains(.send([9], .disconnected(reason: "forceDisconnected"))))
        XCTAssertTrue(kick.outputs.contains(.close(9)))
        XCTAssertTrue(r.connections(in: sid).isEmpty)
    }

    func testStatsComeFromTheMediaRouterOfTheCallersProject() throws {
        let r = SignalingRouter(projects: [project])
        var asked: String?
        let a = answer(r, try request("GET", "/v2/stats"), stats: { key in asked = key; return Array(#"{"sessions":{"x":{}}}"#.utf8) })
        XCTAssertEqual(a.response.status, 200)
        XCTAssertEqual(asked, project.apiKey)
        XCTAssertNotNil(body(a)?["sessions"]?["x"])
        XCTAssertEqual(String(decoding: answer(r, try request("GET", "/v2/stats")).response.body, as: UTF8.self), #"{"sessions":{}}"#)
    }
}
