import DBusKit
import Foundation
import ProximityTesting
import Testing

@Suite("Exported objects: Properties, ObjectManager, Introspectable, Peer")
struct ObjectTests {
    func counterInterface(_ initial: Int32 = 0) -> DBusInterface {
        DBusInterface(testInterface, properties: [
            DBusProperty("Count", .int32, .int32(initial)),
            DBusProperty("Label", .string, .string("a")),
            DBusProperty("Secret", .string, .string("s"), changeSignal: .invalidates),
            DBusProperty("Quiet", .string, .string("q"), changeSignal: .none),
        ])
    }

    @Test("PropertiesChanged: changes made in one loop turn arrive as one signal; invalidates and none are honoured")
    func propertiesChanged() async throws {
        try await withBusPair { _, server, client in
            let object = try await server.export([counterInterface()], at: "/test/counter")
            let changes = try await client.subscribe(MatchRule(sender: server.uniqueName, path: "/test/counter",
                                                               interface: .properties, member: "PropertiesChanged"))
            object.set(["Count": .int32(5), "Label": .string("b"), "Secret": .string("t"), "Quiet": .string("r")], interface: testInterface)
            let message = try await next(changes)
            #expect(message.body[0] == .string(testInterface.rawValue))
            let changed = message.body[1].stringKeyedDictionary ?? [:]
            #expect(changed == ["Count": .variant(.int32(5)), "Label": .variant(.string("b"))])
            #expect(message.body[2] == .strings(["Secret"]))
            // "Quiet" changed without a signal, but reads back.
            #expect(try await client.getProperty(destination: server.uniqueName, path: "/test/counter",
                                                 interface: testInterface, name: "Quiet") == .string("r"))
            // Setting the same value again emits nothing; the next real change is the next signal.
            object.set("Count", .int32(5), interface: testInterface)
            object.set("Count", .int32(6), interface: testInterface)
            let after = try await next(changes)
            #expect(after.body[1].stringKeyedDictionary == ["Count": .variant(.int32(6))])
        }
    }

    @Test("GetAll returns every property in declaration order")
    func getAll() async throws {
        try await withBusPair { _, server, client in
            _ = try await server.export([counterInterface(3)], at: "/test/counter")
            let all = try await client.getAllProperties(destination: server.uniqueName, path: "/test/counter", interface: testInterface)
            #expect(all == ["Count": .int32(3), "Label": .string("a"), "Secret": .string("s"), "Quiet": .string("q")])
        }
    }

    @Test("ObjectManager: InterfacesAdded and InterfacesRemoved as objects come and go; GetManagedObjects lists descendants")
    func objectManager() async throws {
        try await withBusPair { _, server, client in
            try await server.addObjectManager(at: "/test")
            _ = try await server.export([counterInterface()], at: "/test")   // the manager's own object is not listed
            let signals = try await client.subscribe(MatchRule(sender: server.uniqueName, path: "/test", interface: .objectManager))
            let child = try await server.export([counterInterface(7)], at: "/test/items/one")
            let added = try await next(signals)
            #expect(added.member == "InterfacesAdded")
            #expect(added.body[0] == .objectPath("/test/items/one"))
            let interfaces = added.body[1].dictEntries ?? []
            #expect(interfaces.map(\.key) == [.string(testInterface.rawValue)])
            #expect(interfaces.first?.value.stringKeyedDictionary?["Count"] == .variant(.int32(7)))

            let managed = try await client.call(destination: server.uniqueName, path: "/test", interface: .objectManager,
                                                member: "GetManagedObjects")
            #expect(managed.first?.dictEntries?.map(\.key) == [.objectPath("/test/items/one")])

            let extra = DBusInterface("org.proximityd.Extra1", properties: [DBusProperty("On", .boolean, .boolean(true))])
            try await child.add(extra)
            let addedExtra = try await next(signals)
            #expect(addedExtra.member == "InterfacesAdded")
            #expect(addedExtra.body[1].dictEntries?.map(\.key) == [.string("org.proximityd.Extra1")])

            await child.unexport()
            let removed = try await next(signals)
            #expect(removed.member == "InterfacesRemoved")
            #expect(removed.body == [.objectPath("/test/items/one"), .strings([testInterface.rawValue, "org.proximityd.Extra1"])])
            let after = try await client.call(destination: server.uniqueName, path: "/test", interface: .objectManager,
                                              member: "GetManagedObjects")
            #expect(after.first?.dictEntries?.isEmpty == true)
        }
    }

    @Test("Introspect lists interfaces, standard interfaces and child nodes; unknown paths are UnknownObject")
    func introspection() async throws {
        try await withBusPair { _, server, client in
            try await server.addObjectManager(at: "/test")
            _ = try await server.export([counterInterface()], at: "/test/a/b")
            let root = try await client.call(destination: server.uniqueName, path: "/", interface: .introspectable, member: "Introspect")
            #expect(root.first?.string?.contains("<node name=\"test\"/>") == true)
            let middle = try await client.call(destination: server.uniqueName, path: "/test/a", interface: .introspectable, member: "Introspect")
            #expect(middle.first?.string?.contains("<node name=\"b\"/>") == true)
            let leaf = try await client.call(destination: server.uniqueName, path: "/test/a/b", interface: .introspectable, member: "Introspect")
            let xml = leaf.first?.string ?? ""
            #expect(xml.contains("<interface name=\"org.proximityd.Test1\">"))
            #expect(xml.contains("<property name=\"Secret\" type=\"s\" access=\"read\">"))
            #expect(xml.contains("value=\"invalidates\""))
            #expect(xml.contains("<interface name=\"org.freedesktop.DBus.Properties\">"))
            let manager = try await client.call(destination: server.uniqueName, path: "/test", interface: .introspectable, member: "Introspect")
            #expect(manager.first?.string?.contains("org.freedesktop.DBus.ObjectManager") == true)
            do {
                _ = try await client.call(destination: server.uniqueName, path: "/elsewhere", interface: .introspectable, member: "Introspect")
                Issue.record("no error")
            } catch let error as DBusError {
                #expect(error.name == .unknownObject)
            }
        }
    }

    @Test("Peer.Ping and GetMachineId answer")
    func peer() async throws {
        try await withBusPair { _, server, client in
            _ = try await client.call(destination: server.uniqueName, path: "/", interface: .peer, member: "Ping")
            let id = try await client.call(destination: server.uniqueName, path: "/", interface: .peer, member: "GetMachineId")
            #expect(id.first?.string?.count == 32)
        }
    }
}
