import OTBase
@testable import OTWire
import XCTest

final class JSONValueTests: XCTestCase {
    func testParsesEveryKindAndKeepsIntegersApartFromDoubles() throws {
        let v = try JSONValue.parse(Array(#"{"a":1,"b":1.5,"c":"x/y","d":[true,null],"e":{"f":-7}}"#.utf8))
        XCTAssertEqual(v["a"], .int(1))
        XCTAssertEqual(v["b"], .double(1.5))
        XCTAssertEqual(v["c"]?.stringValue, "x/y")
        XCTAssertEqual(v["d"], .array([.bool(true), .null]))
        XCTAssertEqual(v["e"]?["f"]?.doubleValue, -7)
        XCTAssertNil(v["missing"])
        XCTAssertNil(JSONValue.string("s")["a"])
    }

    func testSerializesWithSortedKeysAndRoundTrips() throws {
        let v: JSONValue = ["z": 1, "a": ["k": "v/w", "n": 2.25], "m": [false, nil]]
        let text = String(decoding: v.serialized(), as: UTF8.self)
        XCTAssertEqual(text, #"{"a":{"k":"v/w","n":2.25},"m":[false,null],"z":1}"#)
        XCTAssertEqual(try JSONValue.parse(v.serialized()), v)
    }

    func testMalformedInputThrowsAClearError() {
        for bad in ["", "{", #"{"a":}"#, "[1 2]", "nul", "\u{FF}"] {
            XCTAssertThrowsError(try JSONValue.parse(Array(bad.utf8)), bad) { XCTAssertTrue($0 is WireError, "\($0)") }
        }
    }

    func testJWTClaimsSurviveSigningAndVerifying() throws {
        let token = try JWT.sign(claims: ["iss": .int(4711), "exp": .int(2_000_000_000), "s": "a b"], secret: "k")
        let claims = try JWT.verify(token, secret: "k")
        XCTAssertEqual(JWT.string(claims["iss"]), "4711")
        XCTAssertEqual(JWT.seconds(claims["exp"]), 2_000_000_000)
        XCTAssertEqual(claims["s"], "a b")
        XCTAssertThrowsError(try JWT.verify(token, secret: "other"))
    }
}
