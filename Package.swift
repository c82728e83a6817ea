// swift-tools-version:6.2
// libotsession: a real-time video session SDK for Linux with a stable C ABI.
// One target per layer; dependencies point down the list (see docs/architecture.md).
import PackageDescription

/// The per-packet targets' release builds leave out Swift's run-time exclusivity checks (`swift_beginAccess` on every
/// class-property and global access: 2.8 % of the router's IO thread at N = 16 in `perf`, docs/benchmarks.md "Router"). Debug
/// builds, which the tests run, keep them, so an overlapping access still traps there. Tools version 6.2: from Swift 6.2
/// on SwiftPM accepts `unsafeFlags` in a version-based dependency when its manifest says 6.2 or later (with 6.0 a
/// package depending on this one `from:` a tag failed: "the target ... contains unsafe build flags").
let perPacket: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "libotsession",
    products: [
        // libotsession.so: the C ABI. Built for release by `make lib` (static stdlib, SONAME, ot_* only).
        .library(name: "otsession", type: .dynamic, targets: ["OTCABI"]),
        // The native Swift API.
        .library(name: "OTSession", targets: ["OTSession"]),
        .library(name: "OTServer", targets: ["OTServer"]),
        .executable(name: "ot-server", targets: ["ot-server"]),
        .executable(name: "ot-demo", targets: ["ot-demo"]),
        .executable(name: "ot-bench", targets: ["ot-bench"]),
        .executable(name: "ot-loadtest", targets: ["ot-loadtest"]),
    ],
    targets: [
        // C system libraries from Debian's -dev packages.
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CVPX", pkgConfig: "vpx", providers: [.apt(["libvpx-dev"])]),
        .systemLibrary(name: "CSRTP", pkgConfig: "libsrtp2", providers: [.apt(["libsrtp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        // libyuv: Debian's libyuv-dev ships no .pc file, so the module map links it by name (`link "yuv"`).
        .systemLibrary(name: "CYUV", providers: [.apt(["libyuv-dev"])]),
        // libpulse: PulseAudio (and PipeWire through pipewire-pulse) capture and playout.
        .systemLibrary(name: "CPulse", pkgConfig: "libpulse", providers: [.apt(["libpulse-dev"])]),
        // Linux epoll/eventfd headers for the TCP event loop.
        .systemLibrary(name: "CEpoll"),
        // C functions Swift cannot call directly (variadic ctl functions, macros).
        .target(name: "COTShims", dependencies: ["COpus", "CVPX", "CSRTP", "COpenSSL"]),
        // C types of the public ABI (handles, callback structs, status codes).
        .target(name: "COTABI"),

        // What every layer shares: logging, time, byte readers and writers.
        .target(name: "OTBase", dependencies: ["COTShims"]),
        // Byte formats only: RTP/RTCP, STUN, SDP, VP8/Opus payloads, HTTP, WebSocket, JSON messages, tokens.
        .target(name: "OTWire", dependencies: ["OTBase", "COTShims", "COpenSSL"], swiftSettings: perPacket),
        // RTP stream processors, sans-IO: sequence unwrapping, receive statistics, NACK generation and answers over a
        // send history, RTX, RED/ULPFEC, transport-wide CC recording, keyframe-request pacing; RTPSession chains them.
        .target(name: "OTRTP", dependencies: ["OTWire", "OTBase"], swiftSettings: perPacket),
        // Sans-IO protocol engines and the socket driver.
        .target(name: "OTTransport", dependencies: ["OTRTP", "OTWire", "COTShims", "CSRTP", "COpenSSL",
                                                  "CEpoll"], swiftSettings: perPacket),
        // Frames, converters, codecs, jitter buffers, capturers, audio devices.
        .target(name: "OTMedia", dependencies: ["OTRTP", "OTWire", "COTShims", "COpus", "CVPX", "COpenSSL",
                                               "CPNG", "CYUV", "CPulse"]),
        // The Swift API users import: Session, Publisher, Subscriber.
        .target(name: "OTSession", dependencies: ["OTTransport", "OTRTP", "OTMedia", "OTWire"]),
        // The session server: REST API, WebSocket signaling, media router.
        .target(name: "OTServer", dependencies: ["OTTransport", "OTRTP", "OTWire"], swiftSettings: perPacket, plugins: ["EmbedWebAssets"]),
        // Build-time embedding of bindings/js (otsession.js, the demo page) into OTServer, which serves them under /js/.
        .plugin(name: "EmbedWebAssets", capability: .buildTool(), dependencies: ["ot-embed-web-files"]),
        .executableTarget(name: "ot-embed-web-files", path: "Plugins/EmbedWebAssetsTool"),
        // The C ABI of libotsession.so: handle registry, argument checks, callback structs.
        .target(name: "OTCABI", dependencies: ["COTABI", "OTSession", "OTServer", "CEpoll"]),

        .executableTarget(name: "ot-server", dependencies: ["OTServer"]),
        .executableTarget(name: "ot-demo", dependencies: ["OTSession", "OTServer", "OTMedia", "OTWire", "OTBase"]),
        .target(name: "COTAllocCounter"),
        // `ot-bench router --floor`'s baseline: the least an SRTP SFU does per packet, in C (not part of the library).
        .target(name: "COTBenchFloor", dependencies: ["COTShims", "CSRTP"]),
        .target(name: "COTHeapUsage"),
        .executableTarget(name: "ot-bench", dependencies: ["OTMedia", "OTRTP", "OTTransport", "OTWire", "OTServer", "OTSession", "COTShims", "CVPX", "COpus", "CSRTP", "COTAllocCounter", "COTHeapUsage", "COTBenchFloor"]),
        .executableTarget(name: "ot-fuzz-rtp-vp8", dependencies: ["OTWire"], path: "Fuzz/rtp_vp8"),
        .executableTarget(name: "ot-fuzz-rtp-vp9", dependencies: ["OTWire"], path: "Fuzz/rtp_vp9"),
        .executableTarget(name: "ot-loadtest", dependencies: ["OTSession", "OTServer"]),
        .executableTarget(name: "ot-fuzz-wire", dependencies: ["OTWire"], path: "Fuzz/wire"),
        .executableTarget(name: "ot-fuzz-control", dependencies: ["OTWire"], path: "Fuzz/control"),

        .testTarget(name: "OTBaseTests", dependencies: ["OTBase"]),
        .testTarget(name: "OTWireTests", dependencies: ["OTWire"]),
        .testTarget(name: "OTRTPTests", dependencies: ["OTRTP", "OTWire", "OTBase"]),
        .testTarget(name: "OTTransportTests", dependencies: ["OTTransport", "OTRTP", "OTMedia", "OTTestSupport"]),
        .testTarget(name: "OTMediaTests", dependencies: ["OTMedia", "OTRTP", "OTTransport", "OTTestSupport"]),
        // Test support shared by test targets: session recorders and waits, a coturn launcher, a TCP proxy that cuts connections.
        .target(name: "OTTestSupport", dependencies: ["OTSession", "COTAllocCounter"], path: "Tests/OTTestSupport"),
        .testTarget(name: "OTServerTests", dependencies: ["OTServer", "OTRTP", "OTSession", "OTTestSupport"]),
        .testTarget(name: "OTSessionTests", dependencies: ["OTSession", "OTRTP", "OTServer", "OTTestSupport"]),
        .testTarget(name: "OTCABITests", dependencies: ["OTCABI", "COTABI"]),
    ]
)
