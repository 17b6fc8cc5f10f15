import DBusKit
import Foundation
import ProximityTesting
import Testing

/// The number of match rules the bus holds for `name` (dbus-daemon's Debug.Stats).
func matchRuleCount(_ connection: DBusConnection, of name: BusName) async throws -> UInt32 {
    let reply = try await connection.call(destination: .bus, path: "/org/freedesktop/DBus",
                                          interface: "org.freedesktop.DBus.Debug.Stats", member: "GetConnectionStats",
                                          [.string(name.rawValue)])
    guard case .uint32(let n)? = reply.first?.stringKeyedDictionary?["MatchRules"]?.unwrapped else {
        throw TestKitError("no MatchRules in \(reply)")
    }
    return n
}

/// Re-checks `condition` until it holds or `timeout` passes. For state that only the bus knows
/// (there is no signal when a match rule is removed).
func eventually(timeout: Duration = .seconds(5), _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        await Task.yield()
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

@Suite("Signal subscriptions")
struct SignalTests {
    @Test("a match rule lives as long as its consumer")
    func matchRuleRemovedWhenConsumerStops() async throws {
        try await withBusPair { _, server, client in
            let before = try await matchRuleCount(server, of: client.uniqueName)
            do {
                let stream = try await client.subscribe(MatchRule(interface: testInterface, member: "Tick"))
                #expect(try await matchRuleCount(server, of: client.uniqueName) == before + 1)
                try server.emitSignal(path: "/t", interface: testInterface, member: "Tick")
                var iterator = stream.makeAsyncIterator()
                #expect(await iterator.next()?.member == "Tick")
            }
            // The stream is gone: its rule goes too.
            #expect(try await eventually { try await matchRuleCount(server, of: client.uniqueName) == before })
        }
    }

    @Test("a rule naming a well-known sender follows whoever owns the name")
    func wellKnownSender() async throws {
        try await withBusPair { bus, server, client in
            let other = try await bus.connect()
            defer { Task { await other.close() } }
            #expect(try await server.requestName("org.proximityd.Sender") == .primaryOwner)
            let fromName = try await client.subscribe(MatchRule(sender: "org.proximityd.Sender", interface: testInterface))
            let fromAnyone = try await client.subscribe(MatchRule(interface: testInterface))
            var named = fromName.makeAsyncIterator()
            var any = fromAnyone.makeAsyncIterator()

            // One at a time, each seen by the catch-all subscription before the next is sent: signals
            // from two connections have no order on the bus, but these do.
            try other.emitSignal(path: "/t", interface: testInterface, member: "Tick", [.string("other")])
            #expect(await any.next()?.body == [.string("other")])
            try server.emitSignal(path: "/t", interface: testInterface, member: "Tick", [.string("owner")])
            #expect(await any.next()?.body == [.string("owner")])
            #expect(await named.next()?.body == [.string("owner")])

            // The name moves to `other`: the subscription follows it.
            try await server.releaseName("org.proximityd.Sender")
            #expect(try await other.requestName("org.proximityd.Sender") == .primaryOwner)
            try server.emitSignal(path: "/t", interface: testInterface, member: "Tick", [.string("old owner")])
            #expect(await any.next()?.body == [.string("old owner")])
            try other.emitSignal(path: "/t", interface: testInterface, member: "Tick", [.string("new owner")])
            #expect(await any.next()?.body == [.string("new owner")])
            #expect(await named.next()?.body == [.string("new owner")])
        }
    }

    @Test("10,000 signals arrive complete and in order")
    func volumeAndOrder() async throws {
        try await withBusPair { _, server, client in
            let stream = try await client.subscribe(MatchRule(sender: server.uniqueName, interface: testInterface, member: "Seq"))
            let total: UInt32 = 10_000
            let receiver = Task {
                var expected: UInt32 = 0
                for await message in stream {
                    guard case .uint32(let n)? = message.body.first, n == expected else { return expected }
                    expected += 1
                    if expected == total { break }
                }
                return expected
            }
            for i in 0..<total {
                try server.emitSignal(path: "/t", interface: testInterface, member: "Seq", [.uint32(i), .vardict(["RSSI": .int16(-60)])])
            }
            #expect(await receiver.value == total)
        }
    }

    @Test("signals from busctl reach a DBusKit subscriber")
    func fromBusctl() async throws {
        try await withBusPair { bus, _, client in
            let stream = try await client.subscribe(MatchRule(path: "/from/busctl", interface: testInterface, member: "Hello"))
            let result = try await runCommand("busctl", ["--address=\(bus.address)", "emit", "--", "/from/busctl",
                                                         testInterface.rawValue, "Hello", "sa{sv}", "hi", "1", "rssi", "n", "-61"])
            #expect(result.status == 0, "\(result)")
            let message = try await next(stream)
            #expect(message.body == [.string("hi"), .vardict(["rssi": .int16(-61)])])
        }
    }
}
