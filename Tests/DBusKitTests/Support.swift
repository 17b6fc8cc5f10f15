import DBusKit
import Foundation
import ProximityTesting
import Testing

/// A private bus with a server and a client connection, torn down after the body.
func withBusPair<T: Sendable>(_ body: (PrivateBus, DBusConnection, DBusConnection) async throws -> T) async throws -> T {
    let bus = try await PrivateBus.start(name: "dbuskit")
    let server = try await bus.connect()
    let client = try await bus.connect()
    do {
        let result = try await body(bus, server, client)
        await client.close()
        await server.close()
        await bus.stop()
        return result
    } catch {
        await client.close()
        await server.close()
        await bus.stop()
        throw error
    }
}

/// Waits for the next element of a stream, or fails after `timeout`.
func next<S: AsyncSequence & Sendable>(_ stream: S, timeout: Duration = .seconds(5)) async throws -> S.Element
where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            var it = stream.makeAsyncIterator()
            return try await it.next()
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let element = first else {
            throw TestKitError("no element within \(timeout)")
        }
        return element
    }
}

let testInterface: InterfaceName = "org.proximityd.Test1"
