import CDBus
@testable import DBusKit
import Foundation
import Logging
import ProximityTesting
import Testing

/// The signal receive path: deliveries batched per loop turn, and variants typed from their type
/// codes.
@Suite("Receive path: batched signal delivery, variant decoding")
struct ReceivePathTests {
    /// A libdbus signal `org.proximityd.Test1.Seq(u)` from `/t`.
    static func seqSignal(_ n: UInt32) -> OpaquePointer {
        let message = dbus_message_new_signal("/t", testInterface.rawValue, "Seq")!
        var value = n
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        _ = dbus_message_iter_append_basic(&iter, CDBUS_TYPE_UINT32, &value)
        return message
    }

    static func sequence(_ stream: DBusSignalStream) async -> [UInt32] {
        var got: [UInt32] = []
        for await message in stream {
            guard case .uint32(let n)? = message.body.first else { continue }
            got.append(n)
        }
        return got
    }

    /// Drives a connection's core by hand, as the bus thread would: signals dispatched in one turn
    /// wait for the end of the turn, and a shutdown in the middle of a turn (the bus hung up) still
    /// delivers them before the streams end.
    @Test("signals of one turn are yielded at its end, in order; a shutdown mid-turn delivers them first")
    func batchedDelivery() async throws {
        dbus_threads_init_default()
        let core = ConnectionCore(thread: try BusThread(), logger: Logger(label: "test"))
        let (all, allContinuation) = DBusSignalStream.makeStream()
        let (byPath, byPathContinuation) = DBusSignalStream.makeStream()
        core.addSubscription(1, MatchRule(interface: testInterface, member: "Seq"), allContinuation)
        core.addSubscription(2, MatchRule(path: "/t", member: "Seq"), byPathContinuation)
        for n in UInt32(0)..<600 {
            let message = Self.seqSignal(n)
            #expect(core.handle(message))
            dbus_message_unref(message)
        }
        core.flushSignalDeliveries()   // end of turn
        // The next turn ends with the bus hanging up.
        for n in UInt32(600)..<1000 {
            let message = Self.seqSignal(n)
            #expect(core.handle(message))
            dbus_message_unref(message)
        }
        let disconnected = dbus_message_new_signal("/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local", "Disconnected")!
        #expect(core.handle(disconnected))
        dbus_message_unref(disconnected)
        #expect(core.state.withLock { $0.closed })
        // Both streams got every signal, in order, and then ended.
        #expect(await Self.sequence(all) == Array(0..<1000))
        #expect(await Self.sequence(byPath) == Array(0..<1000))
    }

    @Test("signals to several subscriptions arrive complete and in order on each")
    func orderPerSubscription() async throws {
        try await withBusPair { _, server, client in
            let every = try await client.subscribe(MatchRule(sender: server.uniqueName, interface: testInterface))
            let seqOnly = try await client.subscribe(MatchRule(sender: server.uniqueName, interface: testInterface, member: "Seq"))
            let total: UInt32 = 3000
            func collect(_ stream: DBusSignalStream, count: Int) -> Task<[String], Never> {
                Task {
                    var got: [String] = []
                    for await message in stream {
                        guard case .uint32(let n)? = message.body.first else { continue }
                        got.append("\(message.member?.rawValue ?? "?")\(n)")
                        if got.count == count { break }
                    }
                    return got
                }
            }
            let everyTask = collect(every, count: Int(total) * 2)
            let seqTask = collect(seqOnly, count: Int(total))
            var expectedEvery: [String] = []
            for i in 0..<total {
                try server.emitSignal(path: "/t", interface: testInterface, member: "Seq", [.uint32(i)])
                try server.emitSignal(path: "/t", interface: testInterface, member: "Other", [.uint32(i)])
                expectedEvery += ["Seq\(i)", "Other\(i)"]
            }
            #expect(await everyTask.value == expectedEvery)
            #expect(await seqTask.value == (0..<total).map { "Seq\($0)" })
        }
    }

    /// Variants holding basic types and arrays of them are typed from type codes, other containers
    /// from their signature: all must come back as sent, empty arrays included.
    @Test("variants of every kind decode as sent")
    func variants() async throws {
        let inner: [DBusValue] = sampleValues + [
            .array(element: .boolean, [.boolean(true), .boolean(false)]),
            .array(element: .int16, [.int16(-2)]), .array(element: .uint16, []),
            .array(element: .int64, [.int64(.min)]), .array(element: .uint64, [.uint64(.max)]),
            .array(element: .double, [.double(1.5)]), .array(element: .objectPath, [.objectPath("/a")]),
            .array(element: .signature, [.signature("a{sv}")]), .array(element: .variant, []),
            .array(element: .variant, [.variant(.bytes([1]))]),
            .array(element: .array(.variant), [.array(element: .variant, [.variant(.byte(1))])]),
            .dictionary(key: .uint16, value: .variant, [.init(.uint16(0x004C), .variant(.bytes(Array(0..<23))))]),
        ]
        let values = inner.map { DBusValue.variant($0) }
        try await withBusPair { _, server, client in
            let interface = DBusInterface(testInterface, methods: [
                DBusMethod("Echo", inputs: [DBusArgument("values", .array(.variant))], outputs: [DBusArgument("values", .array(.variant))]) { call in
                    call.arguments
                },
            ])
            _ = try await server.export([interface], at: "/test/echo")
            let reply = try await client.call(destination: server.uniqueName, path: "/test/echo", interface: testInterface,
                                              member: "Echo", [.array(element: .variant, values)])
            #expect(reply == [.array(element: .variant, values)])
        }
    }
}
