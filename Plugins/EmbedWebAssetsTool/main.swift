// ot-embed-web-files OUTPUT.swift FILE...: writes a Swift source declaring `EmbeddedWebFiles.files`, each file's
// name and text as a raw string literal (run by the EmbedWebAssets build plugin; not installed).
import Foundation

let args = CommandLine.arguments
guard args.count >= 3 else {
    FileHandle.standardError.write(Data("usage: ot-embed-web-files OUTPUT.swift FILE...\n".utf8))
    exit(2)
}

/// A raw string literal holding `text` exactly: enough `#`s that neither the closing delimiter nor an escape
/// can occur inside.
func literal(_ text: String) -> String {
    var hashes = 1
    while text.contains("\"\"\"" + String(repeating: "#", count: hashes)) || text.contains("\\" + String(repeating: "#", count: hashes)) {
        hashes += 1
    }
    let h = String(repeating: "#", count: hashes)
    // The newline just before the closing delimiter is not part of the literal, so the value is `text` exactly.
    return "\(h)\"\"\"\n\(text)\n\"\"\"\(h)"
}

var out = """
// Generated at build time by the EmbedWebAssets plugin from bindings/js; do not edit.
enum EmbeddedWebFiles {
    /// Name and text of each file of bindings/js the server serves.
    static let files: [(name: String, text: String)] = [

"""
for path in args.dropFirst(2) {
    guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
        FileHandle.standardError.write(Data("ot-embed-web-files: cannot read \(path) as UTF-8\n".utf8))
        exit(1)
    }
    let name = (path as NSString).lastPathComponent
    out += "        (\"\(name)\", \(literal(text.replacingOccurrences(of: "\r\n", with: "\n")))),\n"
}
out += "    ]\n}\n"
do { try out.write(toFile: args[1], atomically: true, encoding: .utf8) } catch {
    FileHandle.standardError.write(Data("ot-embed-web-files: cannot write \(args[1]): \(error)\n".utf8))
    exit(1)
}
