import OTBase
@testable import OTSession
import OTWire
import XCTest

/// The subscriber's and the routed publisher's control machines on virtual time: the seeds' subscriber events around
/// interruptions (own link, routed publisher outage), the give-up that reports the stream lost, the first connection's
/// failures, and the publisher's republish window.
final class SubscriberControlTests: XCTestCase {
    typealias Out = SubscriberControl.Output
    let t0 = Instant(micros: 1_000_000)
    let err = OTError(.subscriberWebRTC, "ICE failed")

    func events(_ out: [Out]) -> [SubscriberControl.Event] { out.compactMap { if case .event(let e) = $0 { e } else { nil } } }
    func failures(_ out: [Out]) -> [OTErrorCode] { events(out).compactMap { if case .failed(let e) = $0 { e.code } else { nil } } }

    func connected() -> SubscriberControl {
        var c = SubscriberControl(peerIdBase: "p", connectTimeout: .seconds(10))
        XCTAssertEqual(c.start(now: t0), [.open(peerId: "p-1")])
        XCTAssertEqual(c.linkConnected("p-1", now: t0), [.event(.connected)])
        XCTAssertTrue(c.isConnected)
        XCTAssertNil(c.nextDeadline)
        return c
    }

    func testOwnLinkFailureIsAnInterruptionThenReconnected() {
        var c = connected()
        // Closed, and a new connection offered at once; the interruption is announced after the settle delay.
        XCTAssertEqual(c.linkFailed("p-1", err, now: t0 + .seconds(1)), [.close(peerId: "p-1"), .open(peerId: "p-2")])
        XCTAssertFalse(c.isConnected)
        XCTAssertEqual(c.nextDeadline, t0 + .seconds(1) + SubscriberControl.settleDelay)
        // That attempt fails too: the next one waits 500 ms.
        XCTAssertEqual(c.linkFailed("p-2", err, now: t0 + .milliseconds(1500)), [.close(peerId: "p-2")])
        XCTAssertEqual(c.tick(now: t0 + .milliseconds(1900)), [])
        XCTAssertEqual(c.tick(now: t0 + .seconds(2)), [.event(.disconnected), .open(peerId: "p-3")])
        XCTAssertEqual(c.reconnections, 2)
        XCTAssertEqual(c.nextDeadline, t0 + .seconds(11), "gives up connectTimeout after the failure")
        // Events of replaced connections are ignored.
        XCTAssertEqual(c.linkConnected("p-2", now: t0 + .seconds(3)), [])
        XCTAssertEqual(c.linkConnected("p-3", now: t0 + .seconds(3)), [.requestKeyframe, .event(.reconnected)])
        XCTAssertTrue(c.isConnected)
        XCTAssertNil(c.nextDeadline)
    }

    func testAQuickReconnectionIsStillReportedAsAnInterruption() {
        var c = connected()
        _ = c.linkFailed("p-1", err, now: t0)
        XCTAssertEqual(c.linkConnected("p-2", now: t0 + .milliseconds(300)), [.requestKeyframe, .event(.disconnected), .event(.reconnected)])
    }

    func testAFailureThatIsTheStreamsEndIsNeverAnnounced() {
        var c = connected()
        _ = c.linkFailed("p-1", err, now: t0)
        // The session's word of the stream's end arrives within the settle delay: the subscription just ends.
        XCTAssertEqual(c.stop(), [.close(peerId: "p-2")])
        XCTAssertEqual(c.tick(now: t0 + .seconds(5)), [])
    }

    func testReconnectionThatNeverSucceedsReportsTheStreamLost() {
        var c = connected()
        var now = t0
        var all: [Out] = []
        // Every attempt fails at once; the machine keeps its pace and gives up with streamLost, no error.
        func failOpened(_ out: [Out]) {
            all += out
            for case .open(let id) in out { failOpened(c.linkFailed(id, err, now: now)) }
        }
        failOpened(c.linkFailed("p-1", err, now: t0))
        while let d = c.nextDeadline, all.count < 200 {
            now = d
            failOpened(c.tick(now: now))
        }
        XCTAssertEqual(events(all), [.disconnected, .streamLost])
        XCTAssertEqual(now, t0 + .milliseconds(9500), "the last attempt whose retry would pass the deadline ends it")
        XCTAssertTrue(c.isOver)
        XCTAssertEqual(c.reconnections, 20, "one attempt at once, then one every 500 ms")
        // Nothing more: not even for late link events.
        XCTAssertEqual(c.linkConnected(c.peerId ?? "", now: now), [])
        XCTAssertEqual(c.stop(), [])
    }

    func testAnAttemptStillRunningAtTheDeadlineIsClosed() {
        var c = connected()
        _ = c.linkFailed("p-1", err, now: t0)
        XCTAssertEqual(c.tick(now: t0 + .seconds(10)), [.close(peerId: "p-2"), .event(.streamLost)])
    }

    func testARefusedReofferEndsTheSubscriptionAsStreamLost() {
        var c = connected()
        _ = c.linkFailed("p-1", err, now: t0)
        XCTAssertEqual(c.offerRefused("p-2", OTError(.serverCannotFindStream), now: t0), [.close(peerId: "p-2"), .event(.streamLost)])
    }

    func testRoutedPublisherOutageIsDisconnectedThenReconnected() {
        var c = connected()
        XCTAssertEqual(c.publisherMedia("other", .interrupted, now: t0), [], "another peer connection's news")
        XCTAssertEqual(c.publisherMedia("p-1", .interrupted, now: t0), [.event(.disconnected)])
        XCTAssertFalse(c.isConnected)
        XCTAssertNil(c.nextDeadline, "the publisher's outage has no deadline here: the stream ends if the publisher gives up")
        XCTAssertEqual(c.publisherMedia("p-1", .interrupted, now: t0), [])
        XCTAssertEqual(c.publisherMedia("p-1", .resumed, now: t0 + .seconds(2)), [.requestKeyframe, .event(.reconnected)])
        XCTAssertTrue(c.isConnected)
        XCTAssertEqual(c.publisherMedia("p-1", .resumed, now: t0), [])
    }

    func testOwnFailureDuringThePublishersOutageIsNotReportedTwice() {
        var c = connected()
        _ = c.publisherMedia("p-1", .interrupted, now: t0)
        XCTAssertEqual(events(c.linkFailed("p-1", err, now: t0)), [])
        XCTAssertEqual(c.linkConnected("p-2", now: t0 + .seconds(1)), [.requestKeyframe, .event(.reconnected)])
    }

    func testFirstConnectionFailures() {
        var timedOut = SubscriberControl(peerIdBase: "p", connectTimeout: .seconds(5))
        _ = timedOut.start(now: t0)
        XCTAssertEqual(timedOut.nextDeadline, t0 + .seconds(5))
        let out = timedOut.tick(now: t0 + .seconds(5))
        XCTAssertEqual(out.first, .close(peerId: "p-1"))
        XCTAssertEqual(failures(out), [.subscriberTimedOut])

        var failed = SubscriberControl(peerIdBase: "p", connectTimeout: .seconds(5))
        _ = failed.start(now: t0)
        XCTAssertEqual(failures(failed.linkFailed("p-1", OTError(.internalError, "x"), now: t0)), [.subscriberWebRTC])

        var refused = SubscriberControl(peerIdBase: "p", connectTimeout: .seconds(5))
        _ = refused.start(now: t0)
        XCTAssertEqual(refused.offerRefused("p-1", OTError(.serverCannotFindStream), now: t0),
                       [.close(peerId: "p-1"), .event(.failed(OTError(.serverCannotFindStream)))])

        // An offer lost with the signaling connection is offered again within the same deadline.
        var lost = SubscriberControl(peerIdBase: "p", connectTimeout: .seconds(5))
        _ = lost.start(now: t0)
        XCTAssertEqual(lost.offerRefused("p-1", OTError(.connectionDropped), now: t0 + .seconds(1)), [.close(peerId: "p-1"), .open(peerId: "p-2")])
        XCTAssertEqual(lost.nextDeadline, t0 + .seconds(5))
        XCTAssertEqual(lost.linkConnected("p-2", now: t0 + .seconds(2)), [.event(.connected)])
    }

    func testStopIsQuiet() {
        var c = connected()
        XCTAssertEqual(c.stop(), [.close(peerId: "p-1")])
        XCTAssertTrue(c.isOver)
        XCTAssertEqual(c.linkFailed("p-1", err, now: t0), [])
        XCTAssertEqual(c.publisherMedia("p-1", .interrupted, now: t0), [])
    }
}

final class PublisherLinkControlTests: XCTestCase {
    let t0 = Instant(micros: 5_000_000)
    let err = OTError(.publisherWebRTC, "consent lost")

    func failure(_ out: [PublisherLinkControl.Output]) -> OTErrorCode? {
        out.compactMap { if case .failed(let e) = $0 { e.code } else { nil } }.first
    }

    func testFirstConnectionTimesOutWith1541() {
        var c = PublisherLinkControl(peerIdBase: "r")
        XCTAssertEqual(c.start(now: t0), [.open(peerId: "r-1")])
        XCTAssertEqual(c.nextDeadline, t0 + .seconds(15))
        XCTAssertEqual(c.tick(now: t0 + .seconds(14)), [])
        let out = c.tick(now: t0 + .seconds(15))
        XCTAssertEqual(out.first, .close(peerId: "r-1"))
        XCTAssertEqual(failure(out), .publisherTimedOut)
        XCTAssertNil(c.nextDeadline)
    }

    func testEstablishedLinkIsRepublishedWithinTheWindow() {
        var c = PublisherLinkControl(peerIdBase: "r")
        _ = c.start(now: t0)
        c.linkConnected("r-1")
        XCTAssertNil(c.nextDeadline)
        XCTAssertEqual(c.linkFailed("r-1", err, now: t0 + .seconds(1)), [.close(peerId: "r-1"), .open(peerId: "r-2")])
        XCTAssertEqual(c.republishCount, 1)
        XCTAssertEqual(c.linkFailed("r-2", err, now: t0 + .seconds(2)), [.close(peerId: "r-2")])
        XCTAssertEqual(c.tick(now: t0 + .milliseconds(2500)), [.open(peerId: "r-3")])
        c.linkConnected("r-3")
        XCTAssertNil(c.nextDeadline)
        // A later failure opens a new window.
        XCTAssertEqual(c.linkFailed("r-3", err, now: t0 + .seconds(100)), [.close(peerId: "r-3"), .open(peerId: "r-4")])
    }

    func testRepublishingGivesUpAfterTheWindow() {
        var c = PublisherLinkControl(peerIdBase: "r")
        _ = c.start(now: t0)
        c.linkConnected("r-1")
        _ = c.linkFailed("r-1", err, now: t0)
        // The attempt runs without connecting until the window ends: 1541.
        let out = c.tick(now: t0 + .seconds(15))
        XCTAssertEqual(out.first, .close(peerId: "r-2"))
        XCTAssertEqual(failure(out), .publisherTimedOut)

        var d = PublisherLinkControl(peerIdBase: "r")
        _ = d.start(now: t0)
        d.linkConnected("r-1")
        _ = d.linkFailed("r-1", err, now: t0)
        // Attempts that fail fast: the last failure near the window's end is 1610.
        XCTAssertEqual(failure(d.linkFailed("r-2", err, now: t0 + .milliseconds(14_600))), .publisherWebRTC)
    }

    func testRefusalsFailAtOnceAndStopIsQuiet() {
        var c = PublisherLinkControl(peerIdBase: "r")
        _ = c.start(now: t0)
        XCTAssertEqual(c.refused("r-1", OTError(.unableToPublish)), [.close(peerId: "r-1"), .failed(OTError(.unableToPublish))])
        XCTAssertEqual(c.refused("r-1", OTError(.unableToPublish)), [])
        var s = PublisherLinkControl(peerIdBase: "r")
        _ = s.start(now: t0)
        XCTAssertEqual(s.stop(), [.close(peerId: "r-1")])
        XCTAssertEqual(s.tick(now: t0 + .seconds(60)), [])
        // An offer lost with the signaling connection is republished rather than failed.
        var lost = PublisherLinkControl(peerIdBase: "r")
        _ = lost.start(now: t0)
        XCTAssertEqual(lost.linkFailed("r-1", OTError(.connectionDropped), now: t0), [.close(peerId: "r-1"), .open(peerId: "r-2")])
    }
}
