import DBusKit
import Foundation
import ProximityTesting
import Testing

/// The standard interfaces when a call names no interface (the D-Bus specification makes the
/// interface optional in method calls: dispatch is then by member), and `Properties.Get` on the
/// standard interfaces themselves.
@Suite("Standard interfaces: calls without an interface, Get on a standard interface")
struct StandardInterfaceTests {
    static let standardNames: [InterfaceName] = [.introspectable, .properties, .peer, .objectManager]

    func settable() -> DBusInterface {
        DBusInterface(testInterface, properties: [
            DBusProperty("Count", .int32, .int32(3)),
            DBusProperty("Level", .uint16, .uint16(1)) { value in value },
        ])
    }

    func expectError(_ expected: ErrorName, message: String? = nil, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(expected), got success")
        } catch let error as DBusError {
            #expect(error.name == expected, "\(error)")
            if let message { #expect(error.message == message) }
        } catch {
            Issue.record("expected \(expected), got \(error)")
        }
    }

    @Test("Get, GetAll and Set without an interface are Properties calls")
    func propertiesWithoutInterface() async throws {
        try await withBusPair { _, server, client in
            let object = try await server.export([settable()], at: "/test/props")
            let dest = server.uniqueName
            let got = try await client.call(destination: dest, path: "/test/props", interface: nil, member: "Get",
                                            [.string(testInterface.rawValue), .string("Count")])
            #expect(got == [.variant(.int32(3))])
            let all = try await client.call(destination: dest, path: "/test/props", interface: nil, member: "GetAll",
                                            [.string(testInterface.rawValue)])
            #expect(all.first?.stringKeyedDictionary == ["Count": .variant(.int32(3)), "Level": .variant(.uint16(1))])
            let set = try await client.call(destination: dest, path: "/test/props", interface: nil, member: "Set",
                                            [.string(testInterface.rawValue), .string("Level"), .variant(.uint16(7))])
            #expect(set.isEmpty)
            #expect(await object.value(of: "Level", interface: testInterface) == .uint16(7))

            // Errors name the standard interface that answered.
            await expectError(.invalidArgs, message: "Invalid arguments 's' to call org.freedesktop.DBus.Properties.Get(), expecting 'ss'.") {
                _ = try await client.call(destination: dest, path: "/test/props", interface: nil, member: "Get", [.string("x")])
            }
            await expectError(.unknownProperty, message: "Unknown property 'Nope' on interface 'org.proximityd.Test1'.") {
                _ = try await client.call(destination: dest, path: "/test/props", interface: nil, member: "Get",
                                          [.string(testInterface.rawValue), .string("Nope")])
            }
            await expectError(.unknownObject) {
                _ = try await client.call(destination: dest, path: "/nowhere", interface: nil, member: "GetAll",
                                          [.string(testInterface.rawValue)])
            }
        }
    }

    @Test("Ping and GetMachineId without an interface are Peer calls, at any path")
    func peerWithoutInterface() async throws {
        try await withBusPair { _, server, client in
            _ = try await server.export([settable()], at: "/test/props")
            let dest = server.uniqueName
            for path: ObjectPath in ["/test/props", "/", "/nowhere"] {
                let pong = try await client.call(destination: dest, path: path, interface: nil, member: "Ping")
                #expect(pong.isEmpty)
                let bare = try await client.call(destination: dest, path: path, interface: nil, member: "GetMachineId")
                // libdbus answers Peer.GetMachineId itself when the interface is named.
                let named = try await client.call(destination: dest, path: path, interface: .peer, member: "GetMachineId")
                #expect(bare == named)
                #expect(bare.first?.string?.count == 32)
            }
            await expectError(.invalidArgs, message: "Invalid arguments 'i' to call org.freedesktop.DBus.Peer.Ping(), expecting ''.") {
                _ = try await client.call(destination: dest, path: "/", interface: nil, member: "Ping", [.int32(1)])
            }
        }
    }

    @Test("an object's own method of the same name wins over the standard member")
    func userMethodWins() async throws {
        try await withBusPair { _, server, client in
            _ = try await server.export([DBusInterface(testInterface, methods: [
                DBusMethod("Get", outputs: [DBusArgument("who", .string)]) { _ in [.string("mine")] },
                DBusMethod("Ping", outputs: [DBusArgument("who", .string)]) { _ in [.string("my ping")] },
            ])], at: "/test/own")
            let dest = server.uniqueName
            #expect(try await client.call(destination: dest, path: "/test/own", interface: nil, member: "Get") == [.string("mine")])
            #expect(try await client.call(destination: dest, path: "/test/own", interface: nil, member: "Ping") == [.string("my ping")])
            // Named interfaces still go where they say.
            #expect(try await client.call(destination: dest, path: "/test/own", interface: .peer, member: "Ping").isEmpty)
            await expectError(.unknownInterface) {
                _ = try await client.call(destination: dest, path: "/test/own", interface: .properties, member: "GetAll",
                                          [.string("org.nope.X1")])
            }
        }
    }

    @Test("Get on a standard interface at a known path is UnknownProperty, as GetAll is {}")
    func getOnStandardInterface() async throws {
        try await withBusPair { _, server, client in
            try await server.addObjectManager(at: "/test")
            _ = try await server.export([settable()], at: "/test/a/b")
            let dest = server.uniqueName
            // An object, the manager, a path with only children below it, and the root.
            for path: ObjectPath in ["/test/a/b", "/test", "/test/a", "/"] {
                for standard in Self.standardNames {
                    await expectError(.unknownProperty, message: "Unknown property 'X' on interface '\(standard)'.") {
                        _ = try await client.getProperty(destination: dest, path: path, interface: standard, name: "X")
                    }
                    #expect(try await client.getAllProperties(destination: dest, path: path, interface: standard) == [:])
                }
            }
            await expectError(.unknownObject) {
                _ = try await client.getProperty(destination: dest, path: "/elsewhere", interface: .peer, name: "X")
            }
            await expectError(.unknownInterface) {
                _ = try await client.getProperty(destination: dest, path: "/test/a/b", interface: "org.nope.X1", name: "X")
            }
        }
    }
}
