import DBusKit
import Foundation
import ProximityTesting
import Testing

struct Refusal: DBusErrorConvertible {
    var dbusError: DBusError { DBusError("org.proximityd.Error.NotPermitted", "not today") }
}

/// An object with one method of each kind of outcome, for the error tests.
func exportErrorFixture(_ server: DBusConnection) async throws {
    _ = try await server.export([DBusInterface(testInterface, methods: [
        DBusMethod("Add", inputs: [DBusArgument("a", .int32), DBusArgument("b", .int32)], outputs: [DBusArgument("sum", .int32)]) { call in
            guard case .int32(let a) = call.arguments[0], case .int32(let b) = call.arguments[1] else { return [] }
            return [.int32(a &+ b)]
        },
        DBusMethod("Refuse") { _ in throw Refusal() },
        DBusMethod("Crash") { _ in throw CocoaError(.fileNoSuchFile) },
        DBusMethod("Lie", outputs: [DBusArgument("n", .int32)]) { _ in [.string("not an int")] },
        DBusMethod("Ramble", inputs: [DBusArgument("length", .int32)]) { call in
            guard case .int32(let length) = call.arguments[0] else { return [] }
            throw DBusError("org.proximityd.Error.InvalidArguments", String(repeating: "é", count: Int(length)))
        },
    ], properties: [
        DBusProperty("Fixed", .string, .string("x"), changeSignal: .const),
        DBusProperty("Level", .uint16, .uint16(1)) { value in
            guard case .uint16(let level) = value, level <= 10 else {
                throw DBusError("org.proximityd.Error.InvalidArguments", "Level must be 0...10")
            }
            return value
        },
    ])], at: "/test/errors")
}

@Suite("Errors carry the standard names")
struct ErrorTests {
    func expectError(_ expected: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(expected), got success")
        } catch let error as DBusError {
            #expect(error.name.rawValue == expected, "\(error)")
        } catch {
            Issue.record("expected \(expected), got \(error)")
        }
    }

    @Test("unknown object, interface, method, property; wrong signature; read-only; bad write")
    func standardErrors() async throws {
        try await withBusPair { _, server, client in
            try await exportErrorFixture(server)
            let dest = server.uniqueName
            await expectError("org.freedesktop.DBus.Error.UnknownObject") {
                _ = try await client.call(destination: dest, path: "/nowhere", interface: testInterface, member: "Add")
            }
            await expectError("org.freedesktop.DBus.Error.UnknownInterface") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: "org.nope.X1", member: "Add")
            }
            await expectError("org.freedesktop.DBus.Error.UnknownMethod") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Subtract")
            }
            await expectError("org.freedesktop.DBus.Error.InvalidArgs") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Add", [.int32(1)])
            }
            await expectError("org.freedesktop.DBus.Error.InvalidArgs") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Add",
                                          [.int32(1), .string("2")])
            }
            await expectError("org.freedesktop.DBus.Error.UnknownProperty") {
                _ = try await client.getProperty(destination: dest, path: "/test/errors", interface: testInterface, name: "Nope")
            }
            await expectError("org.freedesktop.DBus.Error.PropertyReadOnly") {
                try await client.setProperty(destination: dest, path: "/test/errors", interface: testInterface, name: "Fixed", value: .string("y"))
            }
            await expectError("org.freedesktop.DBus.Error.InvalidArgs") {
                try await client.setProperty(destination: dest, path: "/test/errors", interface: testInterface, name: "Level", value: .string("5"))
            }
            await expectError("org.proximityd.Error.InvalidArguments") {
                try await client.setProperty(destination: dest, path: "/test/errors", interface: testInterface, name: "Level", value: .uint16(11))
            }
            await expectError("org.freedesktop.DBus.Error.InvalidArgs") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: .properties, member: "Get", [.string("x")])
            }
            // The object still works after all that, and a valid write sticks.
            #expect(try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Add",
                                          [.int32(2), .int32(40)]) == [.int32(42)])
            try await client.setProperty(destination: dest, path: "/test/errors", interface: testInterface, name: "Level", value: .uint16(7))
            #expect(try await client.getProperty(destination: dest, path: "/test/errors", interface: testInterface, name: "Level") == .uint16(7))
        }
    }

    @Test("handler errors: a named error keeps its name; others become Failed; a wrong reply type is caught")
    func handlerErrors() async throws {
        try await withBusPair { _, server, client in
            try await exportErrorFixture(server)
            let dest = server.uniqueName
            do {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Refuse")
                Issue.record("no error")
            } catch let error as DBusError {
                #expect(error.name.rawValue == "org.proximityd.Error.NotPermitted")
                #expect(error.message == "not today")
            }
            await expectError("org.freedesktop.DBus.Error.Failed") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Crash")
            }
            await expectError("org.freedesktop.DBus.Error.Failed") {
                _ = try await client.call(destination: dest, path: "/test/errors", interface: testInterface, member: "Lie")
            }
        }
    }

    @Test("an error message is at most 1024 characters, the note of what was cut included", arguments: [1023, 1024, 1025, 5000])
    func cappedMessage(_ length: Int32) async throws {
        try await withBusPair { _, server, client in
            try await exportErrorFixture(server)
            do {
                _ = try await client.call(destination: server.uniqueName, path: "/test/errors", interface: testInterface,
                                          member: "Ramble", [.int32(length)])
                Issue.record("no error")
            } catch let error as DBusError {
                #expect(error.name.rawValue == "org.proximityd.Error.InvalidArguments")
                #expect(error.message.count <= 1024, "\(error.message.count) characters")
                if length <= 1024 {
                    #expect(error.message == String(repeating: "é", count: Int(length)))
                } else {
                    #expect(error.message.hasSuffix("… (\(Int(length) - 992) more characters)"), "\(error.message.suffix(40))")
                    #expect(error.message.hasPrefix(String(repeating: "é", count: 992) + "…"))
                }
            }
        }
    }

    @Test("calling a name nobody owns gives ServiceUnknown")
    func serviceUnknown() async throws {
        try await withBusPair { _, _, client in
            await expectError("org.freedesktop.DBus.Error.ServiceUnknown") {
                _ = try await client.call(destination: "org.nobody.Here", path: "/", interface: .peer, member: "Ping")
            }
        }
    }

    @Test("connecting to a bad or missing address fails with libdbus's error")
    func badAddresses() async throws {
        await expectError("org.freedesktop.DBus.Error.FileNotFound") {
            _ = try await DBusConnection.connect(to: .address("unix:path=/nonexistent/socket"))
        }
        await expectError("org.freedesktop.DBus.Error.BadAddress") {
            _ = try await DBusConnection.connect(to: .address("nonsense:foo=bar"))
        }
        #expect(throws: DBusError.self) { try BusAddress(parsing: "not-an-address") }
    }
}
