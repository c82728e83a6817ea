// Embeds the browser files of bindings/js (otsession.js and the demo page) into OTServer at build time, so that
// every build of the server (ot-server, the embedded server of libotsession.so, ot-demo) serves exactly the files
// of its own checkout, with nothing to install beside the binary and no generated file to keep in sync.
import Foundation
import PackagePlugin

@main
struct EmbedWebAssets: BuildToolPlugin {
    /// The files served under /js/ (docs/js.md).
    static let files = ["otsession.js", "demo.html"]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let dir = context.package.directoryURL.appending(path: "bindings").appending(path: "js")
        let inputs = Self.files.map { dir.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedWebFiles.swift")
        return [.buildCommand(displayName: "Embedding bindings/js into \(target.name)",
                              executable: try context.tool(named: "ot-embed-web-files").url,
                              arguments: [output.path] + inputs.map(\.path),
                              inputFiles: inputs, outputFiles: [output])]
    }
}
