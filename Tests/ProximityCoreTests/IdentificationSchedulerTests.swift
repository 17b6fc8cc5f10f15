import ProximityCore
import Testing

/// The identification stage on a manual clock: times are plain numbers, nothing sleeps.
@Suite struct IdentificationSchedulerTests {
    static let low = "AA:00:00:00:00:01"
    static let me = "AA:00:00:00:00:05"
    static let high = "AA:00:00:00:00:09"

    /// An ordering for these tests of the scheduler's mechanics: the lower address connects (the
    /// node's own orderings are coins, tested in TrustStepTests.whoConnects).
    struct LowerConnects: ConnectionOrdering {
        func connectsFirst(own: String, peer: String) -> Bool { own < peer }
    }

    func scheduler(concurrency: Int = 2, maxTracked: Int = 256) -> IdentificationScheduler {
        var s = IdentificationScheduler(configuration: .init(concurrency: concurrency, maxTracked: maxTracked), ownAddress: Self.me)
        s.ordering = LowerConnects()
        return s
    }

    @Test("the lower address connects at once; a second sighting while connecting starts nothing")
    func lowerConnects() {
        var s = scheduler()
        #expect(s.heard(Self.high, at: 0) == [.init(address: Self.high, attempt: 1, afterYield: false)])
        #expect(s.heard(Self.high, at: 0.1) == [])
        #expect(s.inFlight == 1)
        let (verdict, next) = s.finished(Self.high, .identified, at: 1)
        #expect(verdict == .done && next == [] && s.inFlight == 0 && s.trackedCount == 0)
    }

    @Test("the higher address yields: no connection, no slot held; the peer's hello ends the wait")
    func higherYieldsUntilHello() {
        var s = scheduler(concurrency: 1)
        #expect(s.heard(Self.low, at: 0) == [])
        #expect(s.inFlight == 0 && s.trackedCount == 1)
        // The slot is free for a peer this node must connect to.
        #expect(s.heard(Self.high, at: 0) == [.init(address: Self.high, attempt: 1, afterYield: false)])
        s.resolved(Self.low)
        #expect(s.tick(at: 31) == [] && s.trackedCount == 1)
    }

    @Test("a yield that runs out becomes a connection, at exactly the yield time")
    func yieldRunsOut() {
        var s = scheduler()
        _ = s.heard(Self.low, at: 10)
        #expect(s.tick(at: 39.9) == [])
        #expect(s.tick(at: 40) == [.init(address: Self.low, attempt: 1, afterYield: true)])
        #expect(s.heard(Self.low, at: 40.5) == [])
    }

    @Test("failures back off 1, 2, 4 … s, retried when heard after that; after 8 the address is left alone for 10 min, then counted afresh")
    func backoffAndBan() {
        var s = scheduler()
        var t = 0.0
        var delays: [Double] = []
        for attempt in 1...8 {
            let started = s.heard(Self.high, at: t)
            #expect(started == [.init(address: Self.high, attempt: attempt, afterYield: false)], "attempt \(attempt)")
            let (verdict, _) = s.finished(Self.high, .failed, at: t)
            switch verdict {
            case .retry(let after):
                delays.append(after)
                // Heard just before the retry time: nothing.
                #expect(s.heard(Self.high, at: t + after - 0.01) == [])
                t += after
            case .leftAlone(let time, let attempts):
                #expect(attempt == 8 && time == 600 && attempts == 8)
            default:
                Issue.record("unexpected \(verdict)")
            }
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60])
        #expect(s.heard(Self.high, at: t + 599) == [])
        #expect(s.heard(Self.high, at: t + 600) == [.init(address: Self.high, attempt: 1, afterYield: false)])
    }

    @Test("a rejected identity leaves the address alone for 10 min at once")
    func rejected() {
        var s = scheduler()
        _ = s.heard(Self.high, at: 0)
        #expect(s.finished(Self.high, .rejected, at: 5).0 == .leftAlone(for: 600, attempts: 1))
        #expect(s.heard(Self.high, at: 604) == [])
        #expect(s.heard(Self.high, at: 605).count == 1)
    }

    @Test("a peer refused by its hello is left alone for 10 min at once: no yield run out, no connection; one already connecting runs to its end")
    func refusedByHello() {
        var s = scheduler(concurrency: 1)
        _ = s.heard(Self.low, at: 0)
        #expect(s.trackedCount == 1)
        #expect(s.refused(Self.low, at: 2) == .leftAlone(for: 600, attempts: 0))
        #expect(s.trackedCount == 0)
        #expect(s.tick(at: 31) == [] && s.heard(Self.low, at: 601) == [])
        // Then counted afresh (the higher address yields again).
        #expect(s.heard(Self.low, at: 602) == [] && s.trackedCount == 1)
        // A hello from a device not heard yet: its first sighting starts nothing either.
        _ = s.refused("AA:00:00:00:00:02", at: 0)
        #expect(s.heard("AA:00:00:00:00:02", at: 1) == [])
        // Queued behind a connection: dropped from the queue.
        #expect(s.heard(Self.high, at: 0).count == 1)
        #expect(s.heard("AA:00:00:00:00:0A", at: 0) == [])
        _ = s.refused("AA:00:00:00:00:0A", at: 0)
        #expect(s.finished(Self.high, .identified, at: 1).1 == [])
        // Connecting: the attempt decides.
        #expect(s.heard("AA:00:00:00:00:0B", at: 2).count == 1)
        #expect(s.refused("AA:00:00:00:00:0B", at: 2) == .unknown && s.inFlight == 1)
        #expect(s.finished("AA:00:00:00:00:0B", .rejected, at: 3).0 == .leftAlone(for: 600, attempts: 1))
    }

    @Test("at most `concurrency` connections at once; the others wait in order and start as slots free")
    func concurrencyAndQueue() {
        var s = scheduler(concurrency: 2)
        let peers = (0..<5).map { "BB:00:00:00:00:0\($0)" }
        var started: [String] = []
        for p in peers { started += s.heard(p, at: 0).map(\.address) }
        #expect(started == Array(peers.prefix(2)) && s.inFlight == 2 && s.trackedCount == 5)
        let (_, next) = s.finished(peers[0], .identified, at: 1)
        #expect(next.map(\.address) == [peers[2]])
        // Resolved while queued (its hello came): skipped.
        s.resolved(peers[3])
        #expect(s.finished(peers[1], .identified, at: 1).1.map(\.address) == [peers[4]])
    }

    @Test("a flood of advertisers is bounded: beyond maxTracked a device waits for a later sample")
    func bounded() {
        var s = scheduler(concurrency: 1, maxTracked: 3)
        for i in 0..<10 { _ = s.heard("CC:00:00:00:00:\(10 + i)", at: 0) }
        #expect(s.trackedCount == 3)
        _ = s.finished("CC:00:00:00:00:10", .identified, at: 1)
        #expect(s.heard("CC:00:00:00:00:19", at: 1) == [] && s.trackedCount == 3)
    }

    @Test("an attempt the scheduler did not start is not counted")
    func unknownAttempt() {
        var s = scheduler()
        #expect(s.finished(Self.high, .identified, at: 0).0 == .unknown)
        #expect(s.inFlight == 0)
    }
}
