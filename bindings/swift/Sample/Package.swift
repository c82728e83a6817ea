// swift-tools-version:6.0
// A program outside the libotsession package that uses its Swift API through the `OTSession` product only, as an app
// would: `swift build` here proves every type of the public API is reachable from `import OTSession`.
import PackageDescription

let package = Package(
    name: "OTSessionSample",
    dependencies: [.package(name: "libotsession", path: "../../..")],
    targets: [
        .executableTarget(name: "ot-swift-sample", dependencies: [.product(name: "OTSession", package: "libotsession")]),
    ]
)
