import DBusKit
import Foundation
import ProximityTesting
import Synchronization
import Testing

/// A gate that method handlers wait at, and a count of how many arrived.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>], arrived: Int)>((false, [], 0))
    /// The count of handlers arrived, at each arrival.
    private let arrivals = EventRecorder<Int>()

    func wait() async {
        await withCheckedContinuation { c in
            let (passNow, n) = state.withLock { s -> (Bool, Int) in
                s.arrived += 1
                if s.open { return (true, s.arrived) }
                s.waiters.append(c)
                return (false, s.arrived)
            }
            arrivals.record(n)
            if passNow { c.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Returns once `n` handlers have arrived; throws if they have not within `timeout`.
    func waitForArrivals(_ n: Int, timeout: Duration = .seconds(10)) async throws {
        try await arrivals.require("\(n) handlers at the gate", timeout: timeout) { $0 >= n }
    }
}

func gatedInterface(_ gate: Gate) -> DBusInterface {
    DBusInterface(testInterface, methods: [
        DBusMethod("Gated", outputs: [DBusArgument("ok", .boolean)]) { _ in
            await gate.wait()
            return [.boolean(true)]
        },
        DBusMethod("Forever") { _ in
            try await Task.sleep(for: .seconds(3600))
            return []
        },
    ])
}

@Suite("Timeouts, cancellation, shutdown and disconnection")
struct LifecycleTests {
    @Test("a call times out with NoReply")
    func timeout() async throws {
        try await withBusPair { _, server, client in
            _ = try await server.export([gatedInterface(Gate())], at: "/test/slow")
            do {
                _ = try await client.call(destination: server.uniqueName, path: "/test/slow", interface: testInterface,
                                          member: "Forever", timeout: .milliseconds(300))
                Issue.record("no timeout")
            } catch let error as DBusError {
                #expect(error.name == .noReply)
            }
        }
    }

    @Test("cancelling the waiting task ends the call at once")
    func cancellation() async throws {
        try await withBusPair { _, server, client in
            let gate = Gate()
            _ = try await server.export([gatedInterface(gate)], at: "/test/slow")
            let call = Task {
                try await client.call(destination: server.uniqueName, path: "/test/slow", interface: testInterface, member: "Gated")
            }
            try await gate.waitForArrivals(1)
            call.cancel()
            await #expect(throws: CancellationError.self) { _ = try await call.value }
            // The connection is fine afterwards.
            _ = try await client.call(destination: server.uniqueName, path: "/", interface: .peer, member: "Ping")
            gate.open()
        }
    }

    @Test("close() lets calls in flight finish within the grace period")
    func shutdownFinishesInFlight() async throws {
        let bus = try await PrivateBus.start(name: "shutdown")
        let server = try await bus.connect()
        let client = try await bus.connect()
        let gate = Gate()
        _ = try await server.export([gatedInterface(gate)], at: "/test/gated")
        let calls = (0..<3).map { _ in
            Task { try await client.call(destination: server.uniqueName, path: "/test/gated", interface: testInterface, member: "Gated") }
        }
        try await gate.waitForArrivals(3)
        async let closing: Void = server.close(gracePeriod: .seconds(10))
        gate.open()
        await closing
        for call in calls { #expect(try await call.value == [.boolean(true)]) }
        #expect(!server.isConnected)
        await client.close()
        await bus.stop()
    }

    @Test("close() answers calls still running after the grace period with an error, and returns")
    func shutdownAnswersStragglers() async throws {
        let bus = try await PrivateBus.start(name: "shutdown")
        let server = try await bus.connect()
        let client = try await bus.connect()
        let gate = Gate()
        _ = try await server.export([gatedInterface(gate)], at: "/test/gated")
        let calls = (0..<4).map { _ in
            Task { try await client.call(destination: server.uniqueName, path: "/test/gated", interface: testInterface, member: "Gated") }
        }
        try await gate.waitForArrivals(4)
        // The handlers stay at the gate, never opened: that close() returns at all is what counts,
        // after the grace period, however long a busy machine takes.
        let started = ContinuousClock.now
        await server.close(gracePeriod: .milliseconds(200))
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        for call in calls {
            do {
                _ = try await call.value
                Issue.record("a straggler got a reply")
            } catch let error as DBusError {
                #expect(error.name == .failed || error.name == .noReply, "\(error)")
            }
        }
        // Calls on the closed connection fail at once with Disconnected.
        do {
            _ = try await server.call(destination: client.uniqueName, path: "/", interface: .peer, member: "Ping")
            Issue.record("call on a closed connection succeeded")
        } catch let error as DBusError {
            #expect(error.name == .disconnected)
        }
        gate.open()
        await client.close()
        await bus.stop()
    }

    @Test("the bus going away: waiters wake, outgoing calls fail, streams end")
    func busDies() async throws {
        let bus = try await PrivateBus.start(name: "dies")
        let server = try await bus.connect()
        let client = try await bus.connect()
        _ = try await server.export([gatedInterface(Gate())], at: "/test/slow")
        let stream = try await client.subscribe(MatchRule(interface: testInterface))
        let pending = Task {
            try await client.call(destination: server.uniqueName, path: "/test/slow", interface: testInterface, member: "Forever")
        }
        let streamEnded = Task { for await _ in stream {}; return true }
        await bus.stop()
        await client.waitUntilDisconnected()
        await server.waitUntilDisconnected()
        await #expect(throws: (any Error).self) { _ = try await pending.value }
        #expect(await streamEnded.value)
        #expect(!client.isConnected)
    }
}
