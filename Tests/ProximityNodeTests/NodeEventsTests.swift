@testable import ProximityNode
import Testing

@Suite struct NodeEventsTests {
    @Test("every subscriber gets every event in order; a slow one keeps the newest its buffer holds")
    func fanOut() async {
        let events = NodeEvents()
        let a = events.subscribe(buffer: 8)
        let b = events.subscribe(buffer: 2)
        for i in 1...5 { events.publish(.clearInterval(Double(i))) }
        events.finish()
        var seenA: [NodeEvent] = []
        for await e in a { seenA.append(e) }
        var seenB: [NodeEvent] = []
        for await e in b { seenB.append(e) }
        #expect(seenA == (1...5).map { .clearInterval(Double($0)) })
        #expect(seenB == [.clearInterval(4), .clearInterval(5)])
        // After finish, a new subscription ends at once.
        var late = 0
        for await _ in events.subscribe() { late += 1 }
        #expect(late == 0)
    }

    @Test("events read are let go: a drained queue holds none, and a queue read as fast as it fills holds at most about twice what is unread")
    func readEventsAreReleased() async {
        let events = NodeEvents()
        let stream = events.subscribe(buffer: 4096)
        var iterator = stream.makeAsyncIterator()
        // Published while nobody waits: all queued; read them all.
        for i in 1...3000 { events.publish(.clearInterval(Double(i))) }
        #expect(stream.queue.held == 3000)
        for _ in 1...3000 { _ = await iterator.next() }
        #expect(stream.queue.held == 0)
        // A reader one behind the writer for 10,000 events: what it holds stays small.
        var most = 0
        for i in 1...10_000 {
            events.publish(.clearInterval(Double(i)))
            events.publish(.clearInterval(Double(i)))
            _ = await iterator.next()
            _ = await iterator.next()
            most = max(most, stream.queue.held)
        }
        #expect(most <= 64, "held \(most) events")
        events.finish()
    }
}
