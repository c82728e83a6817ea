import OTWire

/// The browser files the server serves: `GET /js/otsession.js` (the browser client, docs/js.md), `GET /js/demo.html`
/// and its short name `GET /demo` (a page that joins a session given in its URL fragment). Their text is
/// bindings/js of the same checkout, embedded at build time by the EmbedWebAssets plugin (`EmbeddedWebFiles`).
enum WebAssets {
    struct Asset {
        let contentType: String
        let body: [UInt8]
    }

    /// Request path → file.
    static let byPath: [String: Asset] = {
        var out: [String: Asset] = [:]
        for f in EmbeddedWebFiles.files {
            let type = f.name.hasSuffix(".js") ? "text/javascript; charset=utf-8"
                : f.name.hasSuffix(".html") ? "text/html; charset=utf-8" : "application/octet-stream"
            out["/js/" + f.name] = Asset(contentType: type, body: Array(f.text.utf8))
        }
        out["/demo"] = out["/js/demo.html"]
        return out
    }()

    /// The response for a static file's path (GET or HEAD; other methods get 405), nil for other paths.
    static func response(to req: HTTPRequest) -> HTTPResponse? {
        guard let asset = byPath[req.path] else { return nil }
        guard req.method == "GET" || req.method == "HEAD" else {
            return HTTPResponse(status: 405, headers: HTTPHeaders([("Allow", "GET, HEAD")]))
        }
        var headers = HTTPHeaders([("Content-Type", asset.contentType), ("Cache-Control", "no-cache"),
                                   ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer")])
        if req.method == "HEAD" {
            headers.add("Content-Length", String(asset.body.count))
            return HTTPResponse(status: 200, headers: headers)
        }
        return HTTPResponse(status: 200, headers: headers, body: asset.body)
    }
}
