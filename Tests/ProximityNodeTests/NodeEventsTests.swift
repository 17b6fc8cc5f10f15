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
}
