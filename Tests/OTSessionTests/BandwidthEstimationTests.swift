import Foundation
import OTBase
import OTMedia
import OTServer
import OTSession
import OTWire
import OTTestSupport
import XCTest

/// Transport-wide feedback through the real session stack (loopback sockets, real time): the receiving side of the
/// publisher's connection (the media router, or the relayed subscriber) sends feedback, the publisher's estimate
/// appears in its stats and drives the encoder's target. Nothing here is a timing assertion; the estimator's
/// behaviour under a bottleneck is tested on the emulator (BandwidthEstimatorTests, PeerConnectionCongestionTests).
final class BandwidthEstimationTests: XCTestCase {
    private func subscribeAndWaitForEstimate(relayed: Bool) throws -> (PublisherStats, String) {
        let server = try TestServer(routed: !relayed)
        let t = try server.publishTone(try server.session(relayed: relayed))
        defer { t.disconnect() }
        let (publisher, pubRec, stream) = (t.publisher, t.pubRec, t.stream)
        _ = try t.subscribeB(frames: 10)
        pubRec.wait("a bandwidth estimate in the publisher's stats") { $0.publisherStats.last?.availableOutgoingBitrate != nil }
        // The estimate and the encoder's target are updated one after the other on the publisher's queue: wait for
        // a snapshot taken after both (a busy machine may catch them in between).
        var stats = publisher.stats
        let until = Date().addingTimeInterval(10)
        while stats.targetBitrateKbps != (stats.availableOutgoingBitrate ?? 0) / 1000 && Date() < until {
            usleep(50_000)
            stats = publisher.stats
        }
        if let router = server.router {
            let uplink = try XCTUnwrap(router.publisherStats(streamId: stream.id))
            XCTAssertGreaterThan(uplink.transportFeedbackSent, 0, "the router sends transport-wide feedback for the uplink")
        }
        return (stats, publisher.rtcStatsReport())
    }

    private func check(_ stats: PublisherStats, _ report: String, label: String) throws {
        let estimate = try XCTUnwrap(stats.availableOutgoingBitrate, label)
        XCTAssertGreaterThanOrEqual(estimate, 100_000, "\(label): within the publisher's bounds")
        XCTAssertLessThanOrEqual(estimate, 2_000_000, label)
        XCTAssertEqual(stats.targetBitrateKbps, estimate / 1000, "\(label): the encoder follows the estimate")
        XCTAssertTrue(["normal", "overusing", "underusing"].contains(stats.bandwidthUsage ?? ""), "\(label): \(stats)")
        XCTAssertTrue(report.contains("\"candidate-pair\""), report)
        XCTAssertTrue(report.contains("\"availableOutgoingBitrate\""), report)
    }

    func testRoutedPublisherEstimatesFromTheRoutersFeedback() throws {
        let (stats, report) = try subscribeAndWaitForEstimate(relayed: false)
        try check(stats, report, label: "routed")
    }

    func testRelayedPublisherEstimatesFromTheSubscribersFeedback() throws {
        let (stats, report) = try subscribeAndWaitForEstimate(relayed: true)
        try check(stats, report, label: "relayed")
    }
}
